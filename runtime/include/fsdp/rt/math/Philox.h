//===- Philox.h - Counter-based RNG (Philox4x32-10) -------------*- C++ -*-===//
//
// Dropout masks and random initialisation must not depend on how work is split
// across threads, streams or ranks, so every random number is a pure function
// of (seed, step, rng id, element index): Philox4x32-10 (Salmon et al., SC'11,
// the generator behind cuRAND and PyTorch's CUDA RNG) with
//   key     = (seed low 32 bits, seed high 32 bits)
//   counter = (block low, block high, step, rng id), block = index / 4,
// and lane index % 4 of the 128-bit output used for element `index`.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_PHILOX_H
#define FSDP_RT_MATH_PHILOX_H

#include "fsdp/rt/math/Hd.h"

#include <cmath>

#include <cstdint>

namespace fsdp {
namespace rt {

struct Philox4x32 {
  uint32_t v[4];
};

FSDPRT_HD inline Philox4x32 philox4x32_10(Philox4x32 ctr, uint32_t k0,
                                          uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * ctr.v[0];
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * ctr.v[2];
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32),
             lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32),
             lo1 = static_cast<uint32_t>(p1);
    ctr = Philox4x32{{hi1 ^ ctr.v[1] ^ k0, lo1, hi0 ^ ctr.v[3] ^ k1, lo0}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return ctr;
}

/// The 128 random bits that cover elements [4*block, 4*block+4).
FSDPRT_HD inline Philox4x32 philoxBlock(uint64_t seed, uint64_t step,
                                        uint64_t rngId, uint64_t block) {
  Philox4x32 ctr{{static_cast<uint32_t>(block),
                  static_cast<uint32_t>(block >> 32),
                  static_cast<uint32_t>(step), static_cast<uint32_t>(rngId)}};
  return philox4x32_10(ctr, static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(seed >> 32));
}

/// Uniform in [0, 1) with 24 random bits, exactly representable in f32.
FSDPRT_HD inline float uniformFromBits(uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

/// The four samples of one Philox block: uniform in [a, b), or normal with
/// mean a and standard deviation b by Box-Muller on lanes (0,1) and (2,3)
/// (u1 in (0, 1] avoids log(0)).
FSDPRT_HD inline void philoxSamples(const Philox4x32 &r, bool uniform, float a,
                                    float b, float out[4]) {
  if (uniform) {
    for (int l = 0; l < 4; ++l)
      out[l] = a + (b - a) * uniformFromBits(r.v[l]);
    return;
  }
  for (int pair = 0; pair < 2; ++pair) {
    float u1 = 1.0f - uniformFromBits(r.v[2 * pair]);
    float u2 = uniformFromBits(r.v[2 * pair + 1]);
    float radius = std::sqrt(-2.0f * std::log(u1));
    float angle = 6.28318530717958647692f * u2;
    out[2 * pair] = a + b * radius * std::cos(angle);
    out[2 * pair + 1] = a + b * radius * std::sin(angle);
  }
}

/// The uniform number assigned to element `index`.
FSDPRT_HD inline float philoxUniform(uint64_t seed, uint64_t step,
                                     uint64_t rngId, uint64_t index) {
  Philox4x32 r = philoxBlock(seed, step, rngId, index / 4);
  return uniformFromBits(r.v[index % 4]);
}

/// Dropout keeps an element when its uniform number is >= p, and scales it
/// by 1/(1-p); p == 0 keeps everything, p == 1 drops everything.
FSDPRT_HD inline float dropoutFactor(float u, float p) {
  if (p >= 1.0f)
    return 0.0f;
  return u >= p ? 1.0f / (1.0f - p) : 0.0f;
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_PHILOX_H
