//===- StoreTest.cpp - The TCP rendezvous store ---------------------------===//
#include "fsdp/rt/CommStore.h"
#include "fsdp/rt/Error.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

namespace fsdp {
namespace rt {
namespace {

using std::chrono::milliseconds;

TcpStoreOptions serverOptions(const std::string &job = "job-a") {
  TcpStoreOptions o;
  o.port = 0; // any free port
  o.isServer = true;
  o.jobId = job;
  o.timeout = milliseconds(2000);
  return o;
}

TcpStoreOptions clientOf(const TcpStore &server,
                         const std::string &job = "job-a") {
  TcpStoreOptions o = server.options();
  o.port = server.port();
  o.isServer = false;
  o.jobId = job;
  return o;
}

std::vector<char> bytes(const std::string &s) {
  return std::vector<char>(s.begin(), s.end());
}

/// Connects a raw TCP socket to the server (for malformed traffic).
int rawConnect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)),
            0);
  return fd;
}

/// True if the server closed the connection (recv returns 0 or fails).
bool closedByServer(int fd) {
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0)
      return n == 0 || errno == ECONNRESET;
  }
}

TEST(TcpStore, SetGetCheckAddAcrossClients) {
  TcpStore server(serverOptions());
  TcpStore client(clientOf(server));
  EXPECT_FALSE(client.check("k"));
  server.set("k", bytes("value\0with nul"));
  EXPECT_TRUE(client.check("k"));
  EXPECT_EQ(client.get("k", milliseconds(100)), bytes("value\0with nul"));
  EXPECT_EQ(client.add("n", 2), 2);
  EXPECT_EQ(server.add("n", 3), 5);
}

TEST(TcpStore, ServesOnASocketALauncherAlreadyBound) {
  // fsdp-run's launcher binds and listens before any rank starts, so the
  // port is taken from the start; rank 0's server adopts the socket.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len), 0);
  int port = ntohs(addr.sin_port);
  TcpStoreOptions options = serverOptions();
  options.port = port;
  options.listenFd = fd;
  TcpStore server(options);
  EXPECT_EQ(server.port(), port);
  TcpStore client(clientOf(server));
  EXPECT_EQ(client.add("n", 2), 2);
  EXPECT_EQ(server.add("n", 1), 3);
}

TEST(TcpStore, GetBlocksUntilAnotherClientSets) {
  TcpStore server(serverOptions());
  TcpStore client(clientOf(server));
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(100));
    server.set("late", bytes("x"));
  });
  EXPECT_EQ(client.get("late", milliseconds(5000)), bytes("x"));
  setter.join();
}

TEST(TcpStore, GetTimesOutNamingTheKey) {
  TcpStore server(serverOptions());
  try {
    server.get("never", milliseconds(100));
    FAIL() << "get of a missing key returned";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), Status::IO);
    EXPECT_NE(std::string(e.what()).find("'never'"), std::string::npos)
        << e.what();
  }
}

TEST(TcpStore, RejectsRequestsOfAnotherJob) {
  TcpStore server(serverOptions("job-a"));
  TcpStore foreign(clientOf(server, "job-b"));
  try {
    foreign.set("k", bytes("v"));
    FAIL() << "a foreign job's set was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("job 'job-b'"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(server.check("k"));
}

TEST(TcpStore, DropsMalformedTrafficAndKeepsServing) {
  TcpStore server(serverOptions());
  // Not our magic at all (an HTTP request).
  int fd = rawConnect(server.port());
  const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, http, sizeof(http) - 1, 0), ssize_t(sizeof(http) - 1));
  EXPECT_TRUE(closedByServer(fd));
  ::close(fd);
  // Right magic, absurd length.
  fd = rawConnect(server.port());
  const unsigned char huge[] = {'F', 'S', 'K', '1', 0x7f, 0xff, 0xff, 0xff};
  ASSERT_EQ(::send(fd, huge, sizeof(huge), 0), ssize_t(sizeof(huge)));
  EXPECT_TRUE(closedByServer(fd));
  ::close(fd);
  // Right magic and length, payload not CBOR.
  fd = rawConnect(server.port());
  const unsigned char junk[] = {'F', 'S', 'K',  '1',  0,   0,
                                0,   3,   0xff, 0xff, 0xff};
  ASSERT_EQ(::send(fd, junk, sizeof(junk), 0), ssize_t(sizeof(junk)));
  EXPECT_TRUE(closedByServer(fd));
  ::close(fd);
  TcpStore client(clientOf(server));
  client.set("still", bytes("ok"));
  EXPECT_EQ(server.get("still", milliseconds(100)), bytes("ok"));
}

TEST(TcpStore, ClientGivesUpWhenNoServerWithinTimeout) {
  int port;
  {
    TcpStore server(serverOptions());
    port = server.port();
  } // nothing listens on `port` any more
  TcpStoreOptions o;
  o.port = port;
  o.timeout = milliseconds(300);
  auto start = std::chrono::steady_clock::now();
  try {
    TcpStore client(o);
    FAIL() << "connected to a store that does not exist";
  } catch (const Error &e) {
    EXPECT_EQ(e.status(), Status::IO);
    EXPECT_NE(std::string(e.what()).find("not reachable within 300 ms"),
              std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

/// A non-loopback IPv4 address of this machine, or "" if it has none.
std::string externalAddress() {
  ifaddrs *list = nullptr;
  if (::getifaddrs(&list) != 0)
    return "";
  std::string found;
  for (ifaddrs *a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET)
      continue;
    auto *in = reinterpret_cast<sockaddr_in *>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
      continue;
    char text[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    found = text;
  }
  ::freeifaddrs(list);
  return found;
}

TEST(TcpStore, BindsLoopbackUnlessToldOtherwise) {
  std::string external = externalAddress();
  if (external.empty())
    GTEST_SKIP() << "this machine has no non-loopback IPv4 address";
  TcpStore server(serverOptions());
  TcpStoreOptions o = clientOf(server);
  o.host = external;
  o.timeout = milliseconds(200);
  EXPECT_THROW(TcpStore reach(o), Error)
      << "the default store was reachable on " << external;
  // Told to bind every address, the same client gets through.
  TcpStoreOptions wide = serverOptions();
  wide.bindHost = "0.0.0.0";
  TcpStore open(wide);
  TcpStoreOptions c = clientOf(open);
  c.host = external;
  TcpStore reach(c);
  reach.set("k", bytes("v"));
  EXPECT_TRUE(open.check("k"));
}

} // namespace
} // namespace rt
} // namespace fsdp
