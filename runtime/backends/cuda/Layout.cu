//===- Layout.cu - Transpose and concat / split slabs ---------------------===//
//
// Permutations (one thread per output element), strided slices and their
// scatter (one thread per element), and the strided slab copies of concat /
// split, slice and pad: rows copied in the widest unit (up to 16
// bytes) that every address, pitch and row width allows. On the last H100
// lease cudaMemcpy2DAsync moved GPT-2's q / k / v slabs (1536-byte rows) at
// about a quarter of the copy bandwidth: split and concat took 2.2 ms of a
// 30.6 ms step.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include <initializer_list>
#include <type_traits>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

template <typename T>
__global__ void transposeKernel(const T *x, T *y, Dims d, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t off, unused;
    offsetsOf(d, i, off, unused);
    y[i] = x[off];
  }
}

/// Copies B bytes, as one load and one store where B is 16, 8, 4 or 2.
template <int B>
__device__ inline void copyUnit(char *dst, const char *src) {
#ifdef FSDPRT_CUDA_EMULATION // host C++: no type punning
  std::memcpy(dst, src, B);
#else
  using U = std::conditional_t<
      B == 16, uint4,
      std::conditional_t<B == 8, uint2,
                         std::conditional_t<B == 4, uint32_t,
                                            std::conditional_t<B == 2, uint16_t,
                                                               uint8_t>>>>;
  *reinterpret_cast<U *>(dst) = *reinterpret_cast<const U *>(src);
#endif
}

/// `rows` rows of `units` B-byte units each, from src (row pitch srcPitch
/// bytes) to dst (dstPitch).
template <int B>
__global__ void copyRowsKernel(const char *src, int64_t srcPitch, char *dst,
                               int64_t dstPitch, int64_t units, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t r = i / units, c = (i - r * units) * B;
    copyUnit<B>(dst + r * dstPitch + c, src + r * srcPitch + c);
  }
}

/// Element p of the window ([outer, count, inner]) and its position in the
/// whole [outer, dim, inner] tensor; scatter swaps source and destination.
template <typename T>
__global__ void copyStridedKernel(const T *src, T *dst, StridedWindow w,
                                  bool scatter, int64_t n) {
  FSDPRT_GRID_STRIDE(p, n) {
    int64_t row = p / w.inner, j = p - row * w.inner;
    int64_t o = row / w.count, i = row - o * w.count;
    int64_t whole = (o * w.dim + w.start + i * w.step) * w.inner + j;
    if (scatter)
      dst[whole] = src[p];
    else
      dst[p] = src[whole];
  }
}

/// The widest unit of at most 16 bytes that divides every one of `values`.
int unitFor(std::initializer_list<uint64_t> values) {
  uint64_t all = 16;
  for (uint64_t v : values)
    all |= v;
  return static_cast<int>(all & ~(all - 1));
}

} // namespace

void transpose(Stream s, int64_t elemSize, const void *x, void *y,
               const Shape &xShape, const std::vector<int64_t> &perm) {
  requireRank(xShape.size(), "transpose input");
  std::vector<int64_t> xStrides = stridesOf(xShape);
  Dims d;
  d.rank = static_cast<int>(perm.size());
  for (int i = 0; i < d.rank; ++i) {
    d.size[i] = xShape[perm[i]];
    d.strideA[i] = xStrides[perm[i]];
    d.strideB[i] = 0;
  }
  int64_t n = numelOf(xShape);
  switch (elemSize) {
  case 2:
    FSDPRT_LAUNCH(transposeKernel<uint16_t>, n, s,
                  static_cast<const uint16_t *>(x), static_cast<uint16_t *>(y),
                  d, n);
    return;
  case 4:
    FSDPRT_LAUNCH(transposeKernel<uint32_t>, n, s,
                  static_cast<const uint32_t *>(x), static_cast<uint32_t *>(y),
                  d, n);
    return;
  default:
    FSDPRT_LAUNCH(transposeKernel<uint64_t>, n, s,
                  static_cast<const uint64_t *>(x), static_cast<uint64_t *>(y),
                  d, n);
  }
}

void copySlab(Stream s, int64_t elemSize, const void *src, int64_t srcDim,
              int64_t srcOffset, void *dst, int64_t dstDim, int64_t dstOffset,
              int64_t outer, int64_t size, int64_t inner) {
  // outer rows of size * inner elements each.
  int64_t row = inner * elemSize, width = size * row;
  if (outer == 0 || width == 0)
    return;
  const char *from = static_cast<const char *>(src) + srcOffset * row;
  char *to = static_cast<char *>(dst) + dstOffset * row;
  int64_t fromPitch = srcDim * row, toPitch = dstDim * row;
  int unit = unitFor({reinterpret_cast<uint64_t>(from),
                      reinterpret_cast<uint64_t>(to), uint64_t(fromPitch),
                      uint64_t(toPitch), uint64_t(width)});
  int64_t units = width / unit, n = outer * units;
  switch (unit) {
  case 16:
    FSDPRT_LAUNCH(copyRowsKernel<16>, n, s, from, fromPitch, to, toPitch,
                  units, n);
    return;
  case 8:
    FSDPRT_LAUNCH(copyRowsKernel<8>, n, s, from, fromPitch, to, toPitch, units,
                  n);
    return;
  case 4:
    FSDPRT_LAUNCH(copyRowsKernel<4>, n, s, from, fromPitch, to, toPitch, units,
                  n);
    return;
  case 2:
    FSDPRT_LAUNCH(copyRowsKernel<2>, n, s, from, fromPitch, to, toPitch, units,
                  n);
    return;
  default:
    FSDPRT_LAUNCH(copyRowsKernel<1>, n, s, from, fromPitch, to, toPitch, units,
                  n);
  }
}

void copyStrided(Stream s, int64_t elemSize, const void *src, void *dst,
                 const StridedWindow &w, bool scatter) {
  int64_t n = w.outer * w.count * w.inner;
  if (n == 0)
    return;
  switch (elemSize) {
  case 2:
    FSDPRT_LAUNCH(copyStridedKernel<uint16_t>, n, s,
                  static_cast<const uint16_t *>(src),
                  static_cast<uint16_t *>(dst), w, scatter, n);
    return;
  case 4:
    FSDPRT_LAUNCH(copyStridedKernel<uint32_t>, n, s,
                  static_cast<const uint32_t *>(src),
                  static_cast<uint32_t *>(dst), w, scatter, n);
    return;
  default:
    FSDPRT_LAUNCH(copyStridedKernel<uint64_t>, n, s,
                  static_cast<const uint64_t *>(src),
                  static_cast<uint64_t *>(dst), w, scatter, n);
  }
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
