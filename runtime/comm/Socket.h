//===- Socket.h - Blocking TCP sockets with deadlines -----------*- C++ -*-===//
//
// The rendezvous store needs TCP before any communicator exists, and Gloo's
// snapshot in Debian has no TCP store, so this is a thin RAII layer over BSD
// sockets. Every blocking call takes a deadline: a peer that never answers
// becomes an Error, never a hang.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_COMM_SOCKET_H
#define FSDP_RT_COMM_SOCKET_H

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace fsdp {
namespace rt {
namespace comm {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadlineIn(std::chrono::milliseconds ms) {
  return Clock::now() + ms;
}

class Socket {
public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket &&other) noexcept;
  Socket &operator=(Socket &&other) noexcept;
  Socket(const Socket &) = delete;
  Socket &operator=(const Socket &) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  /// Wakes a thread blocked on this socket (accept, recv) from another one.
  void shutdown();

  /// Listens on host:port (port 0 picks one); resolves `host` first.
  static Socket listen(const std::string &host, int port);
  /// Port the listening socket is bound to.
  int localPort() const;
  /// Accepts one connection; returns an invalid socket on shutdown().
  Socket accept();
  /// Connects, retrying refused/unreachable attempts until `deadline`
  /// (the server may not be up yet when a rank starts).
  static Socket connect(const std::string &host, int port, Deadline deadline);

  /// Throws Error(IO) on failure, closed peer or deadline.
  void sendAll(const void *data, size_t bytes, Deadline deadline);
  /// Returns false if the peer closed cleanly before the first byte.
  bool recvAll(void *data, size_t bytes, Deadline deadline);

private:
  void waitFor(short events, Deadline deadline, const char *what);
  int fd_ = -1;
};

} // namespace comm
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMM_SOCKET_H
