//===- Device.h - CUDA status checks, launch shapes, scratch ----*- C++ -*-===//
//
// Shared by the CUDA backend's translation units: the kernels' (nvcc) and
// the host-only .cpp files'.
//
// * Every CUDA and cuBLAS status is checked; a failure becomes an
//   fsdp::rt::Error naming the call and the CUDA error name and text.
// * Every kernel launch is followed by FSDPRT_CUDA_CHECK_LAUNCH, which always
//   checks the launch status (bad configuration, missing kernel image) and in
//   debug builds (no NDEBUG) also synchronises the stream so that a fault is
//   reported by the launch that caused it.
// * Kernels are grid-stride loops over int64_t indices: the grid is capped
//   (gridFor) and each thread walks the rest, so no size is truncated.
// * Scratch memory is used on the stream of the operation that takes it,
//   before that stream's next call: a piece of the stream's reserve
//   (ScratchReserve.h), reused by the next call in stream order.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_DEVICE_H
#define FSDP_RT_CUDA_DEVICE_H

#include "ScratchReserve.h"

#include "fsdp/rt/DType.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/math/Half.h"
#include "fsdp/rt/math/Storage.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace fsdp {
namespace rt {
namespace cuda {

inline void checkCuda(cudaError_t rc, const char *what) {
  if (rc == cudaSuccess)
    return;
  Status st = rc == cudaErrorMemoryAllocation ? Status::OutOfMemory
              : (rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver)
                  ? Status::Unsupported
                  : Status::Internal;
  fail(st, "cuda backend: ", what, ": ", cudaGetErrorName(rc), " (",
       cudaGetErrorString(rc), ")");
}

inline void checkCublas(cublasStatus_t rc, const char *what) {
  if (rc == CUBLAS_STATUS_SUCCESS)
    return;
  fail(rc == CUBLAS_STATUS_ALLOC_FAILED ? Status::OutOfMemory
                                        : Status::Internal,
       "cuda backend: ", what, ": ", cublasGetStatusName(rc), " (",
       cublasGetStatusString(rc), ")");
}

inline void checkLaunch(cudaStream_t stream, const char *kernel) {
  checkCuda(cudaGetLastError(), kernel);
#ifndef NDEBUG // host-sync: debug builds only
  checkCuda(cudaStreamSynchronize(stream), kernel);
#else
  (void)stream;
#endif
}

/// An environment switch is on: set, not empty and not "0".
inline bool envFlag(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}
/// An environment variable is exactly `value`.
inline bool envIs(const char *name, const char *value) {
  const char *v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

constexpr int kThreads = 256;
/// Enough blocks to cover n one thread per item, capped so that the grid
/// stays well inside the 2^31 - 1 limit; grid-stride loops cover the rest.
inline unsigned gridFor(int64_t n) {
  int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(blocks, int64_t(1) << 20)));
}

/// Launches kernel<<<gridFor(n), kThreads, 0, stream>>>(args...) unless n is
/// 0, then checks the launch. Under the host emulation of the tests
/// (unittests/cuda/emu) a launch is a plain call with a 1x1 grid (recorded
/// instead while the stream is capturing).
#ifdef FSDPRT_CUDA_EMULATION
#define FSDPRT_LAUNCH(kernel, n, stream, ...)                                  \
  do {                                                                         \
    if ((n) > 0) {                                                             \
      ::emuLaunch((stream), kernel, __VA_ARGS__);                              \
      ::fsdp::rt::cuda::checkLaunch((stream), #kernel);                        \
    }                                                                          \
  } while (0)
#else
#define FSDPRT_LAUNCH(kernel, n, stream, ...)                                  \
  do {                                                                         \
    int64_t launchN_ = (n);                                                    \
    if (launchN_ > 0) {                                                        \
      kernel<<<::fsdp::rt::cuda::gridFor(launchN_),                            \
               ::fsdp::rt::cuda::kThreads, 0, (stream)>>>(__VA_ARGS__);        \
      ::fsdp::rt::cuda::checkLaunch((stream), #kernel);                        \
    }                                                                          \
  } while (0)
#endif

/// Launches kernel<<<blocks (capped), kThreads, 0, stream>>>(args...) unless
/// blocks is 0, then checks the launch; under the host emulation a plain
/// call, as FSDPRT_LAUNCH.
#ifdef FSDPRT_CUDA_EMULATION
#define FSDPRT_LAUNCH_BLOCKS(kernel, blocks, stream, ...)                      \
  FSDPRT_LAUNCH(kernel, blocks, stream, __VA_ARGS__)
#else
#define FSDPRT_LAUNCH_BLOCKS(kernel, blocks, stream, ...)                      \
  do {                                                                         \
    int64_t launchBlocks_ = (blocks);                                          \
    if (launchBlocks_ > 0) {                                                   \
      kernel<<<static_cast<unsigned>(                                          \
                   std::min<int64_t>(launchBlocks_, int64_t(1) << 20)),        \
               ::fsdp::rt::cuda::kThreads, 0, (stream)>>>(__VA_ARGS__);        \
      ::fsdp::rt::cuda::checkLaunch((stream), #kernel);                        \
    }                                                                          \
  } while (0)
#endif

/// One block per row (FSDPRT_ROW_STRIDE), its threads across the row
/// (FSDPRT_COL_STRIDE), reducing through blockSum / blockMax (RowKernels.cu).
#define FSDPRT_LAUNCH_ROWS(kernel, rows, stream, ...)                          \
  FSDPRT_LAUNCH_BLOCKS(kernel, rows, stream, __VA_ARGS__)

/// Threads of a FSDPRT_LAUNCH_WIDE_ROWS block: 1024, or 1 under the host
/// emulation (a block is one thread there).
#ifdef FSDPRT_CUDA_EMULATION
constexpr int kWideThreads = 1;
#else
constexpr int kWideThreads = 1024;
#endif

/// One block of kWideThreads threads per row (rows capped as
/// FSDPRT_LAUNCH_BLOCKS, FSDPRT_ROW_STRIDE covering the rest): rows whose
/// elements the block keeps in registers (cross-entropy, RowKernels.cu).
/// Under the host emulation a plain call, as FSDPRT_LAUNCH.
#ifdef FSDPRT_CUDA_EMULATION
#define FSDPRT_LAUNCH_WIDE_ROWS(kernel, rows, stream, ...)                     \
  FSDPRT_LAUNCH(kernel, rows, stream, __VA_ARGS__)
#else
#define FSDPRT_LAUNCH_WIDE_ROWS(kernel, rows, stream, ...)                     \
  do {                                                                         \
    int64_t launchRows_ = (rows);                                              \
    if (launchRows_ > 0) {                                                     \
      kernel<<<static_cast<unsigned>(                                          \
                   std::min<int64_t>(launchRows_, int64_t(1) << 20)),          \
               ::fsdp::rt::cuda::kWideThreads, 0, (stream)>>>(__VA_ARGS__);    \
      ::fsdp::rt::cuda::checkLaunch((stream), #kernel);                        \
    }                                                                          \
  } while (0)
#endif

/// Threads of a warp: 32, or 1 under the host emulation, where a block is
/// one thread (its warp reductions are the value itself).
#ifdef FSDPRT_CUDA_EMULATION
constexpr int kWarp = 1;
#else
constexpr int kWarp = 32;
#endif
constexpr int kWarpsPerBlock = kThreads / kWarp;

/// One warp per row (FSDPRT_WARP_ROW_STRIDE), its lanes across the row
/// (FSDPRT_LANE_STRIDE), reducing through warpSum: rows of a few thousand
/// elements (norms) without block barriers.
#define FSDPRT_LAUNCH_WARP_ROWS(kernel, rows, stream, ...)                     \
  FSDPRT_LAUNCH_BLOCKS(kernel,                                                 \
                       ((rows) + ::fsdp::rt::cuda::kWarpsPerBlock - 1) /       \
                           ::fsdp::rt::cuda::kWarpsPerBlock,                   \
                       stream, __VA_ARGS__)
#define FSDPRT_WARP_ROW_STRIDE(r, rows)                                        \
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) +   \
                   threadIdx.x / kWarp;                                        \
       r < (rows); r += static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp))
#define FSDPRT_LANE_STRIDE(j, n)                                               \
  for (int64_t j = threadIdx.x % kWarp; j < (n); j += kWarp)

#define FSDPRT_ROW_STRIDE(r, rows)                                             \
  for (int64_t r = blockIdx.x; r < (rows); r += gridDim.x)
#define FSDPRT_COL_STRIDE(j, n)                                                \
  for (int64_t j = threadIdx.x; j < (n); j += blockDim.x)

#define FSDPRT_GRID_STRIDE(i, n)                                               \
  for (int64_t i =                                                             \
           static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;        \
       i < (n); i += static_cast<int64_t>(gridDim.x) * blockDim.x)

/// Logs per-call scratch by op when FSDPRT_CUDA_SCRATCH_LOG=1
/// (ScratchLog.cpp).
void noteScratch(int64_t bytes);

/// Device scratch of one call, used on `stream` only: a piece of the
/// stream's reserve during a backend call (ScratchReserve.h), otherwise a
/// stream-ordered allocation of its own, freed on the same stream.
class Scratch {
public:
  Scratch() = default;
  Scratch(cudaStream_t stream, int64_t bytes) : stream_(stream) {
    if (bytes <= 0)
      return;
    noteScratch(bytes);
    reserve_ = activeReserve(stream);
    if (reserve_) {
      piece_ = reserve_->take(bytes);
      return;
    }
    piece_.owned = true;
    checkCuda(cudaMallocAsync(&piece_.ptr, static_cast<size_t>(bytes), stream),
              "cudaMallocAsync (scratch)");
  }
  ~Scratch() { release(); }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  Scratch(Scratch &&o) noexcept { *this = std::move(o); }
  Scratch &operator=(Scratch &&o) noexcept {
    if (this != &o) {
      release();
      stream_ = o.stream_;
      reserve_ = o.reserve_;
      piece_ = o.piece_;
      o.piece_ = ScratchPiece{};
    }
    return *this;
  }
  template <typename T> T *as() const { return static_cast<T *>(piece_.ptr); }

private:
  void release() noexcept {
    if (!piece_.ptr)
      return;
    if (reserve_)
      reserve_->release(piece_);
    else
      cudaFreeAsync(piece_.ptr, stream_); // Cannot throw; stream-ordered.
    piece_ = ScratchPiece{};
  }

  cudaStream_t stream_ = nullptr;
  ScratchReserve *reserve_ = nullptr;
  ScratchPiece piece_;
};

/// Element i of an I32 (i32) or I64 index tensor.
__device__ inline int64_t loadIndex(bool i32, const void *ids, int64_t i) {
  return i32 ? static_cast<const int32_t *>(ids)[i]
             : static_cast<const int64_t *>(ids)[i];
}

/// Calls f(StorageTraits{}) for a floating-point dtype: the traits of
/// fsdp/rt/math/Storage.h, shared with the CPU backend, so that device code
/// loads and stores the bits the CPU backend does.
template <typename F> void withStorage(DType dt, F &&f) {
  withStorageTraits("cuda backend: ", dt, std::forward<F>(f));
}

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_DEVICE_H
