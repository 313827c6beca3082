//===- CudaBackend.cu - The CUDA backend ----------------------------------===//
//
// Adapts the kernels of Kernels.h, cuBLAS (Gemm.h), the attentions
// (FusedAttention.h, BlasAttention.h) and cuDNN's convolutions (CudnnConv.h)
// to the Backend interface, and owns
// what is the device's rather than a worker thread's (Worker.h): its
// memory, the ordering of the runtime's streams on it, and step graphs.
// Over 800 lines for the adapter table: one class implementing the ~50
// kernel calls of the Backend interface, each a few lines onto a launcher,
// which reads best whole.
//
// Streams. The runtime's streams are host worker threads (Stream.h) and its
// events are host markers between them. Each worker thread that calls this
// backend gets its own CUDA stream (Worker.h), so the work of different
// runtime streams overlaps on the device. A backend call queues its kernels,
// copies and GEMMs on that CUDA stream and returns; the device is ordered
// through DeviceOrdering (DeviceOrdering.h): an event record is also a
// cudaEvent on the recording worker's stream, a wait also a
// cudaStreamWaitEvent, so the host only orders the issue of work (where the
// host waits for the device: Worker.h). Collectives are issued onto the
// worker's own stream (queueHandle), after its work.
//
// Step graphs (StepGraphs.h): while a step is being captured, each worker's
// stream has joined the capture, so the same calls record into one CUDA
// graph instead of running; what must reach the host then refuses
// (refuseHostWaitWhileCapturing, Worker.cpp), which fails the capture only.
//
// Buffer lifetimes (where each buffer is last used before it is freed;
// scratch and pinned staging: Worker.h):
// * Arena buffers: fsdprt_buffer_free releases the range when its runtime
//   stream reaches the free and records a cudaEvent there; uses on other
//   streams are ordered before the free with events, exactly as on the CPU
//   backend. Operations touching bytes reused from the range wait for that
//   cudaEvent on their own streams (Arena, Context::resolve).
// * The arena itself: one cudaMallocAsync, freed with cudaFreeAsync in
//   deallocate() after every worker's stream has been synchronised (the
//   Context calls it once every runtime stream has drained).
//
//===----------------------------------------------------------------------===//
#include "CudaBackend.h"
#include "BlasAttention.h"
#include "Gemm.h"
#include "Kernels.h"
#include "LtMatmul.h"
#include "StepGraphs.h"
#include "Worker.h"
#ifdef FSDPRT_HAVE_CUDNN
#include "CudnnConv.h"
#include "FusedAttention.h"
#endif

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/backend/DeviceOrdering.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/backend/PackedAttention.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
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

const void *at(const void *p, int64_t elems, DType dt) {
  return p ? static_cast<const char *>(p) + elems * dtypeSize(dt) : nullptr;
}

bool overlaps(const void *a, const void *b, int64_t bytes) {
  auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

/// The device of this process: its local rank's. More local ranks than
/// visible devices would put two ranks on one GPU, which NCCL refuses only
/// after the rendezvous (as "invalid usage"): refused here, before it,
/// unless NCCL_HOSTID is set (ranks sharing a GPU on purpose, each its own
/// NCCL host: the lease kit's loopback check, docs/Communicators.md).
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
        useCudnnConv_(useCudnn_ && !envIs("FSDPRT_CUDNN_CONV", "0")),
        workers_(device, graphs_, syncEachCall_,
                 envFlag("FSDPRT_CUDA_TF32")) {
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
    workers_.forEach([&](const ThreadState &st) {
      if (st.gemm.workspace)
        r.gemmWorkspaceBytes += static_cast<int64_t>(kGemmWorkspaceBytes);
      if (!st.scratch)
        return;
      r.scratchBytes += st.scratch->bytes();
      if (st.scratch->largestCall() > largest) {
        largest = st.scratch->largestCall();
        r.scratchOp = st.scratch->largestOp();
      }
    });
    return r;
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
    ThreadState &st = workers_.state();
    return std::make_shared<CudaMarker>(st.stream, st.capturing);
  }
  void wait(DeviceMarker &marker) override {
    checkCuda(cudaStreamWaitEvent(workers_.state().stream,
                                  static_cast<CudaMarker &>(marker).event(), 0),
              "cudaStreamWaitEvent");
  }
  void *queueHandle() override { return workers_.state().stream; }
  bool capturing() override { return workers_.state().capturing; }
  /// Waits for the calling thread's device work and reads its index checks'
  /// verdicts (failing on a bad index).
  void synchronize() override { workers_.synchronize(); }

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
    ThreadState &st = workers_.state();
    graphs_.join(st.stream);
    st.capturing = true;
  }
  void graphLeave() override {
    ThreadState &st = workers_.state();
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
    ThreadState &st = workers_.state();
    if (st.launched) // an earlier launch's checks: read them first
      synchronize();
    st.launched = &graphs_.launch(graph, st.stream, live, liveBytes);
    finishCall();
  }
  void graphDestroy(int64_t graph) override {
    std::unique_ptr<StepGraphs::Graph> g = graphs_.release(graph);
    workers_.synchronizeAll(); // no launch of it is left on any stream
    workers_.forEach([&](ThreadState &st) {
      if (st.launched == g.get()) // its checks go unread
        st.launched = nullptr;
    });
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
    workers_.synchronizeAll(); // the arena's last uses are on the workers
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
    workers_.synchronizeAll(); // copies from or to it may still be queued
    checkCuda(cudaFreeHost(ptr), "cudaFreeHost");
  }

  void copy(void *dst, const void *src, int64_t bytes, CopyKind kind) override {
    if (bytes <= 0)
      return;
    if (kind == CopyKind::HostToDevice && workers_.state().capturing)
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
  void linearGeluForward(DType dt, const void *x, const void *w, const void *b,
                         void *pre, void *y, int64_t m, int64_t k,
                         int64_t n) override {
    // y^T = gelu(w x^T + b) column-major in cuBLASLt's GELU_AUX_BIAS
    // epilogue, pre^T its aux: GELU of the f32 accumulator, each output
    // rounded once. Else Backend's default: the two unfused calls.
    bool fusedDone = false;
    run([&](Exec &e) {
      fusedDone =
          !padsGemm(e, dt, dt, m, n, k, k, k, n) &&
          e.lt()->run(
              {b ? LtGemm::Epilogue::GeluAuxBias : LtGemm::Epilogue::GeluAux,
               cudaType(dt), cudaType(dt), computeType(e, dt), true, false, n,
               m, k, w, k, x, k, y, n, const_cast<void *>(b), pre, n});
    });
    if (!fusedDone)
      Backend::linearGeluForward(dt, x, w, b, pre, y, m, k, n);
  }
  void linearGeluBackward(DType dt, const void *x, const void *w,
                          const void *dy, const void *pre, void *dx, void *dw,
                          void *db, int64_t m, int64_t k, int64_t n) override {
    // dx^T = w^T dy^T column-major (dx = dy w) times gelu'(pre) in
    // cuBLASLt's DGELU epilogue, rounded once; dw and db as linearBackward.
    // Else Backend's default: linearBackward, then the GELU's gradient.
    bool fusedDone = false;
    run([&](Exec &e) {
      fusedDone =
          !padsGemm(e, dt, dt, m, k, n, n, k, k) &&
          e.lt()->run({LtGemm::Epilogue::DGelu, cudaType(dt), cudaType(dt),
                       computeType(e, dt), false, false, k, m, n, w, k, dy, n,
                       dx, k, nullptr, const_cast<void *>(pre), k});
    });
    if (fusedDone)
      linearBackward(dt, x, w, dy, nullptr, dw, db, m, k, n);
    else
      Backend::linearGeluBackward(dt, x, w, dy, pre, dx, dw, db, m, k, n);
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
                             static_cast<float>(eps), e.norms);
    });
  }
  void addLayerNormForward(DType dt, const void *a, const void *b,
                           const void *w, const void *bias, void *sum, void *y,
                           int64_t rows, int64_t d, double eps) override {
    run([&](Exec &e) {
      cuda::addLayerNormForward(e.s, dt, a, b, w, bias, sum, y, rows, d,
                                static_cast<float>(eps), e.norms);
    });
  }
  void layerNormBackward(DType dt, const void *x, const void *w, const void *dy,
                         void *dx, void *dw, void *db, int64_t rows, int64_t d,
                         double eps) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::layerNormBackward(e.s, dt, x, w, dy, dx, st.out(dt, dw, d),
                              st.out(dt, db, d), rows, d,
                              static_cast<float>(eps), e.norms);
      st.commit();
    });
  }
  void addLayerNormBackward(DType dt, const void *x, const void *w,
                            const void *dy, const void *addend, void *dx,
                            void *dw, void *db, int64_t rows, int64_t d,
                            double eps) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::addLayerNormBackward(e.s, dt, x, w, dy, addend, dx,
                                 st.out(dt, dw, d), st.out(dt, db, d), rows, d,
                                 static_cast<float>(eps), e.norms);
      st.commit();
    });
  }
  void rmsNormForward(DType dt, const void *x, const void *w, void *y,
                      int64_t rows, int64_t d, double eps) override {
    run([&](Exec &e) {
      cuda::rmsNormForward(e.s, dt, x, w, y, rows, d, static_cast<float>(eps),
                           e.norms);
    });
  }
  void rmsNormBackward(DType dt, const void *x, const void *w, const void *dy,
                       void *dx, void *dw, int64_t rows, int64_t d,
                       double eps) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::rmsNormBackward(e.s, dt, x, w, dy, dx, st.out(dt, dw, d), rows, d,
                            static_cast<float>(eps), e.norms);
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
      workers_.queueCheck("embedding_forward", IndexKind::TokenId, idsType,
                          ids, numIds, {vocab}, nullptr);
      cuda::embeddingForward(e.s, idsType, ids, table, out, dtypeSize(dt),
                             numIds, vocab, dim);
    });
  }
  void checkIndices(DType idsType, const void *ids, int64_t n,
                    const IndexRange &range, const char *op) override {
    run([&](Exec &) {
      workers_.queueCheck(op, IndexKind::Index, idsType, ids, n, range,
                          nullptr);
    });
  }
  void embeddingBackward(DType dt, DType idsType, const void *ids,
                         const void *dy, void *dtable, int64_t numIds,
                         int64_t vocab, int64_t dim) override {
    run([&](Exec &e) {
      workers_.queueCheck("embedding_backward", IndexKind::TokenId, idsType,
                          ids, numIds, {vocab}, nullptr);
      cuda::embeddingBackward(e.s, dt, idsType, ids, dy, dtable, numIds,
                              vocab, dim);
    });
  }

  // Attention with 16-bit operands runs on cuDNN's fused flash attention
  // when the build found cuDNN and it loads (FusedAttention.h); otherwise,
  // and for f32, head by head on cuBLAS (BlasAttention.h). A bias takes the
  // per-head path (cuDNN's SDPA graph is built without one). Either runs
  // inside the call, so that cuDNN's workspace is a piece of the stream's
  // scratch reserve.
  void attentionForward(DType dt, const void *q, const void *k, const void *v,
                        const void *bias, void *out, float *stats,
                        const AttentionDims &d) override {
    run([&](Exec &e) {
      if (!bias && fused(dt, [&](auto &fa, std::string &why) {
            return fa.forward(dt, q, k, v, out, stats, d, why);
          }))
        return;
      blasAttentionForward(e, dt, q, k, v, bias, out, stats, d);
    });
  }
  // cuDNN's backward takes the forward's out and statistics (or makes them
  // again); the cuBLAS path only the statistics.
  void attentionBackward(DType dt, const void *q, const void *k, const void *v,
                         const void *bias, const void *dout, const void *out,
                         const float *stats, void *dq, void *dk, void *dv,
                         void *dbias, const AttentionDims &d) override {
    run([&](Exec &e) {
      if (!bias && fused(dt, [&](auto &fa, std::string &why) {
            return fa.backward(dt, q, k, v, dout, out, stats, dq, dk, dv, d,
                               why);
          }))
        return;
      blasAttentionBackward(e, dt, q, k, v, bias, dout, stats, dq, dk, dv,
                            dbias, d);
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
  // Convolutions run on cuDNN (CudnnConv.h) in their storage type where
  // the build found cuDNN, it loads and has an engine for the geometry;
  // otherwise on the direct kernels of Conv.cu, in f32 (16-bit operands
  // staged). cuDNN's workspace is a piece of the call's scratch reserve.
  void convForward(DType dt, const void *x, const void *w, const void *b,
                   void *y, const ConvGeometry &g) override {
    run([&](Exec &e) {
      if (convOnCudnn(e, [&](auto &cc, std::string &why) {
            return cc.forward(dt, x, w, y, g, why);
          })) {
        if (b) // y [n, o, oh * ow] += b [o, 1], as PyTorch adds it
          cuda::binaryForward(e.s, dt, BinaryOp::Add, y,
                              {g.n, g.o, g.oh * g.ow}, b, {g.o, 1}, y);
        return;
      }
      DeviceStaging st({e.s});
      cuda::convForward(e.s, st.in(dt, x, g.inputNumel()),
                        st.in(dt, w, g.weightNumel()), st.in(dt, b, g.o),
                        st.out(dt, y, g.outputNumel()), g);
      st.commit();
    });
  }
  void convBackwardInput(DType dt, const void *dy, const void *w, void *dx,
                         const ConvGeometry &g) override {
    run([&](Exec &e) {
      if (convOnCudnn(e, [&](auto &cc, std::string &why) {
            return cc.backwardInput(dt, dy, w, dx, g, why);
          }))
        return;
      DeviceStaging st({e.s});
      cuda::convBackwardInput(e.s, st.in(dt, dy, g.outputNumel()),
                              st.in(dt, w, g.weightNumel()),
                              st.out(dt, dx, g.inputNumel()), g);
      st.commit();
    });
  }
  void convBackwardWeight(DType dt, const void *dy, const void *x, void *dw,
                          const ConvGeometry &g) override {
    run([&](Exec &e) {
      if (convOnCudnn(e, [&](auto &cc, std::string &why) {
            return cc.backwardWeight(dt, dy, x, dw, g, why);
          }))
        return;
      DeviceStaging st({e.s});
      cuda::convBackwardWeight(e.s, st.in(dt, dy, g.outputNumel()),
                               st.in(dt, x, g.inputNumel()),
                               st.out(dt, dw, g.weightNumel()), g);
      st.commit();
    });
  }
  void maxPoolForward(DType dt, const void *x, void *y,
                      const ConvGeometry &g) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::maxPoolForward(e.s, st.in(dt, x, g.inputNumel()),
                           st.out(dt, y, g.outputNumel()), g);
      st.commit();
    });
  }
  void maxPoolBackward(DType dt, const void *x, const void *dy, void *dx,
                       const ConvGeometry &g) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::maxPoolBackward(e.s, st.in(dt, x, g.inputNumel()),
                            st.in(dt, dy, g.outputNumel()),
                            st.out(dt, dx, g.inputNumel()), g);
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
  void copyStrided(DType dt, const void *src, void *dst, const StridedWindow &w,
                   bool scatter) override {
    run([&](Exec &e) {
      cuda::copyStrided(e.s, dtypeSize(dt), src, dst, w, scatter);
    });
  }
  void topkForward(DType dt, const void *x, void *values, int64_t *indices,
                   int64_t rows, int64_t n, int64_t k) override {
    run([&](Exec &e) {
      cuda::topkForward(e.s, dt, x, values, indices, rows, n, k);
    });
  }
  void sortForward(DType dt, const void *x, void *values, int64_t *indices,
                   int64_t rows, int64_t n) override {
    run([&](Exec &e) {
      cuda::sortForward(e.s, dt, x, values, indices, rows, n);
    });
  }
  void histc(DType dt, const void *x, void *y, int64_t numel, int64_t bins,
             double min, double max) override {
    run([&](Exec &e) { cuda::histc(e.s, dt, x, y, numel, bins, min, max); });
  }
  void invertPermutation(DType dt, const void *p, void *y,
                         int64_t n) override {
    run([&](Exec &e) {
      workers_.queueCheck("invert_permutation", IndexKind::Index, dt, p, n,
                          {n}, nullptr);
      cuda::invertPermutation(e.s, dt, p, y, n);
    });
  }
  void groupedMatmulForward(DType dt, DType offsetsType, const void *x,
                            const void *w, const void *offsets, void *y,
                            const GroupedDims &d) override {
    run([&](Exec &e) {
      workers_.queueCheck("grouped_matmul_forward", IndexKind::Index,
                          offsetsType, offsets, d.groups, {d.rows + 1},
                          nullptr);
      cuda::groupedMatmulForward(e.s, dt, offsetsType, x, w, offsets, y, d);
    });
  }
  void groupedMatmulBackwardWeight(DType dt, DType offsetsType, const void *x,
                                   const void *dy, const void *offsets,
                                   void *dw, const GroupedDims &d) override {
    run([&](Exec &e) {
      workers_.queueCheck("grouped_matmul_backward_weight", IndexKind::Index,
                          offsetsType, offsets, d.groups, {d.rows + 1},
                          nullptr);
      cuda::groupedMatmulBackwardWeight(e.s, dt, offsetsType, x, dy, offsets,
                                        dw, d);
    });
  }
  void cumsum(DType dt, const void *x, void *y, int64_t outer, int64_t dim,
              int64_t inner, bool reverse) override {
    run([&](Exec &e) {
      cuda::cumsum(e.s, dt, x, y, outer, dim, inner, reverse);
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
      Scratch count = workers_.countedTargets(e, "cross_entropy_forward",
                                              targetType, targets, n, c,
                                              ignoreIndex);
      DeviceStaging st({e.s}); // logits are read in their storage type
      cuda::crossEntropyForward(e.s, dt, targetType, logits, targets,
                                count.as<int64_t>(), st.out(dt, loss, 1),
                                {n, c, width, e.leanXent}, reduction,
                                ignoreIndex);
      st.commit();
    });
  }
  void crossEntropyBackward(DType dt, DType targetType, const void *logits,
                            const void *targets, const void *dloss,
                            void *dlogits, int64_t n, int64_t c, int64_t width,
                            LossReduction reduction,
                            int64_t ignoreIndex) override {
    run([&](Exec &e) {
      Scratch count = workers_.countedTargets(e, "cross_entropy_backward",
                                              targetType, targets, n, c,
                                              ignoreIndex);
      DeviceStaging st({e.s}); // logits, dlogits in their storage type
      cuda::crossEntropyBackward(e.s, dt, targetType, logits, targets,
                                 count.as<int64_t>(), st.in(dt, dloss, 1),
                                 dlogits, {n, c, width, e.leanXent},
                                 reduction, ignoreIndex);
    });
  }
  void crossEntropyForwardBackward(DType dt, DType targetType,
                                   const void *logits, const void *targets,
                                   const void *dloss, void *loss,
                                   void *dlogits, int64_t n, int64_t c,
                                   int64_t width, LossReduction reduction,
                                   int64_t ignoreIndex) override {
    run([&](Exec &e) {
      Scratch count = workers_.countedTargets(
          e, "cross_entropy_forward_backward", targetType, targets, n, c,
          ignoreIndex);
      DeviceStaging st({e.s}); // logits, dlogits in their storage type
      cuda::crossEntropyForwardBackward(
          e.s, dt, targetType, logits, targets, count.as<int64_t>(),
          st.in(dt, dloss, 1), st.out(dt, loss, 1), dlogits,
          {n, c, width, e.leanXent}, reduction, ignoreIndex);
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

  void sgdStep(DType gradType, const UpdateTensors *tensors, int64_t count,
               const SgdScalars &sc, const SgdScalars *live,
               const float *skip) override {
    run([&](Exec &e) {
      cuda::sgdStep(e.s, gradType, tensors, count, sc, live, skip);
    });
  }
  void adamwStep(DType gradType, const UpdateTensors *tensors, int64_t count,
                 const AdamWScalars &sc, const AdamWScalars *live,
                 const float *skip) override {
    run([&](Exec &e) {
      cuda::adamwStep(e.s, gradType, tensors, count, sc, live, skip);
    });
  }
  void lionStep(DType gradType, const UpdateTensors *tensors, int64_t count,
                const LionScalars &sc, const LionScalars *live,
                const float *skip) override {
    run([&](Exec &e) {
      cuda::lionStep(e.s, gradType, tensors, count, sc, live, skip);
    });
  }
  void adafactorStats(DType gradType, const float *param, const void *grad,
                      int64_t n, int64_t flatBegin,
                      const AdafactorLayout &layout, float *stats) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::adafactorStats(e.s, param, st.in(gradType, grad, n), n, flatBegin,
                           layout, stats);
    });
  }
  void adafactorFactor(DType gradType, const void *grad, int64_t n,
                       int64_t flatBegin, const AdafactorLayout &layout,
                       float *state, const float *stats, float *updateSq,
                       const AdafactorFactorScalars &sc,
                       const AdafactorFactorScalars *live,
                       const float *skip) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::adafactorFactor(e.s, st.in(gradType, grad, n), n, flatBegin, layout,
                            state, stats, updateSq, sc, live, skip);
    });
  }
  void adafactorApply(DType gradType, float *param, const void *grad, int64_t n,
                      int64_t flatBegin, const AdafactorLayout &layout,
                      const float *state, const float *stats,
                      const float *updateSq, const AdafactorApplyScalars &sc,
                      const AdafactorApplyScalars *live,
                      const float *skip) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::adafactorApply(e.s, param, st.in(gradType, grad, n), n, flatBegin,
                           layout, state, stats, updateSq, sc, live, skip);
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
  void maxAbs(DType dt, const void *grad, int64_t n, float *out,
              bool accumulate) override {
    run([&](Exec &e) {
      DeviceStaging st({e.s});
      cuda::maxAbs(e.s, st.in(dt, grad, n), n, out, accumulate);
    });
  }
  void clipCoefficient(const float *total, float *norm, float *coef,
                       double maxNorm, double normType) override {
    run([&](Exec &e) {
      cuda::clipCoefficient(e.s, total, norm, coef, maxNorm, normType);
    });
  }

private:
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

  // A call's way onto the calling thread's CUDA stream (Worker.h).
  template <typename F> void run(F &&body) {
    workers_.run(std::forward<F>(body));
  }
  template <typename F> void runSync(F &&body) {
    workers_.runSync(std::forward<F>(body));
  }
  void finishCall() { workers_.finishCall(); }

  /// Runs `call(FusedAttention &, std::string &why)` when cuDNN's fused
  /// attention serves 16-bit operands on this thread (FSDPRT_CUDNN=0 turns
  /// it off); false means the caller runs the cuBLAS attention. Each reason
  /// for falling back is printed once.
  template <typename F> bool fused(DType dt, F &&call) {
#ifdef FSDPRT_HAVE_CUDNN
    if (dt == DType::F32 || !useCudnn_)
      return false;
    ThreadState &st = workers_.state();
    return onCudnn(
        st.fusedTried, st.fused,
        [&](std::string &why) { return FusedAttention::create(st.stream, why); },
        call, "attention runs on cuBLAS");
#else
    (void)dt;
    (void)call;
    return false;
#endif
  }

  /// Runs `call(CudnnConv &, std::string &why)` when cuDNN serves
  /// convolutions on e's stream (FSDPRT_CUDNN_CONV=0 or FSDPRT_CUDNN=0 turn
  /// it off); false means the caller runs the direct kernels. Each reason
  /// for falling back is printed once.
  template <typename F> bool convOnCudnn(Exec &e, F &&call) {
#ifdef FSDPRT_HAVE_CUDNN
    if (!useCudnnConv_)
      return false;
    ThreadState &st = *e.st;
    return onCudnn(
        st.convTried, st.conv,
        [&](std::string &why) {
          return CudnnConv::create(st.stream, e.tf32, why);
        },
        call, "convolution runs on the direct kernels");
#else
    (void)e;
    (void)call;
    return false;
#endif
  }

  /// call(*user, why) with the thread's cuDNN user made by create(why) on
  /// its first call; false, the reason printed once (noteFallback), where
  /// it could not be made or declines the call.
  template <typename User, typename Create, typename F>
  bool onCudnn(bool &tried, std::unique_ptr<User> &user, Create &&create,
               F &&call, const char *instead) {
    std::string why;
    if (!tried) {
      tried = true;
      user = create(why);
    }
    if (user && call(*user, why))
      return true;
    noteFallback(why, instead);
    return false;
  }

  /// Prints why cuDNN does not serve a call, once per reason.
  void noteFallback(const std::string &why, const char *instead) {
    std::lock_guard<std::mutex> lock(fallbacksMutex_);
    if (!why.empty() && fallbacks_.insert(why).second)
      std::fprintf(stderr, "fsdprt: cuda: %s; %s\n", why.c_str(), instead);
  }

  const int device_;
  cudaMemPool_t pool_ = nullptr;
  const bool syncEachCall_;
  const bool useCudnn_;
  const bool useCudnnConv_;
  StepGraphs graphs_;
  Workers workers_; // after graphs_: torn down before it
  std::mutex fallbacksMutex_;
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
// binary; the real backend is in the built-in list (backends/Builtin.cpp).
[[maybe_unused]] static const bool registered =
    registerBackend(FSDPRT_CUDA_BACKEND_NAME, createCudaBackend);
#endif

} // namespace cuda
} // namespace rt
} // namespace fsdp
