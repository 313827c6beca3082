//===- StoreServer.h - Rank 0's rendezvous server ---------------*- C++ -*-===//
//
// One accept thread plus one thread per client connection (a job has a
// handful of ranks, each holding one connection). Blocking gets wait on a
// condition variable on the server, so clients never poll.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_COMM_STORESERVER_H
#define FSDP_RT_COMM_STORESERVER_H

#include "Socket.h"

#include <nlohmann/json.hpp>

#include <condition_variable>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fsdp {
namespace rt {
namespace comm {

class StoreServer {
public:
  StoreServer(const std::string &bindHost, int port, std::string jobId);
  /// Serves on an already-listening socket (one a launcher bound).
  StoreServer(Socket listener, std::string jobId);
  ~StoreServer();
  int port() const { return port_; }

private:
  struct Connection {
    std::shared_ptr<Socket> socket;
    std::thread thread;
  };
  void acceptLoop();
  void serve(std::shared_ptr<Socket> socket);
  /// Returns the reply; sets `close` when the connection must be dropped.
  nlohmann::json handle(const nlohmann::json &request, bool &close);

  const std::string jobId_;
  Socket listener_;
  int port_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  std::map<std::string, std::vector<char>> data_;
  std::list<Connection> connections_;
  std::thread acceptThread_;
};

} // namespace comm
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMM_STORESERVER_H
