//===- CommStore.h - Rendezvous key-value store -----------------*- C++ -*-===//
//
// Ranks find each other through a small key-value store served over TCP by
// rank 0 (or, under torchrun, by torchrun's agent: C10dStore), so that no
// shared file system is needed. Gloo connects its pairs
// through it (the addresses of every rank's listening socket) and the NCCL
// backend exchanges its unique id through it. Every request carries the job
// id; the server answers only its own job and drops connections that send
// anything that is not a well-formed request.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_COMMSTORE_H
#define FSDP_RT_COMMSTORE_H

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {

class Store {
public:
  virtual ~Store();
  virtual void set(const std::string &key, const std::vector<char> &value) = 0;
  /// Blocks until `key` exists; throws Error(IO) naming the key on timeout.
  virtual std::vector<char> get(const std::string &key,
                                std::chrono::milliseconds timeout) = 0;
  virtual bool check(const std::string &key) = 0;
  /// Atomically adds `delta` to the integer stored at `key` (0 if absent).
  virtual int64_t add(const std::string &key, int64_t delta) = 0;
};

struct TcpStoreOptions {
  /// Address clients connect to (MASTER_ADDR).
  std::string host = "127.0.0.1";
  /// MASTER_PORT; 0 lets the server pick one (see TcpStore::port()).
  int port = 29500;
  /// Address the server binds; empty means `host`, so the default serves on
  /// loopback only and another host must be asked for explicitly.
  std::string bindHost;
  std::string jobId = "fsdprt";
  bool isServer = false;
  /// The server's listening socket when a launcher bound it already (fsdp-run
  /// --nproc: no other job can take the port between choosing and serving);
  /// -1 binds `port`.
  int listenFd = -1;
  /// Bounds connecting to the server and each blocking request.
  std::chrono::milliseconds timeout{60000};
};

namespace comm {
class StoreServer;
class Socket;
} // namespace comm

class TcpStore : public Store {
public:
  explicit TcpStore(const TcpStoreOptions &options);
  ~TcpStore() override;

  /// The port actually served/connected to.
  int port() const { return port_; }
  const TcpStoreOptions &options() const { return options_; }

  void set(const std::string &key, const std::vector<char> &value) override;
  std::vector<char> get(const std::string &key,
                        std::chrono::milliseconds timeout) override;
  bool check(const std::string &key) override;
  int64_t add(const std::string &key, int64_t delta) override;

private:
  struct Reply;
  Reply request(const char *op, const std::string &key,
                const std::vector<char> *value, int64_t number,
                std::chrono::milliseconds wait);

  TcpStoreOptions options_;
  int port_;
  std::unique_ptr<comm::StoreServer> server_;
  std::unique_ptr<comm::Socket> conn_;
  std::mutex mutex_; // one request in flight per connection
};

/// A client of PyTorch's c10d TCPStore: torchrun's agent serves one on
/// MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), and the
/// ranks join it instead of serving their own (the wire protocol:
/// comm/C10dStore.cpp).
class C10dStore : public Store {
public:
  C10dStore(std::string host, int port, std::chrono::milliseconds timeout);
  ~C10dStore() override;

  void set(const std::string &key, const std::vector<char> &value) override;
  std::vector<char> get(const std::string &key,
                        std::chrono::milliseconds timeout) override;
  bool check(const std::string &key) override;
  int64_t add(const std::string &key, int64_t delta) override;

private:
  struct Connection;
  template <typename F>
  auto request(const char *op, const std::string &key, F &&f);

  std::string host_;
  int port_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Connection> conn_;
  std::mutex mutex_; // one request in flight on the connection
};

/// Keys of `inner` seen under "<prefix>/"; used to give each process group
/// its own namespace in the one store of a job.
class PrefixStore : public Store {
public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> inner)
      : prefix_(std::move(prefix) + "/"), inner_(std::move(inner)) {}
  void set(const std::string &key, const std::vector<char> &value) override {
    inner_->set(prefix_ + key, value);
  }
  std::vector<char> get(const std::string &key,
                        std::chrono::milliseconds timeout) override {
    return inner_->get(prefix_ + key, timeout);
  }
  bool check(const std::string &key) override {
    return inner_->check(prefix_ + key);
  }
  int64_t add(const std::string &key, int64_t delta) override {
    return inner_->add(prefix_ + key, delta);
  }

private:
  std::string prefix_;
  std::shared_ptr<Store> inner_;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMMSTORE_H
