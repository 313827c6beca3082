//===- nccl_emu.cpp - Host emulation of NCCL (tests only) -----------------===//
//
// See nccl.h for what is emulated. One proxy thread per communicator runs
// its collectives in launch order; rank 0's gathers every rank's call and
// data, checks that the calls match, computes each rank's result and sends
// it back. The runtime's Socket (comm/Socket.h) is the transport.
// Over 800 lines: one emulation of one library (communicators, groups,
// splits, capture into graphs, the failure hooks), kept in one test file.
//
//===----------------------------------------------------------------------===//
#include "nccl.h"

#include "comm/Socket.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/math/Half.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ncclemu {

using fsdp::rt::comm::Clock;
using fsdp::rt::comm::Deadline;
using fsdp::rt::comm::Socket;

namespace {

/// Peers wait for each other as long as the job lives: bounding a
/// collective is the communicator's job (it aborts at its deadline), and
/// ncclCommAbort wakes every blocked socket.
Deadline forever() { return Clock::now() + std::chrono::hours(24 * 365); }

enum class Kind : int32_t { AllGather, ReduceScatter, AllReduce, Broadcast, Reduce };

const char *kindName(Kind k) {
  switch (k) {
  case Kind::AllGather:
    return "ncclAllGather";
  case Kind::ReduceScatter:
    return "ncclReduceScatter";
  case Kind::AllReduce:
    return "ncclAllReduce";
  case Kind::Broadcast:
    return "ncclBroadcast";
  case Kind::Reduce:
    return "ncclReduce";
  }
  return "?";
}

/// What every rank's matching call must agree on (sent to rank 0 as is).
struct Call {
  uint64_t seq = 0; // launch order on the communicator
  Kind kind = Kind::AllGather;
  int32_t type = 0;
  int32_t op = 0; // ncclSum, ncclMax, ncclAvg, or ncclNumOps: PreMulSum
  int32_t root = 0;
  uint64_t count = 0; // NCCL's count argument
  double scale = 1.0; // PreMulSum's scalar

  bool operator==(const Call &o) const {
    return seq == o.seq && kind == o.kind && type == o.type && op == o.op &&
           root == o.root && count == o.count && scale == o.scale;
  }
  std::string describe() const {
    std::ostringstream os;
    os << kindName(kind) << "(count " << count << ", type " << type;
    if (kind == Kind::ReduceScatter || kind == Kind::AllReduce ||
        kind == Kind::Reduce)
      os << ", op " << (op == ncclNumOps ? "PreMulSum" : std::to_string(op));
    if (kind == Kind::Broadcast || kind == Kind::Reduce)
      os << ", root " << root;
    os << ")";
    return os.str();
  }
};

/// A launched collective between its stream and the proxy: the stream's
/// worker marks it ready when it reaches it (the data before it is
/// written) and waits until the proxy marks it done (or abort cancels it).
struct Pending {
  std::mutex mutex;
  std::condition_variable changed;
  bool ready = false, done = false;

  void set(bool Pending::*flag) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      this->*flag = true;
    }
    changed.notify_all();
  }
  void await(bool Pending::*flag) {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return this->*flag; });
  }
};

struct Work {
  Call call;
  const void *send = nullptr;
  void *recv = nullptr;
  cudaStream_t stream = nullptr;
  std::shared_ptr<Pending> pending;
};

size_t typeSize(int32_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  default:
    return 8;
  }
}

/// Bytes rank `r` sends for `c` and receives as its result.
size_t sendBytes(const Call &c, int r, int n) {
  size_t bytes = c.count * typeSize(c.type);
  switch (c.kind) {
  case Kind::ReduceScatter:
    return bytes * n;
  case Kind::Broadcast:
    return r == c.root ? bytes : 0;
  default:
    return bytes;
  }
}
size_t resultBytes(const Call &c, int r, int n) {
  size_t bytes = c.count * typeSize(c.type);
  switch (c.kind) {
  case Kind::AllGather:
    return bytes * n;
  case Kind::Reduce:
    return r == c.root ? bytes : 0;
  default:
    return bytes;
  }
}

float loadFloat(int32_t type, const void *p, size_t i) {
  if (type == ncclFloat32)
    return static_cast<const float *>(p)[i];
  uint16_t h = static_cast<const uint16_t *>(p)[i];
  return type == ncclBfloat16 ? fsdp::rt::bf16ToFloat(h)
                              : fsdp::rt::f16ToFloat(h);
}
void storeFloat(int32_t type, void *p, size_t i, float v) {
  if (type == ncclFloat32)
    static_cast<float *>(p)[i] = v;
  else
    static_cast<uint16_t *>(p)[i] = type == ncclBfloat16
                                        ? fsdp::rt::floatToBf16(v)
                                        : fsdp::rt::floatToF16(v);
}
/// `v` rounded to the data type: 16-bit data is reduced in 16-bit storage
/// between ranks, as NCCL's ring does between hops.
float roundTo(int32_t type, float v) {
  float out = 0;
  uint16_t h = 0;
  storeFloat(type, type == ncclFloat32 ? static_cast<void *>(&out) : &h, 0, v);
  return type == ncclFloat32 ? out : loadFloat(type, &h, 0);
}

/// out[i] = the reduction over the ranks (in rank order) of
/// inputs[r][offset + i]. PreMulSum and, on floating types, Avg multiply
/// each input by their scalar (in the data type) before summing.
void reduce(const Call &c, int n, const std::vector<const char *> &inputs,
            size_t offset, size_t count, void *out) {
  bool scaled = c.op == ncclNumOps || c.op == ncclAvg;
  float scale = roundTo(c.type, c.op == ncclAvg ? 1.0f / n
                                                : static_cast<float>(c.scale));
  for (size_t i = 0; i < count; ++i) {
    float acc = 0;
    for (int r = 0; r < n; ++r) {
      float x = loadFloat(c.type, inputs[r], offset + i);
      if (scaled)
        x = roundTo(c.type, x * scale);
      acc = r == 0 ? x
            : c.op == ncclMax ? std::max(acc, x)
                              : roundTo(c.type, acc + x);
    }
    storeFloat(c.type, out, i, acc);
  }
}

} // namespace

/// What a communicator holds on the device (NCCL's buffers; less than a
/// real one's, hundreds of MiB at scale).
constexpr int64_t kEmuCommDeviceBytes = int64_t(8) << 20;

/// One rank's end of a communicator.
struct EmuComm {
  int rank = 0, nranks = 0;
  std::string nonce;
  Socket listener;           // rank 0, until every rank joined
  std::vector<Socket> peers; // rank 0: one per rank (its own unused); else [0]
  std::string root;          // the rank 0's port, for the others
  int mismatchAt = -1;       // FSDPRT_NCCL_EMU_MISMATCH's n on this rank
  int delayMs = 0;           // FSDPRT_NCCL_EMU_DELAY_MS on this rank

  std::mutex mutex; // everything below
  std::condition_variable wake;
  std::deque<Work> queue;
  std::shared_ptr<Pending> current; // the call the proxy has taken
  bool stopping = false, aborting = false;
  ncclResult_t state = ncclInProgress;
  std::string lastError;
  uint64_t launched = 0;
  uint64_t splits = 0;
  /// Graphs holding captured collectives of this communicator (NCCL's
  /// localPersistentRefs: ncclCommDestroy waits for them to be destroyed).
  /// Shared with the graphs' release callbacks, which may run after an
  /// abort deleted the communicator.
  std::shared_ptr<std::atomic<int>> graphRefs =
      std::make_shared<std::atomic<int>>(0);
  /// A non-blocking split under way, as NCCL's: the child is stored into
  /// the caller's pointer only once its init completed, which the parent's
  /// ncclCommGetAsyncError reports; until then the parent is in progress.
  EmuComm *splitChild = nullptr;
  EmuComm **splitOut = nullptr;
  std::map<int, float> preMulSums; // operator handle -> scalar
  int nextOp = ncclNumOps;

  std::thread proxy;

  EmuComm() { emuDriverBytes() += kEmuCommDeviceBytes; }
  ~EmuComm() { emuDriverBytes() -= kEmuCommDeviceBytes; }
};

namespace {

/// A failed collective or join: its NCCL result and message.
struct Failure {
  ncclResult_t result;
  std::string message;
};

struct Hello {
  char magic[8];
  uint64_t nonce;
  int32_t rank, nranks;
};
struct Reply {
  int32_t result;
  uint32_t messageBytes;
};

/// Listening sockets of the unique ids made in this process, until the
/// communicator's rank 0 takes its own.
std::mutex registryMutex;
std::map<uint64_t, Socket> &listeners() {
  static std::map<uint64_t, Socket> m;
  return m;
}

thread_local int groupDepth = 0;
thread_local std::vector<std::pair<ncclComm_t, Work>> grouped;
thread_local std::string lastGlobalError;

void setError(ncclComm_t c, ncclResult_t result, const std::string &message) {
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->state == ncclSuccess || c->state == ncclInProgress) {
    c->state = result;
    c->lastError = message;
  }
}

/// Closes every connection, so that peers see this rank leave at once and
/// whatever waits on them wakes.
void shutdownSockets(ncclComm_t c) {
  c->listener.shutdown();
  for (Socket &s : c->peers)
    if (s.valid())
      s.shutdown();
}

void join(ncclComm_t c) {
  Deadline deadline = Clock::now() + std::chrono::seconds(60);
  c->peers.resize(c->rank == 0 ? c->nranks : 1);
  if (c->rank == 0) {
    for (int joined = 1; joined < c->nranks; ++joined) {
      Socket s = c->listener.accept();
      if (!s.valid())
        throw Failure{ncclSystemError, "aborted while ranks were joining"};
      Hello h{};
      if (!s.recvAll(&h, sizeof h, deadline) ||
          std::string(h.magic, 8) != std::string("ncclemu", 8) ||
          std::to_string(h.nonce) != c->nonce || h.nranks != c->nranks ||
          h.rank <= 0 || h.rank >= c->nranks || c->peers[h.rank].valid())
        throw Failure{ncclInvalidUsage,
                      "a rank joined with another unique id, rank count or "
                      "a rank already taken"};
      c->peers[h.rank] = std::move(s);
    }
    c->listener = Socket();
  } else {
    c->peers[0] = Socket::connect("127.0.0.1", std::stoi(c->root), deadline);
    Hello h{};
    std::memcpy(h.magic, "ncclemu", 8);
    h.nonce = std::stoull(c->nonce);
    h.rank = c->rank;
    h.nranks = c->nranks;
    c->peers[0].sendAll(&h, sizeof h, deadline);
  }
}

/// Rank `r`'s result of `c` from every rank's input, into `out`.
void compute(const Call &c, int r, int n, const std::vector<const char *> &in,
             void *out) {
  size_t bytes = c.count * typeSize(c.type);
  switch (c.kind) {
  case Kind::AllGather:
    for (int q = 0; q < n; ++q) // memmove: in place, rank 0's chunk is out's
      std::memmove(static_cast<char *>(out) + q * bytes, in[q], bytes);
    break;
  case Kind::ReduceScatter:
    reduce(c, n, in, r * c.count, c.count, out);
    break;
  case Kind::AllReduce:
    reduce(c, n, in, 0, c.count, out);
    break;
  case Kind::Broadcast:
    std::memmove(out, in[c.root], bytes);
    break;
  case Kind::Reduce:
    if (r == c.root)
      reduce(c, n, in, 0, c.count, out);
    break;
  }
}

std::string collectiveName(const Call &c) {
  return "collective #" + std::to_string(c.seq) + " " + c.describe();
}

/// Rank 0: every rank's call and input, checked, reduced, sent back.
void exchangeAsRoot(ncclComm_t c, const Work &w) {
  const int n = c->nranks;
  std::vector<Call> calls(n);
  std::vector<std::vector<char>> data(n);
  std::vector<const char *> inputs(n);
  calls[0] = w.call;
  inputs[0] = static_cast<const char *>(w.send);
  auto tellOthers = [&](const Failure &f) {
    Reply reply{f.result, static_cast<uint32_t>(f.message.size())};
    for (int r = 1; r < n; ++r) {
      try {
        c->peers[r].sendAll(&reply, sizeof reply, forever());
        c->peers[r].sendAll(f.message.data(), f.message.size(), forever());
      } catch (const std::exception &) { // that rank is gone: it will know
      }
    }
    throw f;
  };
  for (int r = 1; r < n; ++r) {
    bool joined = false;
    try {
      joined = c->peers[r].recvAll(&calls[r], sizeof(Call), forever());
      if (joined) {
        data[r].resize(sendBytes(calls[r], r, n));
        c->peers[r].recvAll(data[r].data(), data[r].size(), forever());
      }
    } catch (const std::exception &) {
      joined = false;
    }
    if (!joined)
      tellOthers({ncclRemoteError,
                  "rank " + std::to_string(r) +
                      " closed its connection (exited?) before " +
                      collectiveName(w.call)});
    inputs[r] = data[r].data();
  }
  for (int r = 1; r < n; ++r)
    if (!(calls[r] == calls[0]))
      tellOthers({ncclInvalidUsage,
                  "collectives called out of order: rank 0 called " +
                      collectiveName(calls[0]) + ", rank " +
                      std::to_string(r) + " " + collectiveName(calls[r])});
  for (int r = 1; r < n; ++r) {
    std::vector<char> result(resultBytes(w.call, r, n));
    compute(w.call, r, n, inputs, result.data());
    Reply reply{ncclSuccess, 0};
    // A rank that exits after sending its part is as gone as one that
    // never sent it (the send fails with EPIPE instead of a closed read).
    try {
      c->peers[r].sendAll(&reply, sizeof reply, forever());
      c->peers[r].sendAll(result.data(), result.size(), forever());
    } catch (const std::exception &) {
      tellOthers({ncclRemoteError,
                  "rank " + std::to_string(r) +
                      " closed its connection (exited?) before " +
                      collectiveName(w.call) + " completed"});
    }
  }
  compute(w.call, 0, n, inputs, w.recv);
}

void exchangeAsPeer(ncclComm_t c, const Work &w) {
  Socket &root = c->peers[0];
  Reply reply{};
  bool answered = false;
  try {
    root.sendAll(&w.call, sizeof(Call), forever());
    root.sendAll(w.send, sendBytes(w.call, c->rank, c->nranks), forever());
    answered = root.recvAll(&reply, sizeof reply, forever());
  } catch (const std::exception &) {
  }
  if (!answered)
    throw Failure{ncclRemoteError,
                  "rank 0 closed its connection (exited?) during " +
                      collectiveName(w.call)};
  std::string message(reply.messageBytes, '\0');
  if (reply.result != ncclSuccess) {
    root.recvAll(message.data(), message.size(), forever());
    throw Failure{static_cast<ncclResult_t>(reply.result), message};
  }
  root.recvAll(w.recv, resultBytes(w.call, c->rank, c->nranks), forever());
}

void proxyMain(ncclComm_t c) {
  try {
    join(c);
    std::lock_guard<std::mutex> lock(c->mutex);
    if (c->state == ncclInProgress)
      c->state = ncclSuccess;
  } catch (const Failure &f) {
    setError(c, f.result, f.message);
  } catch (const std::exception &e) {
    setError(c, ncclSystemError, std::string("joining: ") + e.what());
  }
  for (;;) {
    Work w;
    bool live = false;
    {
      std::unique_lock<std::mutex> lock(c->mutex);
      c->wake.wait(lock, [&] { return !c->queue.empty() || c->stopping; });
      if (c->queue.empty())
        return;
      w = c->queue.front();
      c->queue.pop_front();
      c->current = w.pending;
    }
    // Launch order is the matching order; the data is there once the
    // stream has reached the call. Abort cancels every pending call.
    bool cancelled = false;
    {
      std::unique_lock<std::mutex> lock(w.pending->mutex);
      w.pending->changed.wait(lock, [&] {
        return w.pending->ready || w.pending->done;
      });
      cancelled = w.pending->done;
    }
    if (c->delayMs > 0 && !cancelled) // the hook: a slow collective
      std::this_thread::sleep_for(std::chrono::milliseconds(c->delayMs));
    {
      std::lock_guard<std::mutex> lock(c->mutex);
      live = c->state == ncclSuccess && !c->aborting && !cancelled;
    }
    if (live) {
      try {
        if (c->rank == 0)
          exchangeAsRoot(c, w);
        else
          exchangeAsPeer(c, w);
      } catch (const Failure &f) {
        setError(c, f.result, f.message);
        shutdownSockets(c);
      } catch (const std::exception &e) {
        setError(c, ncclSystemError, collectiveName(w.call) + ": " + e.what());
        shutdownSockets(c);
      }
    }
    // Done, or failed: either way the stream moves on (a failed NCCL
    // kernel leaves its stream too).
    w.pending->set(&Pending::done);
    std::lock_guard<std::mutex> lock(c->mutex);
    c->current = nullptr;
  }
}

/// Queues `w` for the proxy, in launch order; the caller hands it over
/// once its stream has reached it.
std::shared_ptr<Pending> queueForProxyLocked(ncclComm_t c, Work w) {
  w.call.seq = c->launched++;
  if (static_cast<int64_t>(w.call.seq) == c->mismatchAt)
    w.call.count += 1; // the test hook: another collective, as far as peers see
  w.pending = std::make_shared<Pending>();
  c->queue.push_back(w);
  c->wake.notify_all();
  return w.pending;
}

/// What the stream's worker runs where the collective is: hand it over,
/// wait until every rank has done its part (or the communicator aborted).
void handOver(const std::shared_ptr<Pending> &pending) {
  pending->set(&Pending::ready);
  pending->await(&Pending::done);
}

/// NCCL's answer to a call on a communicator still in progress.
ncclResult_t inProgressMisuse() {
  lastGlobalError = "Attempt to use communicator before the previous "
                    "operation returned ncclSuccess";
  return ncclInvalidUsage;
}

ncclResult_t launch(ncclComm_t c, Work w) {
  if (groupDepth > 0) {
    grouped.emplace_back(c, w);
    return ncclSuccess;
  }
  if (!w.stream) {
    lastGlobalError = "the NCCL emulation runs collectives on a stream";
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(c->mutex);
  if (c->state != ncclSuccess || c->splitChild)
    return c->state == ncclInProgress || c->splitChild ? inProgressMisuse()
                                                       : c->state;
  {
    std::lock_guard<std::mutex> captureLock(emuCaptureMutex());
    if (EmuCapture *capture = emuCapturing(w.stream)) {
      // A node of the graph: each launch of it is a new collective, in
      // the communicator's launch order at that time, run where the graph
      // has it by the worker of the stream that launched the graph. The
      // graph holds the communicator until it is destroyed, as NCCL's.
      if (capture->holders.insert(c).second) {
        ++*c->graphRefs;
        capture->onDestroy.push_back([refs = c->graphRefs] { --*refs; });
      }
      capture->ops.push_back([c, w] {
        std::shared_ptr<Pending> pending;
        {
          std::lock_guard<std::mutex> relaunch(c->mutex);
          if (c->state != ncclSuccess)
            return; // failed: the host sees it in the async error
          pending = queueForProxyLocked(c, w);
        }
        handOver(pending);
      });
      return ncclSuccess;
    }
  }
  std::shared_ptr<Pending> pending = queueForProxyLocked(c, w);
  w.stream->push([pending] { handOver(pending); });
  return ncclSuccess;
}

ncclResult_t collective(Kind kind, const void *send, void *recv, size_t count,
                        ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  if (!comm)
    return ncclInvalidArgument;
  Work w;
  w.call.kind = kind;
  w.call.type = type;
  w.call.root = root;
  w.call.count = count;
  w.send = send;
  w.recv = recv;
  w.stream = stream;
  if (kind == Kind::ReduceScatter || kind == Kind::AllReduce ||
      kind == Kind::Reduce) {
    bool floating = type == ncclFloat32 || type == ncclFloat16 ||
                    type == ncclBfloat16;
    if (!floating || (op != ncclSum && op != ncclMax && op != ncclAvg &&
                      op < ncclNumOps)) {
      lastGlobalError = "the NCCL emulation reduces f32, f16 and bf16 with "
                        "sum, max, avg or PreMulSum only";
      return ncclInvalidArgument;
    }
    w.call.op = op;
    if (op >= ncclNumOps) {
      std::lock_guard<std::mutex> lock(comm->mutex);
      auto it = comm->preMulSums.find(op);
      if (it == comm->preMulSums.end())
        return ncclInvalidArgument;
      w.call.op = ncclNumOps;
      w.call.scale = it->second;
    }
  }
  if (root < 0 || root >= comm->nranks)
    return ncclInvalidArgument;
  return launch(comm, w);
}

} // namespace

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclSystemError:
    return "unhandled system error";
  case ncclInvalidArgument:
    return "invalid argument";
  case ncclInvalidUsage:
    return "invalid usage";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "internal error";
  }
}

const char *ncclGetLastError(ncclComm_t comm) {
  if (!comm)
    return lastGlobalError.c_str();
  std::lock_guard<std::mutex> lock(comm->mutex);
  lastGlobalError = comm->lastError; // a copy the caller may keep reading
  return lastGlobalError.c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  try {
    Socket listener = Socket::listen("127.0.0.1", 0);
    uint64_t nonce = std::random_device{}() * 0x100000000ull ^
                     std::random_device{}();
    std::memset(id->internal, 0, sizeof id->internal);
    std::snprintf(id->internal, sizeof id->internal, "ncclemu %d %llu",
                  listener.localPort(),
                  static_cast<unsigned long long>(nonce));
    std::lock_guard<std::mutex> lock(registryMutex);
    listeners()[nonce] = std::move(listener);
    return ncclSuccess;
  } catch (const std::exception &e) {
    lastGlobalError = e.what();
    return ncclSystemError;
  }
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
  char port[16] = {0}, nonce[32] = {0};
  if (std::sscanf(id.internal, "ncclemu %15s %31s", port, nonce) != 2 ||
      nranks < 1 || rank < 0 || rank >= nranks) {
    lastGlobalError = "not an emulated unique id, or a rank out of range";
    return ncclInvalidArgument;
  }
  auto c = std::make_unique<EmuComm>();
  c->rank = rank;
  c->nranks = nranks;
  c->nonce = nonce;
  c->root = port;
  if (rank == 0) {
    std::lock_guard<std::mutex> lock(registryMutex);
    auto it = listeners().find(std::stoull(nonce));
    if (it == listeners().end()) {
      lastGlobalError = "rank 0 must make the unique id it joins with";
      return ncclInvalidUsage;
    }
    c->listener = std::move(it->second);
    listeners().erase(it);
  }
  if (const char *delay = std::getenv("FSDPRT_NCCL_EMU_DELAY_MS"))
    c->delayMs = std::atoi(delay);
  if (const char *hook = std::getenv("FSDPRT_NCCL_EMU_MISMATCH")) {
    int hookRank = -1, n = -1;
    if (std::sscanf(hook, "%d:%d", &hookRank, &n) == 2 && hookRank == rank)
      c->mismatchAt = n;
  }
  c->proxy = std::thread(proxyMain, c.get());
  *out = c.release();
  if (config && !config->blocking)
    return ncclInProgress;
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ncclCommGetAsyncError(*out, &state);
  }
  return state;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  if (!comm) {
    lastGlobalError = "ncclGetAsyncError : comm argument is NULL";
    return ncclInvalidArgument;
  }
  std::lock_guard<std::mutex> lock(comm->mutex);
  if (comm->splitChild) {
    ncclResult_t child;
    {
      std::lock_guard<std::mutex> childLock(comm->splitChild->mutex);
      child = comm->splitChild->state;
    }
    if (child == ncclInProgress) {
      *state = ncclInProgress;
      return ncclSuccess;
    }
    if (child == ncclSuccess)
      __atomic_store_n(comm->splitOut, comm->splitChild, __ATOMIC_RELEASE);
    else
      comm->state = child; // NCCL reports a failed split on the parent
    comm->splitChild = nullptr;
    comm->splitOut = nullptr;
  }
  *state = comm->state;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *config) {
  if (!comm || !newcomm)
    return ncclInvalidArgument;
  *newcomm = nullptr;
  // Every rank offers a listener, for the case it becomes its group's rank 0.
  Socket listener;
  try {
    listener = Socket::listen("127.0.0.1", 0);
  } catch (const std::exception &e) {
    lastGlobalError = e.what();
    return ncclSystemError;
  }
  int32_t mine[3] = {color, key, listener.localPort()};
  std::vector<int32_t> table(3 * static_cast<size_t>(comm->nranks));
  Work w; // gathered through the parent, in its launch order
  w.call.kind = Kind::AllGather;
  w.call.type = ncclInt32;
  w.call.count = 3;
  w.send = mine;
  w.recv = table.data();
  std::shared_ptr<Pending> pending;
  uint64_t split = 0;
  std::string parentNonce;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (comm->state != ncclSuccess || comm->splitChild)
      return comm->state == ncclInProgress || comm->splitChild
                 ? inProgressMisuse()
                 : comm->state;
    pending = queueForProxyLocked(comm, w);
    split = comm->splits++;
    parentNonce = comm->nonce;
  }
  handOver(pending); // on the calling thread: a host call
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (comm->state != ncclSuccess)
      return comm->state;
  }
  if (color == NCCL_SPLIT_NOCOLOR)
    return ncclSuccess;
  std::vector<std::pair<std::pair<int, int>, int>> members; // (key, rank)
  for (int r = 0; r < comm->nranks; ++r)
    if (table[3 * r] == color)
      members.push_back({{table[3 * r + 1], r}, r});
  std::sort(members.begin(), members.end());
  int newRank = 0;
  for (size_t i = 0; i < members.size(); ++i)
    if (members[i].second == comm->rank)
      newRank = static_cast<int>(i);
  int root = members[0].second;
  uint64_t nonce = std::stoull(parentNonce) * 1000003ull + split * 1009ull +
                   static_cast<uint64_t>(color);
  if (newRank == 0) {
    std::lock_guard<std::mutex> lock(registryMutex);
    listeners()[nonce] = std::move(listener);
  }
  ncclUniqueId id;
  std::memset(id.internal, 0, sizeof id.internal);
  std::snprintf(id.internal, sizeof id.internal, "ncclemu %d %llu",
                table[3 * root + 2], static_cast<unsigned long long>(nonce));
  if (!config || config->blocking)
    return ncclCommInitRankConfig(newcomm, static_cast<int>(members.size()),
                                  id, newRank, config);
  ncclComm_t child = nullptr;
  ncclResult_t rc = ncclCommInitRankConfig(
      &child, static_cast<int>(members.size()), id, newRank, config);
  if (rc != ncclInProgress)
    return rc;
  std::lock_guard<std::mutex> lock(comm->mutex);
  comm->splitChild = child;
  comm->splitOut = newcomm;
  return ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm)
    return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    if (int graphs = *comm->graphRefs; graphs > 0) {
      // Real NCCL waits here until those graphs are destroyed: forever,
      // when the caller destroys them only afterwards.
      std::fprintf(stderr,
                   "nccl emulation: ncclCommDestroy while %d CUDA graph(s) "
                   "holding its collectives still exist (NCCL would hang)\n",
                   graphs);
      std::abort();
    }
    comm->stopping = true; // after what is queued, as NCCL completes it
    comm->wake.notify_all();
  }
  comm->proxy.join();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm)
    return ncclInvalidArgument;
  {
    std::lock_guard<std::mutex> lock(comm->mutex);
    comm->stopping = comm->aborting = true;
    if (comm->state == ncclSuccess || comm->state == ncclInProgress) {
      comm->state = ncclSystemError;
      comm->lastError = "the communicator was aborted";
    }
    // Its kernels leave their streams, whether they had started or not.
    for (Work &w : comm->queue)
      w.pending->set(&Pending::done);
    if (comm->current)
      comm->current->set(&Pending::done);
    comm->wake.notify_all();
  }
  shutdownSockets(comm);
  comm->proxy.join();
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar,
                                      ncclDataType_t type,
                                      ncclScalarResidence_t residence,
                                      ncclComm_t comm) {
  if (!comm || residence != ncclScalarHostImmediate ||
      (type != ncclFloat32 && type != ncclFloat16 && type != ncclBfloat16))
    return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(comm->mutex);
  int handle = comm->nextOp++;
  comm->preMulSums[handle] = loadFloat(type, scalar, 0);
  *op = static_cast<ncclRedOp_t>(handle);
  return ncclSuccess;
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  if (!comm)
    return ncclInvalidArgument;
  std::lock_guard<std::mutex> lock(comm->mutex);
  return comm->preMulSums.erase(op) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(Kind::AllGather, send, recv, sendcount, type, ncclSum, 0,
                    comm, stream);
}
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::ReduceScatter, send, recv, recvcount, type, op, 0,
                    comm, stream);
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::AllReduce, send, recv, count, type, op, 0, comm,
                    stream);
}
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(Kind::Broadcast, send, recv, count, type, ncclSum, root,
                    comm, stream);
}
ncclResult_t ncclReduce(const void *send, void *recv, size_t count,
                        ncclDataType_t type, ncclRedOp_t op, int root,
                        ncclComm_t comm, cudaStream_t stream) {
  return collective(Kind::Reduce, send, recv, count, type, op, root, comm,
                    stream);
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return ncclInvalidUsage;
  if (--groupDepth > 0)
    return ncclSuccess;
  std::vector<std::pair<ncclComm_t, Work>> calls;
  calls.swap(grouped);
  ncclResult_t result = ncclSuccess;
  for (auto &[comm, work] : calls)
    if (ncclResult_t rc = launch(comm, work); rc != ncclSuccess)
      result = rc;
  return result;
}

} // namespace ncclemu
