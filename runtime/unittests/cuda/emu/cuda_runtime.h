//===- cuda_runtime.h - Host emulation of the CUDA runtime (tests only) ---===//
//
// Lets the CUDA backend's sources (runtime/backends/cuda/*.cu) compile as plain C++
// and run on the host, so that the conformance suites can check their
// index arithmetic, launch coverage, staging and GEMM argument mapping on a
// machine without a GPU (fsdprt_cuda_emu_unittests). Device memory is host
// memory; a stream is a worker thread running its operations in order, so
// calls return before their work has run and a stream waiting on an event
// (or on a collective's peers) holds up only itself, as on a GPU; a kernel
// "launch" is one call of the kernel function with a 1x1 grid, so each
// grid-stride loop walks all of its items in order. It says nothing about
// real device behaviour (memory model, cuBLAS numerics, performance).
//
// Stream capture (CUDA graphs) is emulated with CUDA's rules: a stream
// joins a capture by waiting on an event recorded in it; operations on
// capturing streams are recorded (arguments by value) instead of run, in
// issue order, and a graph launch runs them in that order; allocations
// made while capturing belong to the graph (its frees are no-ops, the
// memory is released with the graph). Synchronising a capturing stream,
// querying a captured event or waiting from a capture on an event recorded
// outside it fails and invalidates the capture, as on a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_CUDA_EMU_CUDA_RUNTIME_H
#define FSDPRT_CUDA_EMU_CUDA_RUNTIME_H

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#define FSDPRT_CUDA_EMULATION 1
#define __global__
#define __device__
#define __host__

struct EmuDim3 {
  unsigned x, y, z;
};
inline constexpr EmuDim3 blockIdx{0, 0, 0};
inline constexpr EmuDim3 threadIdx{0, 0, 0};
inline constexpr EmuDim3 blockDim{1, 1, 1};
inline constexpr EmuDim3 gridDim{1, 1, 1};
// One thread per block: shared memory is the thread's own, barriers are no-ops.
#define __shared__
#define __launch_bounds__(...)
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __uint_as_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline void __syncthreads() {}
// ...and a warp is that one thread: a shuffle reads its own value.
template <typename T> T __shfl_sync(unsigned, T v, int) { return v; }
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned) { return v; }

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureIsolation = 906,
  cudaErrorCapturedEvent = 907,
  cudaErrorIllegalState = 401,
};
inline const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  case cudaErrorStreamCaptureUnsupported:
    return "cudaErrorStreamCaptureUnsupported";
  case cudaErrorStreamCaptureInvalidated:
    return "cudaErrorStreamCaptureInvalidated";
  case cudaErrorStreamCaptureIsolation:
    return "cudaErrorStreamCaptureIsolation";
  case cudaErrorCapturedEvent:
    return "cudaErrorCapturedEvent";
  default:
    return "cudaErrorEmulated";
  }
}
inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "emulated error";
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }

/// One capture sequence: the operations recorded, in issue order, and the
/// allocations made while it was active.
struct EmuCapture {
  std::vector<std::function<void()>> ops;
  /// Run when the capture's graph is destroyed (or the capture dropped):
  /// the NCCL emulation releases its communicators' references here.
  std::vector<std::function<void()>> onDestroy;
  std::set<const void *> holders; // who registered an onDestroy
  ~EmuCapture() {
    for (auto &f : onDestroy)
      f();
  }
  std::vector<void *> allocations;
  /// Bytes of its allocations not yet freed in the capture, and their most,
  /// which each launch uses (graph memory nodes reuse freed memory).
  std::map<void *, size_t> sizes;
  uint64_t live = 0, peak = 0;
  bool active = true, invalid = false;
};
/// The graph memory pool's high-water mark (cudaGraphMemAttrUsedMemHigh).
inline std::atomic<uint64_t> &emuGraphHigh() {
  static std::atomic<uint64_t> high{0};
  return high;
}
/// How far a stream's worker has got: events and waits on other streams
/// hold it, so that it outlives the stream.
struct EmuProgress {
  std::mutex mutex;
  std::condition_variable advanced;
  uint64_t completed = 0; // operations run so far
  void await(uint64_t ticket) {
    std::unique_lock<std::mutex> lock(mutex);
    advanced.wait(lock, [&] { return completed >= ticket; });
  }
  bool reached(uint64_t ticket) {
    std::lock_guard<std::mutex> lock(mutex);
    return completed >= ticket;
  }
};
/// A stream is a FIFO of operations run by its own worker thread (started
/// on first use), so that a call returns before its work has run and the
/// host may run ahead of the device, as on a GPU: an operation that waits
/// (an event of another stream, a collective of the NCCL emulation waiting
/// for its peers) holds up its stream only.
struct EmuStream {
  std::shared_ptr<EmuCapture> capture; // while it takes part in a capture
  std::shared_ptr<EmuProgress> progress = std::make_shared<EmuProgress>();
  std::mutex mutex; // the queue and the worker
  std::condition_variable hasWork;
  std::deque<std::function<void()>> queue;
  uint64_t enqueued = 0;
  bool stopping = false;
  std::thread worker;

  ~EmuStream() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    hasWork.notify_all();
    if (worker.joinable())
      worker.join();
  }
  /// The ticket an event recorded now waits for.
  uint64_t ticket() {
    std::lock_guard<std::mutex> lock(mutex);
    return enqueued;
  }
  void push(std::function<void()> op) {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back(std::move(op));
    ++enqueued;
    if (!worker.joinable())
      worker = std::thread([this] { run(); });
    hasWork.notify_one();
  }
  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      hasWork.wait(lock, [&] { return stopping || !queue.empty(); });
      if (queue.empty())
        return; // stopping: the destructor waited for the queue first
      std::function<void()> op = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      op();
      {
        std::lock_guard<std::mutex> done(progress->mutex);
        ++progress->completed;
      }
      progress->advanced.notify_all();
      lock.lock();
    }
  }
  /// Until every operation enqueued so far has run.
  void drain() { progress->await(ticket()); }
  bool busy() { return !progress->reached(ticket()); }
};
using cudaStream_t = EmuStream *;
/// Guards every stream's and event's capture state.
inline std::mutex &emuCaptureMutex() {
  static std::mutex m;
  return m;
}
/// The capture `s` takes part in (null: none); the mutex is held. A
/// stream whose capture has ended leaves it here.
inline EmuCapture *emuCapturing(cudaStream_t s) {
  if (s && s->capture && !s->capture->active)
    s->capture = nullptr;
  return s ? s->capture.get() : nullptr;
}
/// Queues `op` on `s` (the null stream runs it now), or records it when
/// `s` is capturing.
inline void emuRun(cudaStream_t s, std::function<void()> op) {
  {
    std::lock_guard<std::mutex> lock(emuCaptureMutex());
    if (EmuCapture *c = emuCapturing(s)) {
      c->ops.push_back(std::move(op));
      return;
    }
  }
  if (s)
    s->push(std::move(op));
  else
    op();
}
/// A kernel launch: its arguments taken now, by value.
template <typename K, typename... A>
void emuLaunch(cudaStream_t s, K kernel, A... args) {
  emuRun(s, [=] { kernel(args...); });
}

constexpr unsigned cudaStreamNonBlocking = 1;
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
  *s = new EmuStream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  s->drain(); // its work still runs, as CUDA's does
  delete s;
  return cudaSuccess;
}
/// Synchronising or querying a capturing stream invalidates the capture.
inline cudaError_t emuRefuseWhileCapturing(cudaStream_t s) {
  std::lock_guard<std::mutex> lock(emuCaptureMutex());
  if (EmuCapture *c = emuCapturing(s)) {
    c->invalid = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (cudaError_t rc = emuRefuseWhileCapturing(s))
    return rc;
  if (s)
    s->drain();
  return cudaSuccess;
}
inline cudaError_t cudaStreamQuery(cudaStream_t s) {
  if (cudaError_t rc = emuRefuseWhileCapturing(s))
    return rc;
  return s && s->busy() ? cudaErrorNotReady : cudaSuccess;
}

/// An event is done once its stream's worker has run what was enqueued
/// before the record; one recorded in a capture is a node of the graph.
struct EmuEvent {
  std::shared_ptr<EmuCapture> capture; // recorded in it
  std::shared_ptr<EmuProgress> progress; // null: never recorded, or done
  uint64_t ticket = 0;
};
using cudaEvent_t = EmuEvent *;
constexpr unsigned cudaEventDisableTiming = 2;
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) {
  *e = new EmuEvent;
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  std::lock_guard<std::mutex> lock(emuCaptureMutex());
  EmuCapture *c = emuCapturing(s);
  if (c && c->invalid)
    return cudaErrorStreamCaptureInvalidated;
  e->capture = c ? s->capture : nullptr;
  e->progress = s && !c ? s->progress : nullptr;
  e->ticket = s && !c ? s->ticket() : 0;
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  {
    std::lock_guard<std::mutex> lock(emuCaptureMutex());
    if (e->capture)
      return cudaErrorCapturedEvent;
  }
  if (e->progress)
    e->progress->await(e->ticket);
  return cudaSuccess;
}
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  {
    std::lock_guard<std::mutex> lock(emuCaptureMutex());
    if (e->capture)
      return cudaErrorCapturedEvent;
  }
  return !e->progress || e->progress->reached(e->ticket) ? cudaSuccess
                                                         : cudaErrorNotReady;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e,
                                       unsigned) {
  std::shared_ptr<EmuProgress> progress;
  uint64_t ticket = 0;
  {
    std::lock_guard<std::mutex> lock(emuCaptureMutex());
    std::shared_ptr<EmuCapture> c = e->capture;
    if (c && !c->active)
      return cudaErrorCapturedEvent;
    EmuCapture *own = emuCapturing(s);
    if (own && c.get() != own) { // crosses the capture's boundary
      own->invalid = true;
      return cudaErrorStreamCaptureIsolation;
    }
    if (c && s && !own)
      s->capture = c; // joins the capture
    if (c || !e->progress || e->progress->reached(e->ticket))
      return cudaSuccess; // ordered inside the graph, or already passed
    progress = e->progress;
    ticket = e->ticket;
  }
  emuRun(s, [progress, ticket] { progress->await(ticket); });
  return cudaSuccess;
}

enum cudaStreamCaptureMode { cudaStreamCaptureModeRelaxed = 2 };
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
};
/// A graph and its executable are one object: the recorded capture.
struct EmuGraph {
  std::shared_ptr<EmuCapture> capture;
};
using cudaGraph_t = EmuGraph *;
using cudaGraphExec_t = EmuGraph *;
inline cudaError_t cudaStreamBeginCapture(cudaStream_t s,
                                          cudaStreamCaptureMode) {
  std::lock_guard<std::mutex> lock(emuCaptureMutex());
  if (!s || emuCapturing(s))
    return cudaErrorIllegalState;
  s->capture = std::make_shared<EmuCapture>();
  return cudaSuccess;
}
inline cudaError_t cudaStreamIsCapturing(cudaStream_t s,
                                         cudaStreamCaptureStatus *status) {
  std::lock_guard<std::mutex> lock(emuCaptureMutex());
  *status = emuCapturing(s) ? cudaStreamCaptureStatusActive
                            : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
/// The test hook FSDPRT_CUDA_EMU_CAPTURE_FAILS_ON=<rank>: every capture of
/// that rank (RANK) ends invalidated, as one that met an uncapturable call.
inline bool emuCaptureFailsHere() {
  const char *hook = std::getenv("FSDPRT_CUDA_EMU_CAPTURE_FAILS_ON");
  const char *rank = std::getenv("RANK");
  return hook && std::atoi(hook) == (rank ? std::atoi(rank) : 0);
}
/// Every stream that joined leaves with the origin. (The streams are not
/// tracked: the emulation asks each stream on its next use.)
inline cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *graph) {
  std::lock_guard<std::mutex> lock(emuCaptureMutex());
  *graph = nullptr;
  std::shared_ptr<EmuCapture> c = emuCapturing(s) ? s->capture : nullptr;
  if (!c)
    return cudaErrorIllegalState;
  c->active = false;
  s->capture = nullptr;
  if (c->invalid || emuCaptureFailsHere())
    return cudaErrorStreamCaptureInvalidated;
  *graph = new EmuGraph{c};
  return cudaSuccess;
}
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t *exec,
                                        cudaGraph_t graph,
                                        unsigned long long = 0) {
  *exec = graph;
  return cudaSuccess;
}
inline cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  std::shared_ptr<EmuCapture> c = exec->capture;
  uint64_t high = emuGraphHigh();
  while (c->peak > high && !emuGraphHigh().compare_exchange_weak(high, c->peak))
    ;
  emuRun(s, [c] {
    for (const auto &op : c->ops)
      op();
  });
  return cudaSuccess;
}
enum cudaGraphMemAttributeType { cudaGraphMemAttrUsedMemHigh = 1 };
inline cudaError_t cudaDeviceGetGraphMemAttribute(int,
                                                  cudaGraphMemAttributeType,
                                                  void *value) {
  *static_cast<uint64_t *>(value) = emuGraphHigh();
  return cudaSuccess;
}
/// Setting UsedMemHigh (to 0) restarts the mark.
inline cudaError_t cudaDeviceSetGraphMemAttribute(int,
                                                  cudaGraphMemAttributeType,
                                                  void *) {
  emuGraphHigh() = 0;
  return cudaSuccess;
}
inline cudaError_t cudaGraphExecDestroy(cudaGraphExec_t) {
  return cudaSuccess; // the graph owns it
}
inline cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  for (void *p : graph->capture->allocations)
    std::free(p);
  graph->capture->allocations.clear();
  delete graph;
  return cudaSuccess;
}

/// FSDPRT_CUDA_EMU_DEVICES devices (default 8: room for the multi-rank
/// tests' one device per rank).
inline cudaError_t cudaGetDeviceCount(int *n) {
  const char *devices = std::getenv("FSDPRT_CUDA_EMU_DEVICES");
  *n = devices ? std::atoi(devices) : 8;
  return *n > 0 ? cudaSuccess : cudaErrorNoDevice;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDevice(int *d) {
  *d = 0;
  return cudaSuccess;
}
enum cudaDeviceAttr {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrMemoryPoolsSupported = 115,
};
/// One of each: one SM, memory pools supported.
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) {
  *v = 1;
  return cudaSuccess;
}
/// One block of any kernel resident on the one SM.
template <typename K>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, K, int,
                                                          size_t) {
  *n = 1;
  return cudaSuccess;
}
/// The default pool's accounting of stream-ordered allocations (bytes in
/// use and their high-water mark), as cudaMemPoolAttrUsedMem[High].
struct EmuPool {
  std::mutex mutex;
  std::map<void *, size_t> sizes;
  uint64_t used = 0, usedHigh = 0;
};
inline EmuPool &emuPool() {
  static EmuPool pool;
  return pool;
}
using cudaMemPool_t = EmuPool *;
enum cudaMemPoolAttr {
  cudaMemPoolAttrReleaseThreshold = 4,
  cudaMemPoolAttrUsedMemCurrent = 7,
  cudaMemPoolAttrUsedMemHigh = 8,
};
inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *p, int) {
  *p = &emuPool();
  return cudaSuccess;
}
/// Setting UsedMemHigh (to 0) restarts the mark from what is in use.
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool,
                                           cudaMemPoolAttr attr, void *) {
  if (attr == cudaMemPoolAttrUsedMemHigh) {
    std::lock_guard<std::mutex> lock(pool->mutex);
    pool->usedHigh = pool->used;
  }
  return cudaSuccess;
}
inline cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool,
                                           cudaMemPoolAttr attr, void *v) {
  std::lock_guard<std::mutex> lock(pool->mutex);
  *static_cast<uint64_t *>(v) =
      attr == cudaMemPoolAttrUsedMemHigh ? pool->usedHigh : pool->used;
  return cudaSuccess;
}
/// Nothing is reserved beyond what is used: nothing to trim.
inline cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) {
  return cudaSuccess;
}
/// Device memory outside the stream-ordered pool (the NCCL emulation's
/// communicators hold some, as NCCL's do).
inline std::atomic<int64_t> &emuDriverBytes() {
  static std::atomic<int64_t> bytes{0};
  return bytes;
}
/// An 80 GiB device: free is what neither the pool nor the driver holds.
inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) {
  *t = size_t(80) << 30;
  std::lock_guard<std::mutex> lock(emuPool().mutex);
  *f = *t - emuPool().used - static_cast<size_t>(emuDriverBytes().load());
  return cudaSuccess;
}

/// Poisons fresh allocations so that a kernel reading memory it never
/// wrote shows up as NaN or garbage in the suites.
inline cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t s) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!*p)
    return cudaErrorMemoryAllocation;
  std::memset(*p, 0xff, bytes);
  {
    std::lock_guard<std::mutex> lock(emuCaptureMutex());
    if (EmuCapture *c = emuCapturing(s)) { // the graph's: not the pool's
      c->allocations.push_back(*p);
      c->sizes[*p] = bytes;
      c->live += bytes;
      c->peak = std::max(c->peak, c->live);
      return cudaSuccess;
    }
  }
  EmuPool &pool = emuPool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.sizes[*p] = bytes;
  pool.used += bytes;
  pool.usedHigh = std::max(pool.usedHigh, pool.used);
  return cudaSuccess;
}
inline cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  {
    std::lock_guard<std::mutex> lock(emuCaptureMutex());
    if (EmuCapture *c = emuCapturing(s)) {
      auto it = c->sizes.find(p);
      if (it != c->sizes.end()) { // reusable in the graph, released with it
        c->live -= it->second;
        c->sizes.erase(it);
        return cudaSuccess;
      }
    }
  }
  EmuPool &pool = emuPool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    auto it = pool.sizes.find(p);
    if (it != pool.sizes.end()) {
      pool.used -= it->second;
      pool.sizes.erase(it);
    }
  }
  emuRun(s, [p] { std::free(p); }); // once the stream's work before is done
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void **p, size_t bytes) {
  return cudaMallocAsync(p, bytes, nullptr);
}
/// cuda_runtime.h's typed overload.
template <typename T> cudaError_t cudaMalloc(T **p, size_t bytes) {
  return cudaMalloc(reinterpret_cast<void **>(p), bytes);
}
inline cudaError_t cudaFree(void *p) { return cudaFreeAsync(p, nullptr); }
inline cudaError_t cudaMallocHost(void **p, size_t bytes) {
  *p = std::malloc(bytes);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFreeHost(void *p) {
  std::free(p);
  return cudaSuccess;
}

enum cudaMemcpyKind {
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                   cudaMemcpyKind, cudaStream_t s) {
  // The backend never passes overlaps.
  emuRun(s, [=] { std::memcpy(dst, src, bytes); });
  return cudaSuccess;
}

inline cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes,
                                   cudaStream_t s) {
  emuRun(s, [=] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                     size_t spitch, size_t width,
                                     size_t height, cudaMemcpyKind,
                                     cudaStream_t s) {
  if (width > dpitch || width > spitch)
    return cudaErrorInvalidValue; // cudaErrorInvalidPitchValue on a GPU
  emuRun(s, [=] {
    for (size_t r = 0; r < height; ++r)
      std::memcpy(static_cast<char *>(dst) + r * dpitch,
                  static_cast<const char *>(src) + r * spitch, width);
  });
  return cudaSuccess;
}

enum cudaMemoryType {
  cudaMemoryTypeUnregistered = 0,
  cudaMemoryTypeHost = 1,
  cudaMemoryTypeDevice = 2,
};
struct cudaPointerAttributes {
  cudaMemoryType type;
};
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a,
                                            const void *) {
  a->type = cudaMemoryTypeUnregistered; // exercise the pinned staging path
  return cudaSuccess;
}

inline unsigned long long atomicMin(unsigned long long *p,
                                    unsigned long long v) {
  unsigned long long old = *p;
  if (v < old)
    *p = v;
  return old;
}
inline unsigned long long atomicAdd(unsigned long long *p,
                                    unsigned long long v) {
  unsigned long long old = *p;
  *p += v;
  return old;
}

enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 };

#endif // FSDPRT_CUDA_EMU_CUDA_RUNTIME_H
