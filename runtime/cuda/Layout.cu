//===- Layout.cu - Transpose and concat / split slabs ---------------------===//
//
// Permutations (one thread per output element) and the strided slab copies
// of concat / split (cudaMemcpy2DAsync).
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

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
  // outer rows of size * inner elements: one strided 2-D copy.
  int64_t row = inner * elemSize, width = size * row;
  if (outer == 0 || width == 0)
    return;
  checkCuda(cudaMemcpy2DAsync(static_cast<char *>(dst) + dstOffset * row,
                              dstDim * row,
                              static_cast<const char *>(src) + srcOffset * row,
                              srcDim * row, width, outer,
                              cudaMemcpyDeviceToDevice, s),
            "cudaMemcpy2DAsync (concat / split slab)");
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
