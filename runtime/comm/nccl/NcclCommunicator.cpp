//===- NcclCommunicator.cpp - Collectives on GPUs through NCCL ------------===//
//
// Thin on purpose: NCCL does the algorithms; this file exchanges the unique
// id through the rendezvous store, maps our ops and dtypes, turns every
// status into a message, and bounds every wait. The communicator is created
// non-blocking. A collective given a stream (the issuing worker's: Comm.h,
// "Stream-ordered collectives") is issued onto it and returns; the
// context's watchdog bounds it (Watchdog.h) through asyncError() and
// abortBackend(). Without one it runs on the communicator's own stream and
// is polled (cudaStreamQuery plus ncclCommGetAsyncError) to completion
// against the deadline; on timeout it is aborted with ncclCommAbort, the
// only way to stop a hung NCCL kernel.
//
// NCCL matches collectives across ranks by launch order and forbids
// concurrent calls on one communicator, while the runtime runs collectives
// on several host streams: requiresIssueOrder() makes the base class issue
// them one at a time in tag (program) order. A collective is issued once
// its NCCL calls returned and the communicator left ncclInProgress (until
// then it may not even be on the stream, and no other NCCL call may be
// made); issued() then lets the next tag issue while this one completes.
//
// Buffers are device memory. Uneven torch.chunk splits use grouped
// broadcasts / reduces (one per chunk); even ones use ncclAllGather /
// ncclReduceScatter. NCCL reduces 16-bit data in 16-bit storage between
// hops (unlike the Gloo path, which accumulates in f32).
//
//===----------------------------------------------------------------------===//
#include "backends/Builtin.h"

#include "fsdp/rt/Error.h"
#include "fsdp/rt/math/Half.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>

#ifndef FSDPRT_NCCL_BACKEND_NAME // the tests' emulation: "nccl_emu"
#define FSDPRT_NCCL_BACKEND_NAME "nccl"
#endif

namespace fsdp {
namespace rt {
namespace comm {

namespace {

void checkCuda(cudaError_t rc, const char *what) {
  if (rc != cudaSuccess)
    fail(Status::IO, "nccl backend: ", what, ": ", cudaGetErrorName(rc), " (",
         cudaGetErrorString(rc), ")");
}

ncclDataType_t ncclType(DType dt) {
  switch (dt) {
  case DType::F32:
    return ncclFloat32;
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  default:
    fail(Status::InvalidArgument, "nccl: dtype ", dtypeName(dt),
         " is not reducible");
  }
}

class NcclCommunicator : public Communicator {
public:
  /// The world's communicator: a unique id through the store.
  explicit NcclCommunicator(const CommSetup &setup) : Communicator(setup) {
    selectDevice(setup.options.device);
    ncclUniqueId id;
    if (rank() == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      setup.store->set(
          "nccl_unique_id",
          std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      std::vector<char> bytes =
          setup.store->get("nccl_unique_id", setup.options.rendezvousTimeout);
      if (bytes.size() != sizeof(id.internal))
        fail(Status::Format, "nccl backend: unique id of ", bytes.size(),
             " bytes from the store (expected ", sizeof(id.internal), ")");
      std::memcpy(id.internal, bytes.data(), bytes.size());
    }
    size_t freeBefore = freeDeviceBytes();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check(ncclCommInitRankConfig(&comm_, size(), id, rank(), &config),
          "ncclCommInitRankConfig");
    finishInit(setup, freeBefore, "ncclCommInitRankConfig");
  }

  /// A group of `parent`'s: split from it (ncclCommSplit, a collective over
  /// the parent), sharing its resources where NCCL can. The colour is the
  /// group's smallest global rank, the same on every member.
  NcclCommunicator(const CommSetup &setup, NcclCommunicator &parent)
      : Communicator(setup) {
    selectDevice(parent.device_);
    int color = *std::min_element(setup.group.ranks.begin(),
                                  setup.group.ranks.end());
    size_t freeBefore = freeDeviceBytes();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    config.splitShare = 1;
    {
      std::shared_lock<std::shared_mutex> live(parent.commMutex_);
      parent.requireLive("ncclCommSplit");
      check(ncclCommSplit(parent.comm_, color, rank(), &comm_, &config),
            "ncclCommSplit");
      // Non-blocking, the child stays null until the split completes, and
      // the parent reports its progress (NCCL's communicators.rst).
      parent.awaitEnqueuedLocked(std::chrono::steady_clock::now() +
                                     setup.options.rendezvousTimeout,
                                 "ncclCommSplit");
    }
    if (!comm_)
      fail(Status::Internal,
           "nccl backend: ncclCommSplit completed without a communicator");
    finishInit(setup, freeBefore, "ncclCommSplit");
  }
  ~NcclCommunicator() override { release(); }

  void release() {
    if (comm_) {
      if (aborted_) {
        ncclCommAbort(comm_);
      } else {
        for (const auto &entry : preMulSums_)
          ncclRedOpDestroy(entry.second, comm_);
        ncclCommDestroy(comm_);
      }
    }
    preMulSums_.clear();
    if (stream_)
      cudaStreamDestroy(stream_);
    if (barrierWord_)
      cudaFree(barrierWord_);
    comm_ = nullptr;
    stream_ = nullptr;
    barrierWord_ = nullptr;
  }

  const char *backendName() const override { return FSDPRT_NCCL_BACKEND_NAME; }
  bool usesHostMemory() const override { return false; }
  bool requiresIssueOrder() const override { return true; }

  bool streamOrdered() const override { return true; }

  std::string asyncError() override {
    std::shared_lock<std::shared_mutex> live(commMutex_);
    if (!comm_)
      return ""; // aborted: the failure that did it is recorded
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
    if (rc != ncclSuccess)
      state = rc;
    if (state == ncclSuccess || state == ncclInProgress)
      return "";
    aborted_ = true;
    return errorText(state, "ncclCommGetAsyncError");
  }

protected:
  void runAllGather(DType dt, const void *in, void *out, int64_t numel,
                    uint32_t, void *queue) override {
    const int64_t esize = dtypeSize(dt);
    run("all_gather", queue, [&](cudaStream_t s, Deadline deadline) {
      if (numel % size() == 0) {
        call(ncclAllGather(in, out, numel / size(), ncclType(dt), comm_, s),
             "ncclAllGather", deadline);
      } else {
        perChunkInOneGroup(numel, deadline, [&](int32_t i, ShardRange c) {
          char *dst = static_cast<char *>(out) + c.begin * esize;
          check(ncclBroadcast(i == rank() ? in : dst, dst, c.count * esize,
                              ncclInt8, i, comm_, s),
                "ncclBroadcast");
        });
      }
    });
  }

  void runReduceScatter(DType dt, const void *in, void *out, int64_t numel,
                        CommReduceOp op, double preDivide, double postDivide,
                        uint32_t, void *queue) override {
    // Division is linear, so both factors fold into NCCL's pre-multiplied
    // sum; without factors, avg is NCCL's own.
    double scale = 1.0 / (preDivide * postDivide);
    ncclRedOp_t redOp = op == CommReduceOp::Avg ? ncclAvg : ncclSum;
    bool custom = scale != 1.0;
    const int64_t esize = dtypeSize(dt);
    run("reduce_scatter", queue, [&](cudaStream_t s, Deadline deadline) {
      if (custom)
        redOp = preMulSum(dt, op == CommReduceOp::Avg ? scale / size() : scale,
                          deadline);
      if (numel % size() == 0) {
        call(ncclReduceScatter(in, out, numel / size(), ncclType(dt), redOp,
                               comm_, s),
             "ncclReduceScatter", deadline);
      } else {
        perChunkInOneGroup(numel, deadline, [&](int32_t i, ShardRange c) {
          check(ncclReduce(static_cast<const char *>(in) + c.begin * esize,
                           i == rank() ? out : nullptr, c.count, ncclType(dt),
                           redOp, i, comm_, s),
                "ncclReduce");
        });
      }
    });
  }

  void runAllReduce(DType dt, const void *in, void *out, int64_t numel,
                    CommReduceOp op, uint32_t, void *queue) override {
    ncclRedOp_t redOp = op == CommReduceOp::Sum   ? ncclSum
                        : op == CommReduceOp::Avg ? ncclAvg
                                                  : ncclMax;
    run("all_reduce", queue, [&](cudaStream_t s, Deadline deadline) {
      call(ncclAllReduce(in, out, numel, ncclType(dt), redOp, comm_, s),
           "ncclAllReduce", deadline);
    });
  }

  void runBroadcast(void *buf, int64_t bytes, int32_t root, uint32_t,
                    void *queue) override {
    run("broadcast", queue, [&](cudaStream_t s, Deadline deadline) {
      call(ncclBroadcast(buf, buf, bytes, ncclInt8, root, comm_, s),
           "ncclBroadcast", deadline);
    });
  }

  void runBarrier(uint32_t, void *queue) override {
    // NCCL has no barrier: a one-element all_reduce is the usual stand-in.
    run("barrier", queue, [&](cudaStream_t s, Deadline deadline) {
      call(ncclAllReduce(barrierWord_, barrierWord_, 1, ncclFloat32, ncclSum,
                         comm_, s),
           "ncclAllReduce (barrier)", deadline);
    });
  }

  void abortBackend() override { abortNow(); }

  std::unique_ptr<Communicator> makeGroup(const CommSetup &setup) override {
    return std::make_unique<NcclCommunicator>(setup, *this);
  }

  int64_t deviceBytes() const override { return deviceBytes_; }

private:
  using Deadline = std::chrono::steady_clock::time_point;

  void selectDevice(int device) {
    int devices = 0;
    cudaError_t rc = cudaGetDeviceCount(&devices);
    if (rc != cudaSuccess || devices == 0)
      fail(Status::Unsupported,
           "nccl backend: no usable CUDA device on global rank ", globalRank(),
           rc != cudaSuccess
               ? std::string(": cudaGetDeviceCount: ") + cudaGetErrorString(rc)
               : std::string(""));
    device_ = device;
    if (device_ < 0 || device_ >= devices)
      fail(Status::Unsupported, "nccl backend: ",
           device_ < 0 ? std::string("the context has no CUDA device: NCCL "
                                     "needs a context on the cuda backend")
                       : "device " + std::to_string(device_) + " of " +
                             std::to_string(devices));
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
  }

  static size_t freeDeviceBytes() {
    size_t freeBytes = 0, total = 0;
    checkCuda(cudaMemGetInfo(&freeBytes, &total), "cudaMemGetInfo");
    return freeBytes;
  }

  /// Waits out the non-blocking creation (`what`), then makes the stream of
  /// synchronous collectives and the barrier's word; the device memory
  /// that took (NCCL's buffers, mostly) is the communicator's.
  void finishInit(const CommSetup &setup, size_t freeBefore, const char *what) {
    try {
      awaitEnqueuedLocked(std::chrono::steady_clock::now() +
                              setup.options.rendezvousTimeout,
                          what);
      checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                "cudaStreamCreate");
      checkCuda(cudaMalloc(&barrierWord_, sizeof(float)), "cudaMalloc");
      size_t freeAfter = freeDeviceBytes();
      deviceBytes_ = freeBefore > freeAfter
                         ? static_cast<int64_t>(freeBefore - freeAfter)
                         : 0;
    } catch (...) {
      // The destructor does not run for a half-built object.
      aborted_ = true;
      release();
      throw;
    }
  }

  Deadline deadlineFromNow() const {
    return std::chrono::steady_clock::now() + timeout();
  }

  /// The pre-multiplied sum by `scale` (rounded to `dt`, as NCCL takes
  /// it), made on first use and kept for the communicator's lifetime: a
  /// captured step replays the collectives that use it, and a reduce-scatter
  /// need not make and destroy one each time. Made inside the issue turn
  /// (an NCCL call on the communicator), which also guards the map.
  ncclRedOp_t preMulSum(DType dt, double scale, Deadline deadline) {
    float f = static_cast<float>(scale);
    uint16_t h = dt == DType::BF16 ? floatToBf16(f) : floatToF16(f);
    uint32_t bits = dt == DType::F32 ? floatBits(f) : h;
    auto key = std::make_pair(dt, bits);
    auto it = preMulSums_.find(key);
    if (it != preMulSums_.end())
      return it->second;
    ncclRedOp_t redOp;
    void *scalar = dt == DType::F32 ? static_cast<void *>(&f) : &h;
    call(ncclRedOpCreatePreMulSum(&redOp, scalar, ncclType(dt),
                                  ncclScalarHostImmediate, comm_),
         "ncclRedOpCreatePreMulSum", deadline);
    preMulSums_.emplace(key, redOp);
    return redOp;
  }

  /// One collective: `enqueue(stream, deadline)` makes its NCCL calls (the
  /// base class holds this tag's issue turn) onto `queue`, or without one
  /// onto the communicator's own stream; once NCCL has really enqueued the
  /// work the turn passes on. Stream-ordered (a queue), it returns there;
  /// else it waits for the collective to complete. The shared lock keeps
  /// comm_ alive against an abort from another thread.
  template <typename F>
  void run(const char *what, void *queue, F &&enqueue) {
    Deadline deadline = deadlineFromNow();
    {
      std::shared_lock<std::shared_mutex> live(commMutex_);
      requireLive(what);
      enqueue(queue ? static_cast<cudaStream_t>(queue) : stream_, deadline);
      awaitEnqueuedLocked(deadline, what);
    }
    issued();
    if (!queue)
      complete(what, deadline);
  }

  /// check(), and for a call that answered ncclInProgress, wait until the
  /// communicator leaves it: no other NCCL call may be made before.
  void call(ncclResult_t rc, const char *what, Deadline deadline) {
    check(rc, what);
    if (rc == ncclInProgress)
      awaitEnqueuedLocked(deadline, what);
  }

  void requireLive(const char *what) {
    if (!comm_)
      fail(Status::IO, "nccl backend: ", what,
           ": the communicator was aborted after an earlier failure");
  }

  /// Uneven torch.chunk splits: `body(i, chunk)` for every non-empty chunk,
  /// all in one NCCL group (one call per chunk, rooted at its owner).
  template <typename F>
  void perChunkInOneGroup(int64_t numel, Deadline deadline, F &&body) {
    check(ncclGroupStart(), "ncclGroupStart");
    for (int32_t i = 0; i < size(); ++i) {
      ShardRange c = shardRange(numel, size(), i);
      if (c.count > 0)
        body(i, c);
    }
    call(ncclGroupEnd(), "ncclGroupEnd", deadline);
  }

  /// Polls a non-blocking communicator until it leaves ncclInProgress (for
  /// a collective: with commMutex_ held shared and the issue turn held, so
  /// the state is that of its own calls). On timeout the communicator is
  /// marked for abort (the destructor aborts it; the base class makes it
  /// unusable).
  void awaitEnqueuedLocked(Deadline deadline, const char *what) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess)
        return;
      if (state != ncclInProgress) {
        aborted_ = true;
        check(state, what);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        aborted_ = true;
        fail(Status::IO, "nccl backend: ", what,
             " was still in progress (ncclInProgress) at its deadline");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void check(ncclResult_t rc, const char *what) {
    if (rc == ncclSuccess || rc == ncclInProgress)
      return;
    fail(Status::IO, errorText(rc, what));
  }

  /// "nccl backend: <what>: <NCCL's words> (<its last error>)".
  std::string errorText(ncclResult_t rc, const char *what) {
    const char *detail = comm_ ? ncclGetLastError(comm_) : "";
    return std::string("nccl backend: ") + what + ": " +
           ncclGetErrorString(rc) +
           (detail && *detail ? std::string(" (") + detail + ")" : "");
  }


  /// Waits for the issued collective (run() already waited out its
  /// ncclInProgress, so it is on the stream); aborts the communicator on an
  /// asynchronous NCCL error or at the deadline, so nothing hangs. Other
  /// threads may issue meanwhile: ncclInProgress seen here is theirs.
  void complete(const char *what, Deadline deadline) {
    for (;;) {
      cudaError_t rc = cudaStreamQuery(stream_);
      if (rc != cudaSuccess && rc != cudaErrorNotReady)
        checkCuda(rc, what);
      // Also once the stream is idle: a collective that failed (a peer
      // gone, calls that do not match) may have left it, but its result
      // is not to be used.
      {
        std::shared_lock<std::shared_mutex> live(commMutex_);
        requireLive(what);
        ncclResult_t state = ncclSuccess;
        check(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
        if (state != ncclSuccess && state != ncclInProgress) {
          aborted_ = true;
          check(state, what);
        }
      }
      if (rc == cudaSuccess)
        return;
      if (std::chrono::steady_clock::now() > deadline) {
        abortNow();
        fail(Status::IO, "nccl backend: ", what, " timed out after ",
             timeout().count(), " ms; communicator aborted");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void abortNow() {
    std::unique_lock<std::shared_mutex> lock(commMutex_);
    aborted_ = true;
    if (comm_)
      ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  int device_ = 0;
  int64_t deviceBytes_ = 0; // measured around creation (cudaMemGetInfo)
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float *barrierWord_ = nullptr;
  std::map<std::pair<DType, uint32_t>, ncclRedOp_t> preMulSums_;
  std::atomic<bool> aborted_{false};
  // Shared by every use of comm_ from collective threads, exclusive for
  // abortNow(), which frees it.
  std::shared_mutex commMutex_;
};

} // namespace

std::unique_ptr<Communicator> createNcclCommunicator(const CommSetup &setup) {
  return std::make_unique<NcclCommunicator>(setup);
}

#ifdef FSDPRT_CUDA_EMULATION
// The tests' NCCL emulation (unittests/cuda/emu/nccl.h) registers itself
// ("nccl_emu") from the test binaries, under a renamed factory; the real
// communicator is in the built-in list (backends/Builtin.cpp).
[[maybe_unused]] static const bool registered =
    registerCommBackend(FSDPRT_NCCL_BACKEND_NAME, createNcclCommunicator);
#endif

} // namespace comm
} // namespace rt
} // namespace fsdp
