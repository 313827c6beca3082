//===- Activation.h - Pointwise activation bodies and derivatives -*- C++
//-*-===//
//
// Forward and derivative of each activation, as PyTorch defines them:
//   relu(x)      = max(x, 0),             relu'(0) = 0
//   gelu(x)      = x * Phi(x),            Phi = standard normal CDF (erf form)
//   gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   silu(x)      = x * sigmoid(x)
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_ACTIVATION_H
#define FSDP_RT_MATH_ACTIVATION_H

#include "fsdp/rt/math/Hd.h"

#include <cmath>

namespace fsdp {
namespace rt {

FSDPRT_HD inline float reluForward(float x) { return x > 0.0f ? x : 0.0f; }
FSDPRT_HD inline float reluBackward(float x, float dy) {
  return x > 0.0f ? dy : 0.0f;
}

constexpr float kSqrt1_2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kGeluTanhCoeff = 0.044715f;

FSDPRT_HD inline float geluForward(float x) {
  return 0.5f * x * (1.0f + std::erf(x * kSqrt1_2));
}
FSDPRT_HD inline float geluBackward(float x, float dy) {
  float cdf = 0.5f * (1.0f + std::erf(x * kSqrt1_2));
  float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
  return dy * (cdf + x * pdf);
}

FSDPRT_HD inline float geluTanhForward(float x) {
  float inner = kSqrt2OverPi * (x + kGeluTanhCoeff * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
}
FSDPRT_HD inline float geluTanhBackward(float x, float dy) {
  float inner = kSqrt2OverPi * (x + kGeluTanhCoeff * x * x * x);
  float t = std::tanh(inner);
  float dInner = kSqrt2OverPi * (1.0f + 3.0f * kGeluTanhCoeff * x * x);
  return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dInner);
}

FSDPRT_HD inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
FSDPRT_HD inline float siluForward(float x) { return x * sigmoid(x); }
FSDPRT_HD inline float siluBackward(float x, float dy) {
  float s = sigmoid(x);
  return dy * s * (1.0f + x * (1.0f - s));
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_ACTIVATION_H
