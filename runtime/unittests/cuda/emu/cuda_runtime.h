//===- cuda_runtime.h - Host emulation of the CUDA runtime (tests only) ---===//
//
// Lets the CUDA backend's sources (runtime/cuda/*.cu) compile as plain C++
// and run on the host, so that the conformance suites can check their
// index arithmetic, launch coverage, staging and GEMM argument mapping on a
// machine without a GPU (fsdprt_cuda_emu_unittests). Device memory is host
// memory, every stream operation runs immediately, and a kernel "launch"
// is one call of the kernel function with a 1x1 grid, so each grid-stride
// loop walks all of its items in order. It says nothing about real device
// behaviour (memory model, races, cuBLAS numerics, performance).
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_CUDA_EMU_CUDA_RUNTIME_H
#define FSDPRT_CUDA_EMU_CUDA_RUNTIME_H

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

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
};
inline const char *cudaGetErrorName(cudaError_t e) {
  switch (e) {
  case cudaSuccess:
    return "cudaSuccess";
  case cudaErrorMemoryAllocation:
    return "cudaErrorMemoryAllocation";
  default:
    return "cudaErrorEmulated";
  }
}
inline const char *cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "emulated error";
}
inline cudaError_t cudaGetLastError() { return cudaSuccess; }

struct EmuStream {};
using cudaStream_t = EmuStream *;
constexpr unsigned cudaStreamNonBlocking = 1;
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) {
  *s = new EmuStream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

// Every stream operation has run when it returns: an event is always done.
struct EmuEvent {};
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
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) {
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaEventQuery(cudaEvent_t) { return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) {
  return cudaSuccess;
}

inline cudaError_t cudaGetDeviceCount(int *n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
enum cudaDeviceAttr { cudaDevAttrMemoryPoolsSupported = 115 };
inline cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) {
  *v = 1;
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
inline cudaError_t cudaMemGetInfo(size_t *f, size_t *t) {
  *f = *t = 0;
  return cudaSuccess;
}

/// Poisons fresh allocations so that a kernel reading memory it never
/// wrote shows up as NaN or garbage in the suites.
inline cudaError_t cudaMallocAsync(void **p, size_t bytes, cudaStream_t) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!*p)
    return cudaErrorMemoryAllocation;
  std::memset(*p, 0xff, bytes);
  EmuPool &pool = emuPool();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.sizes[*p] = bytes;
  pool.used += bytes;
  pool.usedHigh = std::max(pool.usedHigh, pool.used);
  return cudaSuccess;
}
inline cudaError_t cudaFreeAsync(void *p, cudaStream_t) {
  EmuPool &pool = emuPool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    auto it = pool.sizes.find(p);
    if (it != pool.sizes.end()) {
      pool.used -= it->second;
      pool.sizes.erase(it);
    }
  }
  std::free(p);
  return cudaSuccess;
}
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
};
inline cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes,
                                   cudaMemcpyKind, cudaStream_t) {
  std::memcpy(dst, src, bytes); // the backend never passes overlaps
  return cudaSuccess;
}

inline cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes,
                                   cudaStream_t) {
  std::memset(dst, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src,
                                     size_t spitch, size_t width,
                                     size_t height, cudaMemcpyKind,
                                     cudaStream_t) {
  if (width > dpitch || width > spitch)
    return cudaErrorInvalidValue; // cudaErrorInvalidPitchValue on a GPU
  for (size_t r = 0; r < height; ++r)
    std::memcpy(static_cast<char *>(dst) + r * dpitch,
                static_cast<const char *>(src) + r * spitch, width);
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
