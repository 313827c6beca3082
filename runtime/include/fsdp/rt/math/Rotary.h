//===- Rotary.h - Rotary embedding bodies -----------------------*- C++ -*-===//
#ifndef FSDP_RT_MATH_ROTARY_H
#define FSDP_RT_MATH_ROTARY_H

#include "fsdp/rt/math/Hd.h"

#include <cmath>
#include <cstdint>

namespace fsdp {
namespace rt {

/// cos and sin of position t times the pair-i frequency theta^(-2i/D). The
/// angle is formed in double: at long contexts t * freq loses most of its
/// f32 mantissa otherwise; the results are rounded once to f32.
FSDPRT_HD inline void rotaryAngle(int64_t t, int64_t i, int64_t headDim,
                                  double theta, float &c, float &s) {
  double freq = std::pow(theta, -2.0 * static_cast<double>(i) /
                                    static_cast<double>(headDim));
  double angle = static_cast<double>(t) * freq;
  c = static_cast<float>(std::cos(angle));
  s = static_cast<float>(std::sin(angle));
}

/// (y0, y1) = (x0 c - x1 s, x0 s + x1 c). y may alias x.
FSDPRT_HD inline void rotatePair(float x0, float x1, float c, float s,
                                 float &y0, float &y1) {
  float r0 = x0 * c - x1 * s;
  float r1 = x0 * s + x1 * c;
  y0 = r0;
  y1 = r1;
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_ROTARY_H
