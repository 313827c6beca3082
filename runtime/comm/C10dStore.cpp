//===- C10dStore.cpp - Client of PyTorch's c10d TCPStore ------------------===//
//
// Under torchrun the elastic agent already serves a c10d TCPStore on
// MASTER_ADDR:MASTER_PORT and tells its workers so
// (TORCHELASTIC_USE_AGENT_STORE=True); a worker that served its own store
// there would find the port taken. This client speaks that store's wire
// protocol (torch/csrc/distributed/c10d/TCPStore.cpp and
// store/TCPStoreBackend.hpp in pytorch/pytorch; the classic and the libuv
// servers answer it alike), the four requests our Store needs:
//
//   every message:  u8 query type, then its fields; integers are native
//                   (little-endian) fixed width, a string or byte vector is
//                   a u64 length and the bytes
//   on connect:     VALIDATE u32 0x3C85F7CE (no answer), PING u32 nonce
//                   -> u32 nonce
//   SET key value   (no answer)
//   WAIT u64 n, n keys -> u8 STOP_WAITING; at our deadline we send
//                   CANCEL_WAIT and read WAIT_CANCELED (a STOP_WAITING may
//                   come first, if the key arrived meanwhile)
//   GET key         -> bytes (after a WAIT: the server blocks otherwise)
//   ADD key i64     -> i64
//   CHECK u64 n, n keys -> u8 READY (0) or NOT_READY (1)
//
// Written by hand: the wheel ships the protocol's header, not a client
// library without libtorch, and the runtime links no Python or libtorch.
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/CommStore.h"

#include "Socket.h"

#include "fsdp/rt/Error.h"

#include <cstring>
#include <unistd.h>

namespace fsdp {
namespace rt {

namespace {

constexpr uint32_t kValidationMagic = 0x3C85F7CE;

enum class Query : uint8_t {
  Validate = 0,
  Set = 1,
  Get = 3,
  Add = 4,
  Check = 5,
  Wait = 6,
  CancelWait = 12,
  Ping = 13,
};
constexpr uint8_t kReady = 0, kStopWaiting = 0, kWaitCanceled = 1;

/// One request, built whole and sent in one write.
class Message {
public:
  explicit Message(Query q) { bytes_.push_back(static_cast<char>(q)); }
  template <typename T> Message &value(T v) {
    const char *p = reinterpret_cast<const char *>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
    return *this;
  }
  Message &bytes(const char *data, size_t n) {
    value<uint64_t>(n);
    bytes_.insert(bytes_.end(), data, data + n);
    return *this;
  }
  Message &string(const std::string &s) { return bytes(s.data(), s.size()); }
  const std::vector<char> &data() const { return bytes_; }

private:
  std::vector<char> bytes_;
};

} // namespace

struct C10dStore::Connection {
  comm::Socket socket;

  void send(const Message &m, comm::Deadline deadline) {
    socket.sendAll(m.data().data(), m.data().size(), deadline);
  }
  template <typename T> T receive(comm::Deadline deadline) {
    T v{};
    if (!socket.recvAll(&v, sizeof v, deadline))
      fail(Status::IO, "the store closed the connection");
    return v;
  }
  std::vector<char> receiveBytes(comm::Deadline deadline) {
    auto n = receive<uint64_t>(deadline);
    if (n > (uint64_t(1) << 32))
      fail(Status::Format, "a value of ", n, " bytes: not a c10d store?");
    std::vector<char> v(n);
    if (n && !socket.recvAll(v.data(), n, deadline))
      fail(Status::IO, "the store closed the connection");
    return v;
  }
};

C10dStore::C10dStore(std::string host, int port,
                     std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout),
      conn_(std::make_unique<Connection>()) {
  comm::Deadline deadline = comm::deadlineIn(timeout);
  try {
    conn_->socket = comm::Socket::connect(host_, port_, deadline);
    conn_->send(Message(Query::Validate).value(kValidationMagic), deadline);
    auto nonce = static_cast<uint32_t>(::getpid());
    conn_->send(Message(Query::Ping).value(nonce), deadline);
    if (conn_->receive<uint32_t>(deadline) != nonce)
      fail(Status::Format, "its answer to a ping is not the ping's nonce");
  } catch (const Error &e) {
    fail(Status::IO, "torchrun's store (c10d TCPStore) at ", host_, ":", port_,
         " not usable within ", timeout.count(), " ms: ", e.what(),
         " (TORCHELASTIC_USE_AGENT_STORE=True says the agent serves it at "
         "MASTER_ADDR:MASTER_PORT)");
  }
}

C10dStore::~C10dStore() = default;

template <typename F> auto C10dStore::request(const char *op,
                                              const std::string &key, F &&f) {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    return f(comm::deadlineIn(timeout_));
  } catch (const Error &e) {
    fail(e.status(), "torchrun's store ", host_, ":", port_, " (", op, " '",
         key, "'): ", e.what());
  }
}

void C10dStore::set(const std::string &key, const std::vector<char> &value) {
  request("set", key, [&](comm::Deadline deadline) {
    conn_->send(
        Message(Query::Set).string(key).bytes(value.data(), value.size()),
        deadline);
    return 0;
  });
}

std::vector<char> C10dStore::get(const std::string &key,
                                 std::chrono::milliseconds timeout) {
  return request("get", key, [&](comm::Deadline deadline) {
    conn_->send(Message(Query::Wait).value<uint64_t>(1).string(key),
                deadline);
    // Our wait, then the usual bound for the server's answers.
    comm::Deadline waitEnd = comm::deadlineIn(timeout);
    uint8_t answer = 0;
    bool arrived = false;
    try {
      answer = conn_->receive<uint8_t>(waitEnd);
      arrived = true;
    } catch (const Error &) {
      if (comm::Clock::now() < waitEnd)
        throw; // the connection failed, not the wait
    }
    deadline = comm::deadlineIn(timeout_);
    if (!arrived) {
      conn_->send(Message(Query::CancelWait), deadline);
      answer = conn_->receive<uint8_t>(deadline);
      if (answer == kStopWaiting) // it came meanwhile; the cancel's answer
        answer = conn_->receive<uint8_t>(deadline);
      if (answer != kWaitCanceled)
        fail(Status::Format, "an answer ", int(answer), " to CANCEL_WAIT");
      fail(Status::IO, "timed out after ", timeout.count(),
           " ms waiting for the key");
    }
    if (answer != kStopWaiting)
      fail(Status::Format, "an answer ", int(answer), " to WAIT");
    conn_->send(Message(Query::Get).string(key), deadline);
    return conn_->receiveBytes(deadline);
  });
}

bool C10dStore::check(const std::string &key) {
  return request("check", key, [&](comm::Deadline deadline) {
    conn_->send(Message(Query::Check).value<uint64_t>(1).string(key),
                deadline);
    return conn_->receive<uint8_t>(deadline) == kReady;
  });
}

int64_t C10dStore::add(const std::string &key, int64_t delta) {
  return request("add", key, [&](comm::Deadline deadline) {
    conn_->send(Message(Query::Add).string(key).value<int64_t>(delta),
                deadline);
    return conn_->receive<int64_t>(deadline);
  });
}

} // namespace rt
} // namespace fsdp
