//===- Conversions.cu - Conversions and fills -----------------------------===//
//
// Casts between the float and integer storage types (each value rounded once
// to a 16-bit destination) and fills.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include "fsdp/rt/math/Half.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

__device__ inline float loadAsFloat(int srcType, const void *p, int64_t i) {
  switch (srcType) {
  case FSDPRT_F32:
    return static_cast<const float *>(p)[i];
  case FSDPRT_BF16:
    return bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case FSDPRT_F16:
    return f16ToFloat(static_cast<const uint16_t *>(p)[i]);
  case FSDPRT_I32:
    return static_cast<float>(static_cast<const int32_t *>(p)[i]);
  default:
    return static_cast<float>(static_cast<const int64_t *>(p)[i]);
  }
}

__global__ void convertKernel(int srcType, const void *src, int dstType,
                              void *dst, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    float v = loadAsFloat(srcType, src, i);
    if (dstType == FSDPRT_F32)
      static_cast<float *>(dst)[i] = v;
    else if (dstType == FSDPRT_BF16)
      static_cast<uint16_t *>(dst)[i] = floatToBf16(v);
    else
      static_cast<uint16_t *>(dst)[i] = floatToF16(v);
  }
}

/// Float-to-float casts eight items at a time in 16-byte packs (two f32
/// packs, one 16-bit pack), the tail item by item from groups * 8: the
/// same conversions as convertKernel.
template <typename Src, typename Dst>
__global__ void castPacksKernel(const typename Src::T *src,
                                typename Dst::T *dst, int64_t n,
                                int64_t groups) {
  using TS = typename Src::T;
  using TD = typename Dst::T;
  constexpr int kItems = 8, kSrc = Pack<TS>::kCount, kDst = Pack<TD>::kCount;
  FSDPRT_GRID_STRIDE(g, groups) {
    Pack<TS> in[kItems / kSrc];
    Pack<TD> out[kItems / kDst];
#pragma unroll
    for (int p = 0; p < kItems / kSrc; ++p)
      in[p] = loadPack(src, g * (kItems / kSrc) + p);
#pragma unroll
    for (int u = 0; u < kItems; ++u)
      out[u / kDst].v[u % kDst] = Dst::store(Src::load(in[u / kSrc].v[u % kSrc]));
#pragma unroll
    for (int p = 0; p < kItems / kDst; ++p)
      storePack(dst, g * (kItems / kDst) + p, out[p]);
  }
  int64_t done = groups * kItems;
  FSDPRT_GRID_STRIDE(i, n - done) {
    dst[done + i] = Dst::store(Src::load(src[done + i]));
  }
}

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
  if (!isFloat(dstType))
    fail(Status::InvalidArgument, "cannot convert ", dtypeName(srcType),
         " to integer type ", dtypeName(dstType));
  if (isFloat(srcType) && packAligned(src) && packAligned(dst) && n >= 8)
    return withStorage(srcType, [&](auto from) {
      withStorage(dstType, [&](auto to) {
        using S = decltype(from);
        using D = decltype(to);
        FSDPRT_LAUNCH((castPacksKernel<S, D>), n / 8, s,
                      static_cast<const typename S::T *>(src),
                      static_cast<typename D::T *>(dst), n, n / 8);
      });
    });
  FSDPRT_LAUNCH(convertKernel, n, s, static_cast<int>(srcType), src,
                static_cast<int>(dstType), dst, n);
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
