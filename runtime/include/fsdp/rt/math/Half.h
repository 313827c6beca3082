//===- Half.h - bf16 / f16 <-> f32 conversions ------------------*- C++ -*-===//
//
// Storage types are 16-bit; compute is f32. Conversions to 16 bits round to
// nearest, ties to even, keep NaN a (quiet) NaN, overflow to +-Inf and produce
// subnormals where the format has them. They are written with integer bit
// manipulation (plus one exact float add for f16 subnormals) so that they do
// not depend on the host having F16C or AVX512-BF16 instructions.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_HALF_H
#define FSDP_RT_MATH_HALF_H

#include "fsdp/rt/math/Hd.h"

#include <cstdint>
#include <cstring>

namespace fsdp {
namespace rt {

FSDPRT_HD inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

FSDPRT_HD inline float bitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

FSDPRT_HD inline uint16_t floatToBf16(float f) {
  uint32_t u = floatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep the sign, force quiet.
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  // Adding 0x7fff plus the lowest kept bit rounds to nearest even; a carry
  // out of the mantissa correctly bumps the exponent (up to Inf).
  uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

FSDPRT_HD inline float bf16ToFloat(uint16_t h) {
  return bitsFloat(static_cast<uint32_t>(h) << 16);
}

FSDPRT_HD inline uint16_t floatToF16(float f) {
  uint32_t u = floatBits(f);
  uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint16_t out;
  if (u >= 0x47800000u) {
    // |f| >= 65536 (always rounds to Inf) or Inf/NaN.
    out = u > 0x7f800000u ? 0x7e00u : 0x7c00u;
  } else if (u < 0x38800000u) {
    // Result is subnormal or zero: adding 0.5 aligns the f16 subnormal ulp
    // (2^-24) with the f32 ulp of 0.5, so the FPU performs the RNE rounding.
    const float denormMagic = 0.5f;
    float r = bitsFloat(u) + denormMagic;
    out = static_cast<uint16_t>(floatBits(r) - floatBits(denormMagic));
  } else {
    uint32_t mantOdd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu + mantOdd;
    out = static_cast<uint16_t>(u >> 13); // carries may round up to Inf.
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

FSDPRT_HD inline float f16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = 0x7f800000u | (mant << 13); // Inf or NaN (payload kept).
  } else if (exp != 0) {
    u = ((exp + 127 - 15) << 23) | (mant << 13);
  } else {
    // Zero or subnormal: mant * 2^-24 is exact in f32.
    float f = static_cast<float>(mant) * 5.9604644775390625e-8f;
    u = floatBits(f);
  }
  return bitsFloat(u | sign);
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_HALF_H
