//===- Socket.cpp - Blocking TCP sockets with deadlines -------------------===//
#include "Socket.h"

#include "fsdp/rt/Error.h"

#include <cerrno>
#include <cstring>
#include <thread>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fsdp {
namespace rt {
namespace comm {

namespace {
struct AddrInfo {
  addrinfo *list = nullptr;
  ~AddrInfo() {
    if (list)
      freeaddrinfo(list);
  }
};

void resolve(const std::string &host, int port, bool passive, AddrInfo &out) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &out.list);
  if (rc != 0)
    fail(Status::IO, "cannot resolve '", host, "': ", gai_strerror(rc));
}

int remainingMs(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}
} // namespace

Socket::~Socket() {
  if (fd_ >= 0)
    ::close(fd_);
}

Socket::Socket(Socket &&other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

Socket &Socket::operator=(Socket &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::shutdown() {
  if (fd_ >= 0)
    ::shutdown(fd_, SHUT_RDWR);
}

Socket Socket::listen(const std::string &host, int port) {
  AddrInfo ai;
  resolve(host, port, true, ai);
  int lastErrno = 0;
  for (addrinfo *a = ai.list; a; a = a->ai_next) {
    Socket s(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
    if (!s.valid()) {
      lastErrno = errno;
      continue;
    }
    int one = 1;
    ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.fd(), a->ai_addr, a->ai_addrlen) == 0 &&
        ::listen(s.fd(), 128) == 0)
      return s;
    lastErrno = errno;
  }
  fail(Status::IO, "cannot listen on ", host, ":", port, ": ",
       std::strerror(lastErrno));
}

int Socket::localPort() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd_, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    fail(Status::IO, "getsockname: ", std::strerror(errno));
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
}

Socket Socket::accept() {
  for (;;) {
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return Socket(fd);
    }
    if (errno == EINTR || errno == ECONNABORTED)
      continue;
    return Socket(); // shut down (EINVAL) or closed
  }
}

Socket Socket::connect(const std::string &host, int port, Deadline deadline) {
  std::string lastError = "deadline already passed";
  for (;;) {
    AddrInfo ai;
    resolve(host, port, false, ai);
    for (addrinfo *a = ai.list; a; a = a->ai_next) {
      Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC,
                        a->ai_protocol));
      if (!s.valid())
        continue;
      if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) == 0) {
        int one = 1;
        ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return s;
      }
      lastError = std::strerror(errno);
    }
    if (Clock::now() >= deadline)
      fail(Status::IO, "cannot connect to ", host, ":", port, ": ", lastError);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Socket::waitFor(short events, Deadline deadline, const char *what) {
  for (;;) {
    pollfd p{fd_, events, 0};
    int rc = ::poll(&p, 1, remainingMs(deadline));
    if (rc > 0)
      return;
    if (rc == 0)
      fail(Status::IO, "timed out ", what);
    if (errno != EINTR)
      fail(Status::IO, "poll while ", what, ": ", std::strerror(errno));
  }
}

void Socket::sendAll(const void *data, size_t bytes, Deadline deadline) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    waitFor(POLLOUT, deadline, "sending");
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      fail(Status::IO, "send: ", std::strerror(errno));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

bool Socket::recvAll(void *data, size_t bytes, Deadline deadline) {
  char *p = static_cast<char *>(data);
  size_t got = 0;
  while (got < bytes) {
    waitFor(POLLIN, deadline, "receiving");
    ssize_t n = ::recv(fd_, p + got, bytes - got, 0);
    if (n == 0) {
      if (got == 0)
        return false;
      fail(Status::IO, "connection closed in the middle of a message");
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      fail(Status::IO, "recv: ", std::strerror(errno));
    }
    got += static_cast<size_t>(n);
  }
  return true;
}

} // namespace comm
} // namespace rt
} // namespace fsdp
