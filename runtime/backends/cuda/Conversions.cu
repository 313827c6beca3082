//===- Conversions.cu - Conversions and fills -----------------------------===//
//
// Casts between any of the float and integer types (each value rounded once
// to a 16-bit destination; floats truncated toward zero to an integer one)
// and fills.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include "fsdp/rt/math/Half.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// An integer source (i32 or i64) to float storage D.
template <typename D>
__global__ void convertIntegersKernel(bool i32, const void *src,
                                      typename D::T *dst, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    dst[i] = D::store(static_cast<float>(loadIndex(i32, src, i)));
  }
}

/// Float storage S to integer type I, truncating toward zero.
template <typename S, typename I>
__global__ void floatToIntegerKernel(const typename S::T *src, I *dst,
                                     int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) { dst[i] = static_cast<I>(S::load(src[i])); }
}

/// An integer source (i32 or i64) to integer type I, wrapping.
template <typename I>
__global__ void integerToIntegerKernel(bool i32, const void *src, I *dst,
                                       int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    dst[i] = static_cast<I>(loadIndex(i32, src, i));
  }
}

/// To integer type I: floats truncate toward zero, integers wrap (torch's
/// casts).
template <typename I>
void toInteger(Stream s, DType srcType, const void *src, I *dst, int64_t n) {
  if (!isFloat(srcType)) {
    FSDPRT_LAUNCH(integerToIntegerKernel<I>, n, s, srcType == DType::I32, src,
                  dst, n);
    return;
  }
  withStorage(srcType, [&](auto from) {
    using S = decltype(from);
    FSDPRT_LAUNCH((floatToIntegerKernel<S, I>), n, s,
                  static_cast<const typename S::T *>(src), dst, n);
  });
}

/// A float cast as a mapKernel functor: the value, rounded by the store.
struct CastF {
  __device__ float operator()(float x, float) const { return x; }
};

template <typename T> __global__ void fillKernel(T *dst, T pattern, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) { dst[i] = pattern; }
}

template <typename T>
__global__ void addIntegerKernel(T *dst, T value, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) { dst[i] += value; }
}

} // namespace

void convert(Stream s, DType srcType, const void *src, DType dstType, void *dst,
             int64_t n) {
  if (srcType == dstType) {
    if (n > 0 && dst != src)
      checkCuda(cudaMemcpyAsync(dst, src, n * dtypeSize(srcType),
                                cudaMemcpyDeviceToDevice, s),
                "cudaMemcpyAsync (cast)");
    return;
  }
  if (dstType == DType::I32)
    return toInteger(s, srcType, src, static_cast<int32_t *>(dst), n);
  if (dstType == DType::I64)
    return toInteger(s, srcType, src, static_cast<int64_t *>(dst), n);
  if (isFloat(srcType))
    return withStorage(srcType, [&](auto from) {
      withStorage(dstType, [&](auto to) {
        launchMap<decltype(from), decltype(to)>(s, CastF{}, src, nullptr, dst,
                                                n);
      });
    });
  withStorage(dstType, [&](auto to) {
    using D = decltype(to);
    FSDPRT_LAUNCH(convertIntegersKernel<D>, n, s, srcType == DType::I32, src,
                  static_cast<typename D::T *>(dst), n);
  });
}

void fill(Stream s, DType dt, void *dst, int64_t n, double value) {
  switch (dt) {
  case DType::I32:
    FSDPRT_LAUNCH(fillKernel<int32_t>, n, s, static_cast<int32_t *>(dst),
                  static_cast<int32_t>(value), n);
    return;
  case DType::I64:
    FSDPRT_LAUNCH(fillKernel<int64_t>, n, s, static_cast<int64_t *>(dst),
                  static_cast<int64_t>(value), n);
    return;
  case DType::F32:
    FSDPRT_LAUNCH(fillKernel<float>, n, s, static_cast<float *>(dst),
                  static_cast<float>(value), n);
    return;
  case DType::BF16:
    FSDPRT_LAUNCH(fillKernel<uint16_t>, n, s, static_cast<uint16_t *>(dst),
                  floatToBf16(static_cast<float>(value)), n);
    return;
  case DType::F16:
    FSDPRT_LAUNCH(fillKernel<uint16_t>, n, s, static_cast<uint16_t *>(dst),
                  floatToF16(static_cast<float>(value)), n);
    return;
  }
}

void addInteger(Stream s, DType dt, void *dst, int64_t n, int64_t value) {
  if (dt == DType::I32)
    FSDPRT_LAUNCH(addIntegerKernel<int32_t>, n, s, static_cast<int32_t *>(dst),
                  static_cast<int32_t>(value), n);
  else
    FSDPRT_LAUNCH(addIntegerKernel<int64_t>, n, s, static_cast<int64_t *>(dst),
                  value, n);
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
