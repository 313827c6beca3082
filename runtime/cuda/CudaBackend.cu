//===- CudaBackend.cu - The CUDA backend ----------------------------------===//
//
// Adapts the kernels of Kernels.h and cuBLAS to the Backend interface.
//
// Streams. The runtime's streams are host worker threads (Stream.h) and its
// events are host markers between them. Each worker thread that calls this
// backend gets its own CUDA stream (non-blocking) and cuBLAS handle, so the
// work of different runtime streams overlaps on the device. A backend call
// queues its kernels, copies and GEMMs on that CUDA stream and returns;
// the device is ordered through DeviceOrdering (DeviceOrdering.h): an event
// record is also a cudaEvent on the recording worker's stream, a wait also
// a cudaStreamWaitEvent, so the host only orders the issue of work. The
// host waits for the device only where it must: copies to or from host
// memory, Stream::synchronize and event synchronisation; collectives are
// issued onto the worker's own stream (queueHandle), after its work; index
// checks leave their verdicts in pinned memory, read at those points. FSDPRT_CUDA_SYNC=1
// makes every call wait for its work, as before.
//
// Step graphs (StepGraphs.h): while a step is being captured, each worker's
// stream has joined the capture, so the same calls record into one CUDA
// graph instead of running; what must reach the host then refuses
// (refuseHostWaitWhileCapturing), which fails the capture only.
//
// Buffer lifetimes (where each buffer is last used before it is freed):
// * Arena buffers: fsdprt_buffer_free releases the range when its runtime
//   stream reaches the free and records a cudaEvent there; uses on other
//   streams are ordered before the free with events, exactly as on the CPU
//   backend. Operations touching bytes reused from the range wait for that
//   cudaEvent on their own streams (Arena, Context::resolve).
// * Scratch (f32 staging of 16-bit operands, attention probabilities, row
//   statistics, partial sums, cuDNN's workspace): pieces of the calling
//   thread's reserve (ScratchReserve.h), used by kernels on its own CUDA
//   stream only, so the next call on that stream reuses them in stream
//   order. Held between calls, as the GEMM workspace.
// * The arena itself: one cudaMallocAsync, freed with cudaFreeAsync in
//   deallocate() after every worker's stream has been synchronised (the
//   Context calls it once every runtime stream has drained).
// * Pinned host staging buffers (one per worker thread) are reused only
//   after the copy that read or wrote them has been synchronised.
//
// GEMMs run through cublasGemmEx / cublasGemmStridedBatchedEx (linear
// layers with a bias through cuBLASLt's bias epilogues, LtMatmul.h) with
// f32/bf16/f16 operands in their storage type, an f32 result and
// CUBLAS_COMPUTE_32F (f32 accumulation, no TF32, as PyTorch's default;
// FSDPRT_CUDA_TF32=1 lets f32 GEMMs round their inputs to TF32, as
// torch.backends.cuda.matmul.allow_tf32); 16-bit results are rounded once
// from the f32 result, as the CPU backend does.
//
//===----------------------------------------------------------------------===//
#include "CudaBackend.h"
#include "Kernels.h"
#include "LtMatmul.h"
#include "StepGraphs.h"
#ifdef FSDPRT_HAVE_CUDNN
#include "FusedAttention.h"
#endif

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/DeviceOrdering.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/PackedAttention.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

// The registered name; the host emulation of the tests builds these sources
// again under another name (unittests/cuda/emu).
#ifndef FSDPRT_CUDA_BACKEND_NAME
#define FSDPRT_CUDA_BACKEND_NAME "cuda"
#endif
#ifndef FSDPRT_NCCL_BACKEND_NAME // the tests' emulation: "nccl_emu"
#define FSDPRT_NCCL_BACKEND_NAME "nccl"
#endif

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

constexpr int64_t kPinnedBytes = int64_t(8) << 20;
/// The GEMM workspace of each worker stream, shared by cuBLAS and cuBLASLt
/// (one call at a time on the stream); 32 MiB as PyTorch uses on Hopper.
#ifdef FSDPRT_CUDA_EMULATION
constexpr size_t kGemmWorkspaceBytes = 4096;
#else
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;
#endif

cudaDataType_t cudaType(DType dt) {
  switch (dt) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  default:
    fail(Status::InvalidArgument, "cuda backend: dtype ", dtypeName(dt),
         " is not a GEMM operand type");
  }
}

int blasInt(int64_t v, const char *what) {
  if (v > INT_MAX)
    fail(Status::Unsupported, "cuda backend: GEMM ", what, " = ", v,
         " exceeds cuBLAS's 32-bit limit");
  return static_cast<int>(v);
}

const void *at(const void *p, int64_t elems, DType dt) {
  return p ? static_cast<const char *>(p) + elems * dtypeSize(dt) : nullptr;
}

/// A worker thread's cuBLAS handle, its GEMM workspace (shared with
/// cuBLASLt) and cuBLASLt's cache, made at the thread's first GEMM: only
/// the threads that run GEMMs (the compute stream's) hold a workspace,
/// where every worker thread (the collectives' too) held 32 MiB.
struct GemmHandles {
  cublasHandle_t blas = nullptr;
  void *workspace = nullptr;
  std::unique_ptr<LtMatmul> lt;
};

struct ThreadState {
  cudaStream_t stream = nullptr;
  GemmHandles gemm;
  std::unique_ptr<ScratchReserve> scratch; // the calls' scratch (Device.h)
  void *pinned = nullptr;
  IndexVerdict *verdicts = nullptr;  // kVerdictSlots, pinned host memory
  std::vector<PendingCheck> pending; // pending[i]'s verdict is verdicts[i]
  bool capturing = false;            // the stream is in a step graph capture
  const StepGraphs::Graph *launched = nullptr; // checks read at synchronize
#ifdef FSDPRT_HAVE_CUDNN
  bool fusedTried = false;
  std::unique_ptr<FusedAttention> fused; // null: cuDNN could not be loaded
#endif
};

/// What a backend call runs on.
struct Exec {
  cudaStream_t s;
  ThreadState *st;
  void *pinned;
  double padGemmFlops; // gemm(): see padGemmFlops()
  bool tf32;           // f32 GEMMs may round their inputs to TF32

  cublasHandle_t blas() const { return gemm().blas; }
  LtMatmul *lt() const { return gemm().lt.get(); }

private:
  GemmHandles &gemm() const {
    GemmHandles &g = st->gemm;
    if (g.lt) // the last one made: all or nothing
      return g;
    // Made outside step graphs: a step runs eagerly before it is captured
    // (a stream can also join a capture through an event wait).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    checkCuda(cudaStreamIsCapturing(s, &capture), "cudaStreamIsCapturing");
    if (st->capturing || capture != cudaStreamCaptureStatusNone)
      fail(Status::Unsupported, "cuda backend: a worker stream's first GEMM "
                                "inside a step being captured");
    GemmHandles made;
    try {
      checkCublas(cublasCreate(&made.blas), "cublasCreate");
      checkCublas(cublasSetStream(made.blas, s), "cublasSetStream");
      // From the pool, so that the device high-water mark counts it.
      checkCuda(cudaMallocAsync(&made.workspace, kGemmWorkspaceBytes, s),
                "cudaMallocAsync (GEMM workspace)");
      checkCublas(
          cublasSetWorkspace(made.blas, made.workspace, kGemmWorkspaceBytes),
          "cublasSetWorkspace");
      made.lt = std::make_unique<LtMatmul>(s, made.workspace,
                                           kGemmWorkspaceBytes);
    } catch (...) {
      if (made.blas)
        cublasDestroy(made.blas);
      if (made.workspace)
        cudaFreeAsync(made.workspace, s);
      throw;
    }
    g = std::move(made);
    return g;
  }
};

cublasComputeType_t computeType(const Exec &e, DType dt) {
  return dt == DType::F32 && e.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
}

/// Whether a leading dimension of `ld` elements of `t` breaks the 16-byte
/// alignment cuBLAS's fastest (TMA) kernels need.
bool misaligned(int64_t ld, DType t) { return ld * dtypeSize(t) % 16 != 0; }

int64_t roundUp8(int64_t v) { return (v + 7) / 8 * 8; }

/// The row-major [rows, cols] matrix at p (leading dimension ld) as a
/// zero-padded [padRows, padCols] matrix: p itself when nothing changes,
/// else a copy in `copy`.
const void *zeroPadded(cudaStream_t s, const void *p, int64_t rows,
                       int64_t cols, int64_t &ld, int64_t padRows,
                       int64_t padCols, DType t, Scratch &copy) {
  if (rows == padRows && cols == padCols && !misaligned(ld, t))
    return p;
  int64_t es = dtypeSize(t);
  copy = Scratch(s, padRows * padCols * es);
  if (rows != padRows || cols != padCols)
    checkCuda(cudaMemsetAsync(copy.as<void>(), 0, padRows * padCols * es, s),
              "cudaMemsetAsync (GEMM operand padding)");
  checkCuda(cudaMemcpy2DAsync(copy.as<void>(), padCols * es, p, ld * es,
                              cols * es, rows, cudaMemcpyDeviceToDevice, s),
            "cudaMemcpy2DAsync (GEMM operand padding)");
  ld = padCols;
  return copy.as<void>();
}

/// The FLOPs from which a 16-bit GEMM with a dimension or leading dimension
/// that is not a multiple of 8 elements (GPT-2's 50257-word vocabulary)
/// runs on zero-padded copies instead, as inductor's pad_mm does: cuBLAS
/// ran the lm head at 130 TFLOP/s on an H100 against 600 for aligned
/// shapes; the copies cost a pass over each padded operand.
/// FSDPRT_CUDA_PAD_GEMM_FLOPS overrides it (read once per backend).
double padGemmFlops() {
  const char *v = std::getenv("FSDPRT_CUDA_PAD_GEMM_FLOPS");
  return v && *v ? std::atof(v) : 1e9;
}

/// Whether gemm() runs a GEMM of these dimensions on zero-padded copies.
bool padsGemm(const Exec &e, DType dt, DType ct, int64_t m, int64_t n,
              int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  bool unaligned = roundUp8(m) != m || roundUp8(n) != n ||
                   roundUp8(k) != k || misaligned(lda, dt) ||
                   misaligned(ldb, dt) || misaligned(ldc, ct);
  return dt != DType::F32 && unaligned && 2.0 * m * n * k >= e.padGemmFlops;
}

/// Row-major C[batch][m, n] = alpha * op(A) op(B) + beta * C with A and B
/// in storage type `dt` and C in `ct` (f32 or dt: a 16-bit C is rounded
/// once from the f32 accumulation); strides are in elements. cuBLAS is
/// column-major, so it computes C^T = op(B)^T op(A)^T.
void gemm(const Exec &e, DType dt, bool transA, bool transB, int64_t m,
          int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
          int64_t strideA, const void *b, int64_t ldb, int64_t strideB,
          float beta, void *c, DType ct, int64_t ldc, int64_t strideC,
          int64_t batch = 1) {
  if (m == 0 || n == 0 || batch == 0)
    return;
  if (batch == 1 && padsGemm(e, dt, ct, m, n, k, lda, ldb, ldc)) {
    int64_t pm = roundUp8(m), pn = roundUp8(n), pk = roundUp8(k);
    // Zero rows / columns added along k contribute exact zeros.
    Scratch pa, pb, pc;
    const void *ua = transA ? zeroPadded(e.s, a, k, m, lda, pk, pm, dt, pa)
                            : zeroPadded(e.s, a, m, k, lda, pm, pk, dt, pa);
    const void *ub = transB ? zeroPadded(e.s, b, n, k, ldb, pn, pk, dt, pb)
                            : zeroPadded(e.s, b, k, n, ldb, pk, pn, dt, pb);
    int64_t ldcIn = ldc, es = dtypeSize(ct);
    void *uc = c;
    if (pm != m || pn != n || misaligned(ldc, ct)) {
      if (beta != 0.0f)
        uc = const_cast<void *>(zeroPadded(e.s, c, m, n, ldc, pm, pn, ct, pc));
      else {
        pc = Scratch(e.s, pm * pn * es);
        uc = pc.as<void>();
        ldc = pn;
      }
    }
    gemm(e, dt, transA, transB, pm, pn, pk, alpha, ua, lda, 0, ub, ldb, 0,
         beta, uc, ct, ldc, 0);
    if (uc != c)
      checkCuda(cudaMemcpy2DAsync(c, ldcIn * es, uc, ldc * es, n * es, m,
                                  cudaMemcpyDeviceToDevice, e.s),
                "cudaMemcpy2DAsync (GEMM result padding)");
    return;
  }
  cudaDataType_t t = cudaType(dt);
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  int im = blasInt(m, "m"), in = blasInt(n, "n"), ik = blasInt(k, "k");
  int ilda = blasInt(std::max<int64_t>(lda, 1), "lda");
  int ildb = blasInt(std::max<int64_t>(ldb, 1), "ldb");
  int ildc = blasInt(std::max<int64_t>(ldc, 1), "ldc");
  if (batch == 1) {
    checkCublas(cublasGemmEx(e.blas(), opB, opA, in, im, ik, &alpha, b, t, ildb,
                             a, t, ilda, &beta, c, cudaType(ct), ildc,
                             computeType(e, dt), CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx");
    return;
  }
  checkCublas(cublasGemmStridedBatchedEx(
                  e.blas(), opB, opA, in, im, ik, &alpha, b, t, ildb, strideB,
                  a, t, ilda, strideA, &beta, c, cudaType(ct), ildc, strideC,
                  blasInt(batch, "batch"), computeType(e, dt),
                  CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
}

bool isPinned(const void *p) {
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError(); // Clear: unregistered host memory is not an error.
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

bool overlaps(const void *a, const void *b, int64_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

/// The device of this process: its local rank's. More local ranks than
/// visible devices would put two ranks on one GPU, which NCCL refuses only
/// after the rendezvous (as "invalid usage"): refused here, before it,
/// unless NCCL_HOSTID is set (ranks sharing a GPU on purpose, each its own
/// NCCL host: the lease kit's loopback check, docs/Runtime.md).
int pickDevice(int count) {
  LaunchInfo launch;
  try {
    launch = LaunchInfo::fromEnvironment();
  } catch (const Error &) {
    return 0; // A malformed launch environment is reported by comm init.
  }
  if (launch.localWorldSize > count && !std::getenv("NCCL_HOSTID")) {
    const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
    fail(Status::InvalidArgument, "cuda backend: ", launch.localWorldSize,
         " ranks on this host (", launch.launcher, ") but ", count,
         " visible CUDA device", count == 1 ? "" : "s",
         visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")"
                 : std::string(),
         ": one GPU per rank; start at most ", count,
         " ranks per host (NCCL_HOSTID, distinct per rank, lets test ranks "
         "share a GPU over loopback)");
  }
  return (launch.localRank % count + count) % count;
}

/// A cudaEvent recorded on one worker's stream. One recorded while the
/// stream was capturing a step graph is a dependency inside the graph: the
/// host can neither query nor wait for it (Context forgets it after the
/// capture).
class CudaMarker final : public DeviceMarker {
public:
  CudaMarker(cudaStream_t stream, bool captured) : captured_(captured) {
    checkCuda(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming),
              "cudaEventCreateWithFlags");
    checkCuda(cudaEventRecord(event_, stream), "cudaEventRecord");
  }
  ~CudaMarker() override { cudaEventDestroy(event_); } // released when done
  void synchronize() override {
    if (captured_)
      fail(Status::Unsupported, "cuda backend: the host cannot wait for an "
                                "event inside a step being captured");
    // host-sync: the caller asked to wait for this marker.
    checkCuda(cudaEventSynchronize(event_), "cudaEventSynchronize");
  }
  bool done() override {
    if (captured_)
      return false; // ordered by a wait inside the graph
    cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady)
      return false;
    checkCuda(rc, "cudaEventQuery");
    return true;
  }
  cudaEvent_t event() const { return event_; }

private:
  const bool captured_;
  cudaEvent_t event_ = nullptr;
};

class CudaBackend final : public Backend, public DeviceOrdering {
public:
  explicit CudaBackend(int device)
      : device_(device), syncEachCall_(envFlag("FSDPRT_CUDA_SYNC")),
        useCudnn_(!envIs("FSDPRT_CUDNN", "0")),
        tf32_(envFlag("FSDPRT_CUDA_TF32")),
        padGemmFlops_(padGemmFlops()) {
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
    int pools = 0;
    checkCuda(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported,
                                     device_),
              "cudaDeviceGetAttribute");
    if (!pools)
      fail(Status::Unsupported, "cuda backend: device ", device_,
           " does not support stream-ordered allocation (cudaMallocAsync)");
    // Keep memory freed by stream-ordered scratch in the pool instead of
    // returning it to the driver at every synchronisation.
    checkCuda(cudaDeviceGetDefaultMemPool(&pool_, device_),
              "cudaDeviceGetDefaultMemPool");
    uint64_t threshold = UINT64_MAX;
    checkCuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold,
                                      &threshold),
              "cudaMemPoolSetAttribute");
    resetDeviceHighWater();
  }

  // The arena, the GEMM workspaces and the scratch reserves (and any
  // scratch allocated beyond them) come from the device's default pool
  // (cudaMallocAsync), which keeps the high-water mark of its use. Scratch
  // a captured call allocated beyond its reserve is graph memory, from the
  // graph memory pool, which keeps its own mark: a launch's is in use
  // beside what the default pool holds between calls (what it holds now),
  // not beside eager calls' own scratch, freed before the capture: the
  // peak is the larger of the two. cuBLAS's and cuDNN's handles' memory is
  // in neither pool.
  int64_t deviceHighWater() override {
    uint64_t high = 0, used = 0, graphHigh = 0;
    checkCuda(cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &high),
              "cudaMemPoolGetAttribute");
    checkCuda(
        cudaMemPoolGetAttribute(pool_, cudaMemPoolAttrUsedMemCurrent, &used),
        "cudaMemPoolGetAttribute");
    checkCuda(cudaDeviceGetGraphMemAttribute(
                  device_, cudaGraphMemAttrUsedMemHigh, &graphHigh),
              "cudaDeviceGetGraphMemAttribute");
    return static_cast<int64_t>(std::max(high, used + graphHigh));
  }
  void resetDeviceHighWater() override {
    uint64_t zero = 0; // the only value the marks can be reset to
    checkCuda(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrUsedMemHigh, &zero),
              "cudaMemPoolSetAttribute");
    checkCuda(cudaDeviceSetGraphMemAttribute(
                  device_, cudaGraphMemAttrUsedMemHigh, &zero),
              "cudaDeviceSetGraphMemAttribute");
  }

  DeviceReserve deviceReserve() override {
    DeviceReserve r{0, 0, ""};
    int64_t largest = 0;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &entry : states_) {
      const ThreadState &st = entry.second;
      if (st.gemm.workspace)
        r.gemmWorkspaceBytes += static_cast<int64_t>(kGemmWorkspaceBytes);
      if (!st.scratch)
        continue;
      r.scratchBytes += st.scratch->bytes();
      if (st.scratch->largestCall() > largest) {
        largest = st.scratch->largestCall();
        r.scratchOp = st.scratch->largestOp();
      }
    }
    return r;
  }

  ~CudaBackend() override {
    // Destructors cannot report: statuses are ignored on teardown.
    cudaSetDevice(device_);
    for (auto &entry : states_) {
      ThreadState &st = entry.second;
      // The workspace's free is queued behind the stream's last GEMM and
      // has happened once the stream is synchronised: the pool's marks of
      // a context made next start from what that context holds (the device
      // counted a destroyed context's pending workspace free as in use,
      // and its completion hid the next context's first scratch).
      if (st.gemm.workspace)
        cudaFreeAsync(st.gemm.workspace, st.stream);
      st.scratch.reset(); // its free is queued the same way
      if (st.stream) // host-sync: teardown
        cudaStreamSynchronize(st.stream);
#ifdef FSDPRT_HAVE_CUDNN
      st.fused.reset();
#endif
      st.gemm.lt.reset();
      if (st.gemm.blas)
        cublasDestroy(st.gemm.blas);
      if (st.stream)
        cudaStreamDestroy(st.stream);
      if (st.pinned)
        cudaFreeHost(st.pinned);
      if (st.verdicts)
        cudaFreeHost(st.verdicts);
    }
  }

  const char *name() const override { return FSDPRT_CUDA_BACKEND_NAME; }
  bool hasStepGraphs() const override { return true; }

  // Device-side ordering (DeviceOrdering.h): calls return once their work
  // is queued; FSDPRT_CUDA_SYNC=1 makes every call wait for its device
  // work instead (a debugging aid, like CUDA_LAUNCH_BLOCKING).
  DeviceOrdering *deviceOrdering() override {
    return syncEachCall_ ? nullptr : this;
  }
  std::shared_ptr<DeviceMarker> record() override {
    ThreadState &st = state();
    return std::make_shared<CudaMarker>(st.stream, st.capturing);
  }
  void wait(DeviceMarker &marker) override {
    checkCuda(cudaStreamWaitEvent(state().stream,
                                  static_cast<CudaMarker &>(marker).event(), 0),
              "cudaStreamWaitEvent");
  }
  void *queueHandle() override { return state().stream; }
  bool capturing() override { return state().capturing; }
  /// Waits for the calling thread's device work and reads its index checks'
  /// verdicts (failing on a bad index).
  void synchronize() override {
    // Called for Stream::synchronize, copies to or from host memory and
    // the arena (runSync), every call with
    // FSDPRT_CUDA_SYNC=1 (finishCall), all index-verdict slots in use.
    ThreadState &st = state();
    refuseHostWaitWhileCapturing(st);
    // host-sync: the callers above.
    checkCuda(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize");
    readVerdicts(st);
  }

  // Step graphs (StepGraphs.h). The capture starts and ends on the host
  // thread; each worker thread joins and leaves it with its own stream.
  void *graphBegin(int64_t liveBytes) override {
    if (syncEachCall_)
      fail(Status::Unsupported, "cuda backend: FSDPRT_CUDA_SYNC=1 waits for "
                                "each call, which a CUDA graph cannot hold");
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
    return graphs_.begin(liveBytes);
  }
  void graphJoin() override {
    ThreadState &st = state();
    graphs_.join(st.stream);
    st.capturing = true;
  }
  void graphLeave() override {
    ThreadState &st = state();
    st.capturing = false;
    graphs_.leave(st.stream);
  }
  int64_t graphEnd() override {
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
    int64_t graph = graphs_.end();
    // Memory the eager steps freed (scratch beyond a reserve, a reserve
    // regrown) stays reserved in the default pool, its release threshold
    // keeping it: the launches need none of it, so give it back.
    checkCuda(cudaMemPoolTrimTo(pool_, 0), "cudaMemPoolTrimTo");
    return graph;
  }
  void graphLaunch(int64_t graph, const void *live,
                   int64_t liveBytes) override {
    ThreadState &st = state();
    if (st.launched) // an earlier launch's checks: read them first
      synchronize();
    st.launched = &graphs_.launch(graph, st.stream, live, liveBytes);
    finishCall();
  }
  void graphDestroy(int64_t graph) override {
    std::unique_ptr<StepGraphs::Graph> g = graphs_.release(graph);
    synchronizeAllThreads(); // no launch of it is left on any stream
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &entry : states_)
      if (entry.second.launched == g.get()) // its checks go unread
        entry.second.launched = nullptr;
  }

  void *allocate(int64_t bytes) override {
    void *p = nullptr;
    runSync([&](Exec &e) {
      cudaError_t rc = cudaMallocAsync(&p, static_cast<size_t>(bytes), e.s);
      if (rc == cudaSuccess) // host-sync: the arena, once per context
        rc = cudaStreamSynchronize(e.s);
      if (rc == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        size_t freeBytes = 0, total = 0;
        cudaMemGetInfo(&freeBytes, &total);
        fail(Status::OutOfMemory, "cuda backend: cannot allocate a ", bytes,
             "-byte arena on device ", device_, " (", freeBytes, " of ", total,
             " bytes free)");
      }
      checkCuda(rc, "cudaMallocAsync (arena)");
    });
    return p;
  }
  void deallocate(void *ptr) override {
    if (!ptr)
      return;
    synchronizeAllThreads(); // the arena's last uses are on the workers
    runSync(
        [&](Exec &e) { checkCuda(cudaFreeAsync(ptr, e.s), "cudaFreeAsync"); });
  }
  bool hostAccessible() const override { return false; }
  const char *communicator() const override { return FSDPRT_NCCL_BACKEND_NAME; }
  int deviceOrdinal() const override { return device_; }
  void *allocateHost(int64_t bytes) override {
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
    void *p = nullptr;
    if (cudaMallocHost(&p, bytes) != cudaSuccess)
      fail(Status::OutOfMemory, "cuda backend: cannot allocate a ", bytes,
           "-byte pinned host buffer");
    return p;
  }
  void deallocateHost(void *ptr) override {
    synchronizeAllThreads(); // copies from or to it may still be queued
    checkCuda(cudaFreeHost(ptr), "cudaFreeHost");
  }

  void copy(void *dst, const void *src, int64_t bytes, CopyKind kind) override {
    if (bytes <= 0)
      return;
    if (kind == CopyKind::HostToDevice && state().capturing)
      // A compiled step's constants: the bytes as they are now, in the
      // graph's pinned memory, copied in at each launch.
      return run([&](Exec &e) {
        checkCuda(cudaMemcpyAsync(dst, graphs_.snapshot(src, bytes), bytes,
                                  cudaMemcpyHostToDevice, e.s),
                  "cudaMemcpyAsync (host to device)");
      });
    if (kind == CopyKind::HostToDevice) // the host may reuse src on return
      return runSync([&](Exec &e) { hostToDevice(e, dst, src, bytes); });
    if (kind == CopyKind::DeviceToHost) // the host reads dst on return
      return runSync([&](Exec &e) { deviceToHost(e, dst, src, bytes); });
    if (kind == CopyKind::Staged) // CPU offload: pinned <-> device
      return run([&](Exec &e) {
        checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, e.s),
                  "cudaMemcpyAsync (host buffer)");
      });
    if (kind == CopyKind::HostBuffer) // caller's memory <-> a host buffer
      return runSync([&](Exec &e) {
        // host-sync: the host buffer's queued copies land first.
        checkCuda(cudaStreamSynchronize(e.s), "cudaStreamSynchronize (copy)");
        std::memcpy(dst, src, bytes);
      });
    run([&](Exec &e) {
      if (overlaps(dst, src, bytes) && dst != src) {
        Scratch tmp(e.s, bytes); // memmove semantics
        checkCuda(cudaMemcpyAsync(tmp.as<void>(), src, bytes,
                                  cudaMemcpyDeviceToDevice, e.s),
                  "cudaMemcpyAsync (device to device)");
        checkCuda(cudaMemcpyAsync(dst, tmp.as<void>(), bytes,
                                  cudaMemcpyDeviceToDevice, e.s),
                  "cudaMemcpyAsync (device to device)");
      } else if (dst != src) {
        checkCuda(
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, e.s),
            "cudaMemcpyAsync (device to device)");
      }
    });
  }
  void fill(DType dt, void *dst, int64_t n, double value) override {
    run([&](Exec &e) { cuda::fill(e.s, dt, dst, n, value); });
  }
  void addInteger(DType dt, void *dst, int64_t n, int64_t value) override {
    run([&](Exec &e) { cuda::addInteger(e.s, dt, dst, n, value); });
  }
  void cast(DType srcType, const void *src, DType dstType, void *dst,
            int64_t n) override {
    run([&](Exec &e) { convert(e.s, srcType, src, dstType, dst, n); });
  }

  void linearForward(DType dt, const void *x, const void *w, const void *b,
                     void *y, int64_t m, int64_t k, int64_t n) override {
    run([&](Exec &e) {
      // y = round(x w^T + b) once: cuBLASLt's bias epilogue (y^T = w x^T
      // column-major), else bias rows and beta = 1.
      if (b && !padsGemm(e, dt, dt, m, n, k, k, k, n) &&
          e.lt()->run({LtGemm::Epilogue::Bias, cudaType(dt), cudaType(dt),
                     computeType(e, dt), true, false, n, m, k, w, k, x, k, y,
                     n, const_cast<void *>(b)}))
        return;
      if (b)
        seedRows(e.s, dt, b, y, m, n);
      gemm(e, dt, false, true, m, n, k, 1.0f, x, k, 0, w, k, 0,
           b ? 1.0f : 0.0f, y, dt, n, 0);
    });
  }
  void linearBackward(DType dt, const void *x, const void *w, const void *dy,
                      void *dx, void *dw, void *db, int64_t m, int64_t k,
                      int64_t n) override {
    run([&](Exec &e) {
      if (dx) // dx[m,k] = dy[m,n] w[n,k]
        gemm(e, dt, false, false, m, k, n, 1.0f, dy, n, 0, w, k, 0, 0.0f,
             dx, dt, k, 0);
      // dw[n,k] = dy^T x (dw^T = x^T dy column-major), with db = the column
      // sums of dy in cuBLASLt's bias-gradient epilogue where it can.
      bool dbDone = dw && db && !padsGemm(e, dt, dt, n, k, m, n, k, k) &&
                    e.lt()->run({LtGemm::Epilogue::BiasGradientB, cudaType(dt),
                               cudaType(dt), computeType(e, dt), false, true,
                               k, n, m, x, k, dy, n, dw, k, db});
      if (dw && !dbDone)
        gemm(e, dt, true, false, n, k, m, 1.0f, dy, n, 0, x, k, 0, 0.0f,
             dw, dt, k, 0);
      if (db && !dbDone) {
        DeviceStaging st({e.s});
        columnSums(e.s, dt, dy, st.out(dt, db, n), m, n);
        st.commit();
      }
    });
  }
  void matmulForward(DType dt, const void *a, const void *b, void *c,
                     const MatmulDims &d) override {
    run([&](Exec &e) {
      gemm(e, dt, d.transA, d.transB, d.m, d.n, d.k, 1.0f, a,
           d.transA ? d.m : d.k, d.m * d.k, b, d.transB ? d.k : d.n,
           d.bBatched ? d.k * d.n : 0, 0.0f, c, dt, d.n, d.m * d.n, d.batch);
    });
  }
  void matmulBackward(DType dt, const void *a, const void *b, const void *dc,
                      void *da, void *db, const MatmulDims &d) override {
    run([&](Exec &e) {
      int64_t lda = d.transA ? d.m : d.k, ldb = d.transB ? d.k : d.n;
      int64_t aStride = d.m * d.k, bStride = d.bBatched ? d.k * d.n : 0;
      int64_t cStride = d.m * d.n;
      int64_t bNumel = (d.bBatched ? d.batch : 1) * d.k * d.n;
      if (da) {
        if (!d.transA) // da[m,k] = dc op(b)^T
          gemm(e, dt, false, !d.transB, d.m, d.k, d.n, 1.0f, dc, d.n,
               cStride, b, ldb, bStride, 0.0f, da, dt, d.k, aStride, d.batch);
        else // da[k,m] = op(b) dc^T
          gemm(e, dt, d.transB, true, d.k, d.m, d.n, 1.0f, b, ldb, bStride,
               dc, d.n, cStride, 0.0f, da, dt, d.m, aStride, d.batch);
      }
      // An unbatched b sums over the batch in f32, rounded once at the end.
      DeviceStaging st({e.s});
      float *fdb = st.out(dt, db, bNumel);
      if (db) {
        // A batched b gets one batched GEMM; an unbatched b accumulates
        // over the batch in batch order (beta = 1 after the first), as the
        // CPU backend does.
        int64_t calls = d.bBatched ? 1 : d.batch;
        int64_t perCall = d.bBatched ? d.batch : 1;
        for (int64_t i = 0; i < calls; ++i) {
          float beta = (!d.bBatched && i > 0) ? 1.0f : 0.0f;
          const void *ai = at(a, i * aStride, dt);
          const void *dci = at(dc, i * cStride, dt);
          if (!d.transB) // db[k,n] = op(a)^T dc
            gemm(e, dt, !d.transA, false, d.k, d.n, d.m, 1.0f, ai, lda,
                 aStride, dci, d.n, cStride, beta, fdb, DType::F32, d.n,
                 d.k * d.n, perCall);
          else // db[n,k] = dc^T op(a)
            gemm(e, dt, true, d.transA, d.n, d.k, d.m, 1.0f, dci, d.n,
                 cStride, ai, lda, aStride, beta, fdb, DType::F32, d.k,
                 d.k * d.n, perCall);
        }
        if (!d.bBatched && d.batch == 0)
          cuda::fill(e.s, DType::F32, fdb, d.k * d.n, 0.0);
      }
      st.commit();
    });
  }

  void binaryForward(DType dt, BinaryOp op, const void *a, const Shape &as,
                     const void *b, const Shape &bs, void *out) override {
    run([&](Exec &e) { cuda::binaryForward(e.s, dt, op, a, as, b, bs, out); });
  }
  void binaryBackward(DType dt, BinaryOp op, const void *a, const Shape &as,
                      const void *b, const Shape &bs, const void *dout,
                      void *da, void *db) override {
    run([&](Exec &e) {
      Shape shape = broadcastShapes(as, bs);
      int64_t n = numelOf(shape);
      bool mul = op == BinaryOp::Mul, div = op == BinaryOp::Div;
      DeviceStaging st({e.s});
      const float *fa = st.in(dt, mul || div ? a : nullptr, numelOf(as));
      const float *fb = st.in(dt, mul || div ? b : nullptr, numelOf(bs));
      const float *fd = st.in(dt, dout, n);
      float *fda = st.out(dt, da, numelOf(as));
      float *fdb = st.out(dt, db, numelOf(bs));
      Scratch g(e.s, op == BinaryOp::Add ? 0 : n * 4);
      Scratch quotient(e.s, div ? n * 4 : 0);
      if (da) {
        const float *ga = fd;
        if (mul || div) { // d/da (a*b) = b, d/da (a/b) = 1/b, broadcast
          cuda::binaryForward(e.s, DType::F32, op, fd, shape, fb,
                              bs, g.as<float>());
          ga = g.as<float>();
        }
        sumToShape(e, ga, shape, as, fda);
      }
      if (db) {
        const float *gb = fd;
        if (mul) {
          cuda::binaryForward(e.s, DType::F32, BinaryOp::Mul, fd, shape,
                              fa, as, g.as<float>());
          gb = g.as<float>();
        } else if (op == BinaryOp::Sub) {
          cuda::scale(e.s, DType::F32, fd, g.as<float>(), n, -1.0f);
          gb = g.as<float>();
        } else if (div) { // d/db (a/b) = -(a/b) / b
          float *q = quotient.as<float>(), *t = g.as<float>();
          cuda::binaryForward(e.s, DType::F32, BinaryOp::Div, fa, as,
                              fb, bs, q);
          cuda::binaryForward(e.s, DType::F32, BinaryOp::Mul, fd, shape,
                              q, shape, t);
          cuda::binaryForward(e.s, DType::F32, BinaryOp::Div, t, shape,
                              fb, bs, t);
          cuda::scale(e.s, DType::F32, t, t, n, -1.0f);
          gb = t;
        }
        sumToShape(e, gb, shape, bs, fdb);
      }
      st.commit();
    });
  }
  void scale(DType dt, const void *x, void *y, int64_t n,
             double factor) override {
    run([&](Exec &e) {
      cuda::scale(e.s, dt, x, y, n, static_cast<float>(factor));
    });
  }
  void unaryForward(DType dt, UnaryMath kind, const void *x, void *y,
                    int64_t n, double a, double b) override {
    run([&](Exec &e) {
      cuda::unaryForward(e.s, dt, kind, x, y, n, static_cast<float>(a),
                         static_cast<float>(b));
    });
  }
  void unaryBackward(DType dt, UnaryMath kind, const void *x, const void *dy,
                     void *dx, int64_t n, double a, double b) override {
    run([&](Exec &e) {
      cuda::unaryBackward(e.s, dt, kind, x, dy, dx, n, static_cast<float>(a),
                          static_cast<float>(b));
    });
  }
  void activationForward(DType dt, Activation kind, const void *x, void *y,
                         int64_t n) override {
    run([&](Exec &e) { cuda::activationForward(e.s, dt, kind, x, y, n); });
  }
  void activationBackward(DType dt, Activation kind, const void *x,
                          const void *dy, void *dx, int64_t n) override {
    run([&](Exec &e) {
      cuda::activationBackward(e.s, dt, kind, x, dy, dx, n);
    });
  }

  void layerNormForward(DType dt, const void *x, const void *w, const void *b,
                        void *y, int64_t rows, int64_t d, double eps) override {
    run([&](Exec &e) {
      cuda::layerNormForward(e.s, dt, x, w, b, y, rows, d,
                             static_cast<float>(eps));
    });
  }
  void layerNormBackward(DType dt, const void *x, const void *w, const void *dy,
                         void *dx, void *dw, void *db, int64_t rows, int64_t d,
                         double eps) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::layerNormBackward(e.s, dt, x, w, dy, dx, st.out(dt, dw, d),
                              st.out(dt, db, d), rows, d,
                              static_cast<float>(eps));
      st.commit();
    });
  }
  void rmsNormForward(DType dt, const void *x, const void *w, void *y,
                      int64_t rows, int64_t d, double eps) override {
    run([&](Exec &e) {
      cuda::rmsNormForward(e.s, dt, x, w, y, rows, d, static_cast<float>(eps));
    });
  }
  void rmsNormBackward(DType dt, const void *x, const void *w, const void *dy,
                       void *dx, void *dw, int64_t rows, int64_t d,
                       double eps) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::rmsNormBackward(e.s, dt, x, w, dy, dx, st.out(dt, dw, d), rows, d,
                            static_cast<float>(eps));
      st.commit();
    });
  }
  void softmaxForward(DType dt, const void *x, void *y, int64_t outer,
                      int64_t dim, int64_t inner) override {
    run([&](Exec &e) {
      int64_t n = outer * dim * inner;
      DeviceStaging st({e.s});
      cuda::softmaxForward(e.s, st.in(dt, x, n), st.out(dt, y, n), outer, dim,
                           inner);
      st.commit();
    });
  }
  void softmaxBackward(DType dt, const void *y, const void *dy, void *dx,
                       int64_t outer, int64_t dim, int64_t inner) override {
    run([&](Exec &e) {
      int64_t n = outer * dim * inner;
      DeviceStaging st({e.s});
      cuda::softmaxBackward(e.s, st.in(dt, y, n), st.in(dt, dy, n),
                            st.out(dt, dx, n), outer, dim, inner);
      st.commit();
    });
  }

  void embeddingForward(DType dt, DType idsType, const void *ids,
                        const void *table, void *out, int64_t numIds,
                        int64_t vocab, int64_t dim) override {
    run([&](Exec &e) {
      queueCheck("embedding_forward", false, idsType, ids, numIds, vocab, 0,
                 nullptr);
      cuda::embeddingForward(e.s, idsType, ids, table, out, dtypeSize(dt),
                             numIds, vocab, dim);
    });
  }
  void embeddingBackward(DType dt, DType idsType, const void *ids,
                         const void *dy, void *dtable, int64_t numIds,
                         int64_t vocab, int64_t dim) override {
    run([&](Exec &e) {
      queueCheck("embedding_backward", false, idsType, ids, numIds, vocab, 0,
                 nullptr);
      cuda::embeddingBackward(e.s, dt, idsType, ids, dy, dtable, numIds,
                              vocab, dim);
    });
  }

  // Attention with 16-bit operands runs on cuDNN's fused flash attention
  // when the build found cuDNN and it loads (FusedAttention.h). Otherwise,
  // and for f32, it runs head by head, each head's GEMMs batched over the batch
  // (cuBLAS strided batches) and its softmax one block per row; the query
  // heads of a group accumulate into the group's dK/dV in head order, as on
  // the CPU, so the result is deterministic.
  // A bias takes the per-head path (cuDNN's SDPA graph is built without
  // one).
  void attentionForward(DType dt, const void *q, const void *k, const void *v,
                        const void *bias, void *out, float *stats,
                        const AttentionDims &d) override {
    if (!bias && fused(dt, [&](auto &fa, std::string &why) {
          return fa.forward(dt, q, k, v, out, stats, d, why);
        }))
      return finishCall();
    run([&](Exec &e) {
      if (d.contiguous())
        return attentionForwardOnBlas(e, dt, q, k, v, bias, out, stats, d);
      // Slices of a packed projection: cuBLAS runs on contiguous copies.
      ContiguousAttention<DeviceRows> c(DeviceRows{e.s}, dt, d);
      const void *cq = c.q(q), *ck = c.kv(k), *cv = c.kv(v);
      attentionForwardOnBlas(e, dt, cq, ck, cv, bias, out, stats, c.dims());
    });
  }
  // cuDNN's backward takes the forward's out and statistics (or makes them
  // again); the cuBLAS path only the statistics.
  void attentionBackward(DType dt, const void *q, const void *k, const void *v,
                         const void *bias, const void *dout, const void *out,
                         const float *stats, void *dq, void *dk, void *dv,
                         void *dbias, const AttentionDims &d) override {
    if (!bias && fused(dt, [&](auto &fa, std::string &why) {
          return fa.backward(dt, q, k, v, dout, out, stats, dq, dk, dv, d,
                             why);
        }))
      return finishCall();
    run([&](Exec &e) {
      if (d.contiguous())
        return attentionBackwardOnBlas(e, dt, q, k, v, bias, dout, stats, dq,
                                       dk, dv, dbias, d);
      ContiguousAttention<DeviceRows> c(DeviceRows{e.s}, dt, d);
      const void *cq = c.q(q), *ck = c.kv(k), *cv = c.kv(v);
      void *cdq = c.dq(dq), *cdk = c.dkv(dk), *cdv = c.dkv(dv);
      attentionBackwardOnBlas(e, dt, cq, ck, cv, bias, dout, stats, cdq, cdk,
                              cdv, dbias, c.dims());
      c.finish();
    });
  }
  void rope(DType dt, const void *x, void *y, int64_t batch, int64_t seq,
            int64_t heads, int64_t headDim, double theta,
            bool inverse) override {
    run([&](Exec &e) {
      int64_t n = batch * seq * heads * headDim;
      DeviceStaging st({e.s});
      cuda::rope(e.s, st.in(dt, x, n), st.out(dt, y, n), batch, seq, heads,
                 headDim, theta, inverse);
      st.commit();
    });
  }
  void dropout(DType dt, const void *x, void *y, int64_t n, double p,
               const RngKey &key, const RngKey *live) override {
    run([&](Exec &e) {
      cuda::dropout(e.s, dt, x, y, n, static_cast<float>(p), key, live);
    });
  }
  void rngFill(DType dt, void *dst, int64_t n, Distribution dist, double a,
               double b, const RngKey &key, const RngKey *live) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::rngFill(e.s, st.out(dt, dst, n), n, dist, static_cast<float>(a),
                    static_cast<float>(b), key, live);
      st.commit();
    });
  }
  void batchNormForward(DType dt, const void *x, const void *w, const void *b,
                        void *runningMean, void *runningVar, void *y, int64_t n,
                        int64_t c, int64_t spatial, double eps, double momentum,
                        bool training) override {
    run([&](Exec &e) {
      int64_t numel = n * c * spatial;
      DeviceStaging st({e.s});
      cuda::batchNormForward(
          e.s, st.in(dt, x, numel), st.in(dt, w, c), st.in(dt, b, c),
          st.inout(dt, runningMean, c, training),
          st.inout(dt, runningVar, c, training), st.out(dt, y, numel),
          n, c, spatial, static_cast<float>(eps), static_cast<float>(momentum),
          training);
      st.commit();
    });
  }
  void batchNormBackward(DType dt, const void *x, const void *w,
                         const void *runningMean, const void *runningVar,
                         const void *dy, void *dx, void *dw, void *db,
                         int64_t n, int64_t c, int64_t spatial, double eps,
                         bool training) override {
    run([&](Exec &e) {
      int64_t numel = n * c * spatial;
      DeviceStaging st({e.s});
      cuda::batchNormBackward(e.s, st.in(dt, x, numel), st.in(dt, w, c),
                              st.in(dt, runningMean, c),
                              st.in(dt, runningVar, c), st.in(dt, dy, numel),
                              st.out(dt, dx, numel), st.out(dt, dw, c),
                              st.out(dt, db, c), n, c, spatial,
                              static_cast<float>(eps), training);
      st.commit();
    });
  }

  void transpose(DType dt, const void *x, void *y, const Shape &xShape,
                 const std::vector<int64_t> &perm) override {
    run([&](Exec &e) {
      cuda::transpose(e.s, dtypeSize(dt), x, y, xShape, perm);
    });
  }
  void copySlab(DType dt, const void *src, int64_t srcDim, int64_t srcOffset,
                void *dst, int64_t dstDim, int64_t dstOffset, int64_t outer,
                int64_t size, int64_t inner) override {
    run([&](Exec &e) {
      cuda::copySlab(e.s, dtypeSize(dt), src, srcDim, srcOffset, dst, dstDim,
                     dstOffset, outer, size, inner);
    });
  }
  void reduceForward(DType dt, ReduceKind kind, const void *x,
                     const Shape &xShape, const std::vector<int64_t> &dims,
                     void *y) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::reduceForward(e.s, dt, kind, x, xShape, dims,
                          st.out(dt, y, keptCount(xShape, dims)));
      st.commit();
    });
  }
  void reduceBackward(DType dt, ReduceKind kind, const void *dy,
                      const Shape &xShape, const std::vector<int64_t> &dims,
                      void *dx) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::reduceBackward(e.s, kind, st.in(dt, dy, keptCount(xShape, dims)),
                           xShape, dims, st.out(dt, dx, numelOf(xShape)));
      st.commit();
    });
  }

  void crossEntropyForward(DType dt, DType targetType, const void *logits,
                           const void *targets, void *loss, int64_t n,
                           int64_t c, int64_t width, LossReduction reduction,
                           int64_t ignoreIndex) override {
    run([&](Exec &e) {
      Scratch count = countedTargets(e, "cross_entropy_forward", targetType,
                                     targets, n, c, ignoreIndex);
      DeviceStaging st({e.s}); // logits are read in their storage type
      cuda::crossEntropyForward(e.s, dt, targetType, logits, targets,
                                count.as<int64_t>(), st.out(dt, loss, 1),
                                {n, c, width}, reduction, ignoreIndex);
      st.commit();
    });
  }
  void crossEntropyBackward(DType dt, DType targetType, const void *logits,
                            const void *targets, const void *dloss,
                            void *dlogits, int64_t n, int64_t c, int64_t width,
                            LossReduction reduction,
                            int64_t ignoreIndex) override {
    run([&](Exec &e) {
      Scratch count = countedTargets(e, "cross_entropy_backward", targetType,
                                     targets, n, c, ignoreIndex);
      DeviceStaging st({e.s}); // logits, dlogits in their storage type
      cuda::crossEntropyBackward(e.s, dt, targetType, logits, targets,
                                 count.as<int64_t>(), st.in(dt, dloss, 1),
                                 dlogits, {n, c, width}, reduction,
                                 ignoreIndex);
    });
  }
  void crossEntropyForwardBackward(DType dt, DType targetType,
                                   const void *logits, const void *targets,
                                   const void *dloss, void *loss,
                                   void *dlogits, int64_t n, int64_t c,
                                   int64_t width, LossReduction reduction,
                                   int64_t ignoreIndex) override {
    run([&](Exec &e) {
      Scratch count = countedTargets(e, "cross_entropy_forward_backward",
                                     targetType, targets, n, c, ignoreIndex);
      DeviceStaging st({e.s}); // logits, dlogits in their storage type
      cuda::crossEntropyForwardBackward(
          e.s, dt, targetType, logits, targets, count.as<int64_t>(),
          st.in(dt, dloss, 1), st.out(dt, loss, 1), dlogits, {n, c, width},
          reduction, ignoreIndex);
      st.commit();
    });
  }
  void mseLossForward(DType dt, const void *a, const void *b, void *loss,
                      int64_t n, LossReduction reduction) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::mseLossForward(e.s, st.in(dt, a, n), st.in(dt, b, n),
                           st.out(dt, loss, 1), n, reduction);
      st.commit();
    });
  }
  void mseLossBackward(DType dt, const void *a, const void *b,
                       const void *dloss, void *da, void *db, int64_t n,
                       LossReduction reduction) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::mseLossBackward(e.s, st.in(dt, a, n), st.in(dt, b, n),
                            st.in(dt, dloss, 1), st.out(dt, da, n),
                            st.out(dt, db, n), n, reduction);
      st.commit();
    });
  }

  void sgdStep(DType gradType, float *param, const void *grad,
               float *momentumBuf, int64_t n, const SgdScalars &sc,
               const SgdScalars *live, const float *skip) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::sgdStep(e.s, param, st.in(gradType, grad, n), momentumBuf, n, sc,
                    live, skip);
    });
  }
  void adamwStep(DType gradType, float *param, const void *grad, float *expAvg,
                 float *expAvgSq, int64_t n, const AdamWScalars &sc,
                 const AdamWScalars *live, const float *skip) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::adamwStep(e.s, param, st.in(gradType, grad, n), expAvg, expAvgSq,
                      n, sc, live, skip);
    });
  }
  void gradSqNorm(DType dt, const void *grad, int64_t n, float *out,
                  bool accumulate) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::gradSqNorm(e.s, st.in(dt, grad, n), n, out, accumulate);
    });
  }
  void nonfiniteFlag(DType dt, const void *grad, int64_t n, float *out,
                     bool accumulate) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::nonfiniteFlag(e.s, st.in(dt, grad, n), n, out, accumulate);
    });
  }
  void clipGrad(DType dt, void *grad, int64_t n, const float *totalSq,
                double maxNorm) override {
    run([&](Exec &e) { cuda::clipGrad(e.s, dt, grad, n, totalSq, maxNorm); });
  }
  void clipCoefficient(const float *totalSq, float *norm, float *coef,
                       double maxNorm) override {
    run([&](Exec &e) {
      cuda::clipCoefficient(e.s, totalSq, norm, coef, maxNorm);
    });
  }

private:
  /// Device memory and slab copies for ContiguousAttention.
  struct DeviceRows {
    struct Buffer {
      Scratch bytes;
      void *data() const { return bytes.as<void>(); }
    };
    Buffer allocate(int64_t bytes) { return Buffer{Scratch(s, bytes)}; }
    void copyRows(void *dst, int64_t dstPitch, const void *src,
                  int64_t srcPitch, int64_t rowBytes, int64_t rows) {
      cuda::copySlab(s, 1, src, srcPitch, 0, dst, dstPitch, 0, rows, rowBytes,
                     1);
    }
    Stream s;
  };

  /// Attention head by head on cuBLAS (contiguous q, k, v).
  static void attentionForwardOnBlas(Exec &e, DType dt, const void *q,
                                     const void *k, const void *v,
                                     const void *bias, void *out,
                                     float *stats, const AttentionDims &d) {
    int64_t qn = d.batch * d.tq * d.heads * d.headDim;
    int64_t kvn = d.batch * d.tk * d.kvHeads * d.headDim;
    DeviceStaging st({e.s});
    const float *fq = st.in(dt, q, qn), *fk = st.in(dt, k, kvn),
                *fv = st.in(dt, v, kvn), *fb = st.in(dt, bias, d.biasNumel());
    float *fo = st.out(dt, out, qn);
    Scratch p(e.s, d.batch * d.tq * d.tk * 4);
    for (int64_t h = 0; h < d.heads; ++h) {
      HeadView hv = headView(d, h);
      scores(e, fq, fk, fb, d, h, hv, p.as<float>());
      maskedSoftmaxRows(e.s, p.as<float>(), d.batch * d.tq, d.tq, d.tk,
                        d.causal, stats ? stats + h * d.tq : nullptr,
                        d.heads * d.tq);
      gemm(e, DType::F32, false, false, d.tq, d.headDim, d.tk, 1.0f,
           p.as<float>(), d.tk, d.tq * d.tk, fv + hv.kvOff, hv.kvLd,
           hv.kvStride, 0.0f, fo + hv.qOff, DType::F32, hv.qLd, hv.qStride,
           d.batch);
    }
    st.commit();
  }
  static void attentionBackwardOnBlas(Exec &e, DType dt, const void *q,
                                      const void *k, const void *v,
                                      const void *bias, const void *dout,
                                      const float *stats, void *dq, void *dk,
                                      void *dv, void *dbias,
                                      const AttentionDims &d) {
    int64_t qn = d.batch * d.tq * d.heads * d.headDim;
    int64_t kvn = d.batch * d.tk * d.kvHeads * d.headDim;
    DeviceStaging st({e.s});
    const float *fq = st.in(dt, q, qn), *fk = st.in(dt, k, kvn),
                *fv = st.in(dt, v, kvn), *fdo = st.in(dt, dout, qn),
                *fb = st.in(dt, bias, d.biasNumel());
    float *fdq = st.out(dt, dq, qn), *fdk = st.out(dt, dk, kvn),
          *fdv = st.out(dt, dv, kvn), *fdb = st.out(dt, dbias, d.biasNumel());
    if (dk)
      cuda::fill(e.s, DType::F32, fdk, kvn, 0.0);
    if (dv)
      cuda::fill(e.s, DType::F32, fdv, kvn, 0.0);
    if (dbias)
      cuda::fill(e.s, DType::F32, fdb, d.biasNumel(), 0.0);
    float scale = static_cast<float>(d.scale);
    int64_t rows = d.batch * d.tq, pStride = d.tq * d.tk;
    Scratch p(e.s, rows * d.tk * 4), dp(e.s, rows * d.tk * 4);
    // Without the forward's statistics, each head's are made first, as the
    // forward makes them: P is exp(S - lse) either way, the same bits.
    Scratch made(e.s, stats ? 0 : rows * 4);
    float *pp = p.as<float>(), *pdp = dp.as<float>();
    for (int64_t h = 0; h < d.heads; ++h) {
      HeadView hv = headView(d, h);
      scores(e, fq, fk, fb, d, h, hv, pp);
      const float *lse = stats ? stats + h * d.tq : made.as<float>();
      int64_t lseBatchStride = stats ? d.heads * d.tq : d.tq;
      if (!stats)
        maskedLogSumExpRows(e.s, pp, rows, d.tq, d.tk, d.causal,
                            made.as<float>(), lseBatchStride);
      maskedExpRows(e.s, pp, rows, d.tq, d.tk, d.causal, lse, lseBatchStride);
      const float *dO = fdo + hv.qOff;
      if (dv) // dV += P^T dO
        gemm(e, DType::F32, true, false, d.tk, d.headDim, d.tq, 1.0f, pp,
             d.tk, pStride, dO, hv.qLd, hv.qStride, 1.0f,
             fdv + hv.kvOff, DType::F32, hv.kvLd, hv.kvStride,
             d.batch);
      if (!dq && !dk && !dbias)
        continue;
      // dP = dO V^T, then dS = P * (dP - rowsum(dP * P)) in place.
      gemm(e, DType::F32, false, true, d.tq, d.tk, d.headDim, 1.0f, dO,
           hv.qLd, hv.qStride, fv + hv.kvOff, hv.kvLd, hv.kvStride,
           0.0f, pdp, DType::F32, d.tk, pStride, d.batch);
      softmaxBackwardRows(e.s, pp, pdp, rows, d.tk);
      if (dbias) // dBias += dS, summed over a broadcast batch
        accumulateBatches(e.s, fdb + d.biasOffset(0, h), pdp,
                          d.batch, pStride, d.biasBatchStride());
      if (dq) // dQ = scale * dS K
        gemm(e, DType::F32, false, false, d.tq, d.headDim, d.tk, scale,
             pdp, d.tk, pStride, fk + hv.kvOff, hv.kvLd, hv.kvStride,
             0.0f, fdq + hv.qOff, DType::F32, hv.qLd, hv.qStride,
             d.batch);
      if (dk) // dK += scale * dS^T Q
        gemm(e, DType::F32, true, false, d.tk, d.headDim, d.tq, scale,
             pdp, d.tk, pStride, fq + hv.qOff, hv.qLd, hv.qStride,
             1.0f, fdk + hv.kvOff, DType::F32, hv.kvLd, hv.kvStride,
             d.batch);
    }
    st.commit();
  }

  /// Head h of Q/K/V/O ([batch, t, heads, headDim] row-major) as a strided
  /// batch of [t, headDim] matrices, one per batch element.
  struct HeadView {
    int64_t qOff, kvOff, qLd, kvLd, qStride, kvStride;
  };
  static HeadView headView(const AttentionDims &d, int64_t h) {
    int64_t g = h / (d.heads / d.kvHeads);
    return {h * d.headDim,
            g * d.headDim,
            d.heads * d.headDim,
            d.kvHeads * d.headDim,
            d.tq * d.heads * d.headDim,
            d.tk * d.kvHeads * d.headDim};
  }
  /// S = scale * Q K^T + bias of head h for every batch element into
  /// p[batch, tq, tk] (the mask is applied with the softmax).
  static void scores(Exec &e, const float *q, const float *k,
                     const float *bias, const AttentionDims &d, int64_t h,
                     const HeadView &v, float *p) {
    gemm(e, DType::F32, false, true, d.tq, d.tk, d.headDim,
         static_cast<float>(d.scale), q + v.qOff, v.qLd, v.qStride,
         k + v.kvOff, v.kvLd, v.kvStride, 0.0f, p, DType::F32, d.tk,
         d.tq * d.tk, d.batch);
    if (bias)
      addBatches(e.s, p, bias + d.biasOffset(0, h), d.batch, d.tq * d.tk,
                 d.biasBatchStride());
  }

  static int64_t keptCount(const Shape &xShape,
                           const std::vector<int64_t> &dims) {
    int64_t out = 1;
    for (size_t i = 0; i < xShape.size(); ++i)
      if (std::find(dims.begin(), dims.end(), int64_t(i)) == dims.end())
        out *= xShape[i];
    return out;
  }

  /// d(operand) = reduce_sum of `g` over the dims `operand` was broadcast
  /// along (as the CPU backend's sumToShape).
  static void sumToShape(Exec &e, const float *g, const Shape &outShape,
                         const Shape &operand, float *d) {
    std::vector<int64_t> dims;
    size_t lead = outShape.size() - operand.size();
    for (size_t i = 0; i < outShape.size(); ++i)
      if (i < lead || (operand[i - lead] == 1 && outShape[i] != 1))
        dims.push_back(static_cast<int64_t>(i));
    if (dims.empty()) {
      int64_t n = numelOf(outShape);
      if (n > 0)
        checkCuda(cudaMemcpyAsync(d, g, n * 4, cudaMemcpyDeviceToDevice, e.s),
                  "cudaMemcpyAsync (broadcast gradient)");
      return;
    }
    cuda::reduceForward(e.s, DType::F32, ReduceKind::Sum, g, outShape, dims,
                        d);
  }

  void hostToDevice(Exec &e, void *dst, const void *src, int64_t bytes) {
    if (isPinned(src)) {
      checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, e.s),
                "cudaMemcpyAsync (host to device)");
      return;
    }
    // Pageable memory goes through this thread's pinned buffer; the buffer
    // is refilled only after the previous chunk's copy has completed.
    for (int64_t off = 0; off < bytes; off += kPinnedBytes) {
      int64_t len = std::min(kPinnedBytes, bytes - off);
      std::memcpy(e.pinned, static_cast<const char *>(src) + off, len);
      checkCuda(cudaMemcpyAsync(static_cast<char *>(dst) + off, e.pinned, len,
                                cudaMemcpyHostToDevice, e.s),
                "cudaMemcpyAsync (host to device)");
      // host-sync: the pinned buffer is refilled for the next chunk.
      checkCuda(cudaStreamSynchronize(e.s), "cudaStreamSynchronize (copy)");
    }
  }
  void deviceToHost(Exec &e, void *dst, const void *src, int64_t bytes) {
    if (isPinned(dst)) {
      checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, e.s),
                "cudaMemcpyAsync (device to host)");
      return;
    }
    for (int64_t off = 0; off < bytes; off += kPinnedBytes) {
      int64_t len = std::min(kPinnedBytes, bytes - off);
      checkCuda(cudaMemcpyAsync(e.pinned, static_cast<const char *>(src) + off,
                                len, cudaMemcpyDeviceToHost, e.s),
                "cudaMemcpyAsync (device to host)");
      // host-sync: the host reads the pinned buffer next.
      checkCuda(cudaStreamSynchronize(e.s), "cudaStreamSynchronize (copy)");
      std::memcpy(static_cast<char *>(dst) + off, e.pinned, len);
    }
  }

  /// The calling thread's CUDA stream, pinned buffer and index verdicts,
  /// created on first use (its GEMM handles at its first GEMM, Exec).
  /// Entries are never erased while the backend lives (std::map
  /// references stay valid).
  ThreadState &state() {
    checkCuda(cudaSetDevice(device_), "cudaSetDevice");
    std::lock_guard<std::mutex> lock(mutex_);
    ThreadState &st = states_[std::this_thread::get_id()];
    if (!st.stream) {
      checkCuda(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags");
      st.scratch = std::make_unique<ScratchReserve>(st.stream);
      checkCuda(cudaMallocHost(&st.pinned, kPinnedBytes),
                "cudaMallocHost (pinned staging)");
      checkCuda(cudaMallocHost(reinterpret_cast<void **>(&st.verdicts),
                               kVerdictSlots * sizeof(IndexVerdict)),
                "cudaMallocHost (index verdicts)");
    }
    return st;
  }

  /// Queues `body`'s device work on the calling thread's stream.
  template <typename F> void run(F &&body) {
    ThreadState &st = state();
    Exec e{st.stream, &st, st.pinned, padGemmFlops_, tf32_};
    // A captured graph's kernels hold pointers into the reserve.
    ScratchCall call(*st.scratch, !st.capturing && graphs_.idle());
    body(e);
    call.finish(); // body's scratch is released
    finishCall();
  }
  /// Ends a call whose work is queued on the calling thread's stream.
  void finishCall() {
    if (syncEachCall_)
      synchronize();
  }
  /// A graph replays device work only: what the host must wait for cannot
  /// be captured (fails the capture, and the step runs eagerly).
  static void refuseHostWaitWhileCapturing(const ThreadState &st) {
    if (st.capturing)
      fail(Status::Unsupported,
           "cuda backend: a host wait for the device (a collective, a copy "
           "to or from host memory) inside a step being captured as a CUDA "
           "graph");
  }
  /// Runs `body` and waits for its device work (host memory, allocation).
  template <typename F> void runSync(F &&body) {
    refuseHostWaitWhileCapturing(state());
    run(std::forward<F>(body));
    synchronize();
  }

  /// Queues an index check on the calling thread's stream. Its verdict is
  /// read where that stream is next synchronised (Stream::synchronize, a
  /// copy to the host such as the loss's, a collective), which then fails
  /// naming `op` and the first bad index: no host wait inside the step.
  /// The count of targets not ignored (a mean divides by it) in scratch on
  /// the call's stream, their range check queued (queueCheck).
  Scratch countedTargets(Exec &e, const char *op, DType targetType,
                         const void *targets, int64_t n, int64_t c,
                         int64_t ignoreIndex) {
    Scratch count(e.s, 8);
    queueCheck(op, true, targetType, targets, n, c, ignoreIndex,
               count.as<int64_t>());
    return count;
  }
  void queueCheck(const char *op, bool targets, DType type, const void *ids,
                  int64_t n, int64_t limit, int64_t ignoreIndex,
                  int64_t *count) {
    ThreadState &st = state();
    PendingCheck check{op, targets, n, limit, ignoreIndex};
    if (st.capturing) // the graph's own slot, read after each launch
      return queueIndexCheck(st.stream, type, ids, n, limit, targets,
                             ignoreIndex, count, graphs_.captureCheck(check));
    if (st.pending.size() == kVerdictSlots)
      synchronize(); // every verdict slot holds an unread verdict
    queueIndexCheck(st.stream, type, ids, n, limit, targets, ignoreIndex,
                    count, st.verdicts + st.pending.size());
    st.pending.push_back(check);
  }
  /// After st's stream has been synchronised: fails with the first bad
  /// index of the checks queued since the last read, and of the last graph
  /// launched on it (each reported once).
  static void readVerdicts(ThreadState &st) {
    std::vector<PendingCheck> pending;
    pending.swap(st.pending);
    const StepGraphs::Graph *launched = st.launched;
    st.launched = nullptr;
    failOnBadIndex(pending, st.verdicts);
    if (launched)
      failOnBadIndex(launched->checks, launched->verdicts);
  }
  void synchronizeAllThreads() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &entry : states_)
      if (entry.second.stream) // host-sync: before the arena is freed
        checkCuda(cudaStreamSynchronize(entry.second.stream),
                  "cudaStreamSynchronize");
  }
  static bool envFlag(const char *name) {
    const char *v = std::getenv(name);
    return v && *v && std::strcmp(v, "0") != 0;
  }
  static bool envIs(const char *name, const char *value) {
    const char *v = std::getenv(name);
    return v && std::strcmp(v, value) == 0;
  }

  /// Runs `call(FusedAttention &, std::string &why)` when cuDNN's fused
  /// attention serves 16-bit operands on this thread (FSDPRT_CUDNN=0 turns
  /// it off); false means the caller runs the cuBLAS attention. Each reason
  /// for falling back is printed once.
  template <typename F> bool fused(DType dt, F &&call) {
#ifdef FSDPRT_HAVE_CUDNN
    if (dt == DType::F32 || !useCudnn_)
      return false;
    ThreadState &st = state();
    std::string why;
    if (!st.fusedTried) {
      st.fusedTried = true;
      st.fused = FusedAttention::create(st.stream, why);
    }
    if (st.fused && call(*st.fused, why))
      return true;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!why.empty() && fallbacks_.insert(why).second)
      std::fprintf(stderr, "fsdprt: cuda: %s; attention runs on cuBLAS\n",
                   why.c_str());
    return false;
#else
    (void)dt;
    (void)call;
    return false;
#endif
  }

  const int device_;
  cudaMemPool_t pool_ = nullptr;
  const bool syncEachCall_;
  const bool useCudnn_;
  const bool tf32_;
  const double padGemmFlops_;
  std::mutex mutex_;
  std::map<std::thread::id, ThreadState> states_;
  StepGraphs graphs_;
  std::set<std::string> fallbacks_; // reasons already printed
};

} // namespace

std::unique_ptr<Backend> createCudaBackend(int) {
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    cudaGetLastError();
    fail(Status::Unsupported,
         "cuda backend: no usable CUDA device: cudaGetDeviceCount: ",
         cudaGetErrorName(rc), " (", cudaGetErrorString(rc), ")");
  }
  if (count == 0)
    fail(Status::Unsupported, "cuda backend: no CUDA device found");
  return std::make_unique<CudaBackend>(pickDevice(count));
}

#ifdef FSDPRT_CUDA_EMULATION
// The tests' host emulation registers itself ("cuda_emu") from the test
// binary; the real backend is in the registry's list (Backend.cpp).
[[maybe_unused]] static const bool registered =
    registerBackend(FSDPRT_CUDA_BACKEND_NAME, createCudaBackend);
#endif

} // namespace cuda
} // namespace rt
} // namespace fsdp
