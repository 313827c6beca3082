//===- HalfPairs.cuh - bf16 / f16 pairs by the hardware's conversions ----===//
//
// The lean row kernels (LeanNorms.cu, CrossEntropyLean.cu) convert 16-bit
// elements two at a time, a pair in a 32-bit word (the first element in the
// low half), by the hardware (cvt.rn.bf16x2.f32 / cvt.rn.f16x2.f32 and the
// widening moves): the same bits as Half.h's software rounding for every
// non-NaN value (subnormals kept, overflow to Inf); a NaN rounded becomes
// the canonical NaN 0x7fff, as cuda_bf16.hpp's and cuda_fp16.hpp's host
// conversions also give it. The host emulation computes the hardware's
// result. Half.h stays the default kernels' conversion.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_HALFPAIRS_CUH
#define FSDP_RT_CUDA_HALFPAIRS_CUH

#include "KernelSupport.cuh"

#ifndef FSDPRT_CUDA_EMULATION
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

#include <cstdint>
#include <cstring>

namespace fsdp {
namespace rt {
namespace cuda {

/// A storage type's hardware conversions: widen a 32-bit word of two
/// 16-bit elements (the first in the low half), round two floats into one,
/// max of two pairs; one element each way for a partial group.
template <typename S> struct Hw;

template <> struct Hw<F32Storage> {
  __device__ static float one(float x) { return x; }
  __device__ static float narrowOne(float x) { return x; }
};

#ifdef FSDPRT_CUDA_EMULATION
/// The hardware's rounding: Half.h's for every non-NaN, canonical NaN.
inline uint16_t emuRound(uint16_t bits, float f) {
  return f != f ? uint16_t(0x7fff) : bits;
}
template <typename S> struct Hw16 {
  static float one(uint16_t h) { return S::load(h); }
  static uint16_t narrowOne(float f) { return emuRound(S::store(f), f); }
  static void widen(uint32_t w, float &lo, float &hi) {
    lo = one(static_cast<uint16_t>(w));
    hi = one(static_cast<uint16_t>(w >> 16));
  }
  static uint32_t narrow(float lo, float hi) {
    return narrowOne(lo) | static_cast<uint32_t>(narrowOne(hi)) << 16;
  }
  /// Each half's max as __hmax2 (a NaN loses to a number; the values are
  /// the elements', so widening and rounding back is exact).
  static uint32_t max2(uint32_t a, uint32_t b) {
    float alo, ahi, blo, bhi;
    widen(a, alo, ahi);
    widen(b, blo, bhi);
    return narrow(fmaxf(alo, blo), fmaxf(ahi, bhi));
  }
};
template <> struct Hw<Bf16Storage> : Hw16<Bf16Storage> {
  static constexpr uint32_t kMinusInf2 = 0xff80ff80u;
};
template <> struct Hw<F16Storage> : Hw16<F16Storage> {
  static constexpr uint32_t kMinusInf2 = 0xfc00fc00u;
};
#else
template <typename P, typename E> struct Hw16 {
  static __device__ P pair(uint32_t w) {
    P p;
    std::memcpy(&p, &w, 4);
    return p;
  }
  static __device__ uint32_t word(P p) {
    uint32_t w;
    std::memcpy(&w, &p, 4);
    return w;
  }
  static __device__ uint32_t max2(uint32_t a, uint32_t b) {
    return word(__hmax2(pair(a), pair(b)));
  }
};
template <>
struct Hw<Bf16Storage> : Hw16<__nv_bfloat162, __nv_bfloat16> {
  static constexpr uint32_t kMinusInf2 = 0xff80ff80u;
  static __device__ float one(uint16_t h) {
    return __bfloat162float(__ushort_as_bfloat16(h));
  }
  static __device__ uint16_t narrowOne(float f) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
  }
  /// What __bfloat1622float2 computes (a bf16 is the top half of its
  /// f32), in two instructions where its PRMT + shift took three.
  static __device__ void widen(uint32_t w, float &lo, float &hi) {
    lo = __uint_as_float(w << 16);
    hi = __uint_as_float(w & 0xffff0000u);
  }
  static __device__ uint32_t narrow(float lo, float hi) {
    return word(__floats2bfloat162_rn(lo, hi));
  }
};
template <> struct Hw<F16Storage> : Hw16<__half2, __half> {
  static constexpr uint32_t kMinusInf2 = 0xfc00fc00u;
  static __device__ float one(uint16_t h) {
    return __half2float(__ushort_as_half(h));
  }
  static __device__ uint16_t narrowOne(float f) {
    return __half_as_ushort(__float2half_rn(f));
  }
  static __device__ void widen(uint32_t w, float &lo, float &hi) {
    float2 f = __half22float2(pair(w));
    lo = f.x;
    hi = f.y;
  }
  static __device__ uint32_t narrow(float lo, float hi) {
    return word(__floats2half2_rn(lo, hi));
  }
};
#endif

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_HALFPAIRS_CUH
