//===- Unary.h - Pointwise math bodies and derivatives ----------*- C++ -*-===//
//
// y = f(x; a, b) and dx = dy * f'(x; a, b) for the FSDPRT_UNARY_* kinds, as
// PyTorch defines them (derivatives of its derivatives.yaml):
//   tanh     1 - y^2                 sigmoid  y (1 - y)
//   exp      exp(x)                  log      1 / x
//   sqrt     1 / (2 y)               rsqrt    -y^3 / 2
//   abs      sign(x) (0 at 0)        pow a    a x^(a-1) (0 when a = 0)
//   clamp    1 where a <= x <= b, else 0 (a, b the bounds; ±inf for none)
//   erf      2 / sqrt(pi) exp(-x^2)
//   sin      cos(x)                  cos      -sin(x)
//   acos     -1 / sqrt(1 - x^2)      asin     1 / sqrt(1 - x^2)
//   atan     1 / (1 + x^2)
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_UNARY_H
#define FSDP_RT_MATH_UNARY_H

#include "fsdp/rt/fsdprt.h"
#include "fsdp/rt/math/Hd.h"

#include <cmath>

namespace fsdp {
namespace rt {

FSDPRT_HD inline float unaryForward(int kind, float x, float a, float b) {
  switch (kind) {
  case FSDPRT_UNARY_TANH:
    return std::tanh(x);
  case FSDPRT_UNARY_SIGMOID:
    return 1.0f / (1.0f + std::exp(-x));
  case FSDPRT_UNARY_EXP:
    return std::exp(x);
  case FSDPRT_UNARY_LOG:
    return std::log(x);
  case FSDPRT_UNARY_SQRT:
    return std::sqrt(x);
  case FSDPRT_UNARY_RSQRT:
    return 1.0f / std::sqrt(x);
  case FSDPRT_UNARY_ABS:
    return std::fabs(x);
  case FSDPRT_UNARY_POW:
    return a == 2.0f ? x * x : std::pow(x, a);
  case FSDPRT_UNARY_ERF:
    return std::erf(x);
  case FSDPRT_UNARY_SIN:
    return std::sin(x);
  case FSDPRT_UNARY_COS:
    return std::cos(x);
  case FSDPRT_UNARY_ACOS:
    return std::acos(x);
  case FSDPRT_UNARY_ASIN:
    return std::asin(x);
  case FSDPRT_UNARY_ATAN:
    return std::atan(x);
  default: // FSDPRT_UNARY_CLAMP
    return x < a ? a : (x > b ? b : x);
  }
}

FSDPRT_HD inline float unaryBackward(int kind, float x, float dy, float a,
                                     float b) {
  switch (kind) {
  case FSDPRT_UNARY_TANH: {
    float y = std::tanh(x);
    return dy * (1.0f - y * y);
  }
  case FSDPRT_UNARY_SIGMOID: {
    float y = 1.0f / (1.0f + std::exp(-x));
    return dy * y * (1.0f - y);
  }
  case FSDPRT_UNARY_EXP:
    return dy * std::exp(x);
  case FSDPRT_UNARY_LOG:
    return dy / x;
  case FSDPRT_UNARY_SQRT:
    return dy / (2.0f * std::sqrt(x));
  case FSDPRT_UNARY_RSQRT: {
    float y = 1.0f / std::sqrt(x);
    return -0.5f * dy * y * y * y;
  }
  case FSDPRT_UNARY_ABS:
    return x > 0.0f ? dy : (x < 0.0f ? -dy : 0.0f);
  case FSDPRT_UNARY_POW:
    if (a == 0.0f)
      return 0.0f;
    return dy * a * (a == 2.0f ? x : std::pow(x, a - 1.0f));
  case FSDPRT_UNARY_ERF:
    return dy * 1.12837916709551257f * std::exp(-x * x); // 2 / sqrt(pi)
  case FSDPRT_UNARY_SIN:
    return dy * std::cos(x);
  case FSDPRT_UNARY_COS:
    return -dy * std::sin(x);
  case FSDPRT_UNARY_ACOS: // NaN past ±1, as torch's
    return -dy / std::sqrt(1.0f - x * x);
  case FSDPRT_UNARY_ASIN:
    return dy / std::sqrt(1.0f - x * x);
  case FSDPRT_UNARY_ATAN:
    return dy / (1.0f + x * x);
  default: // FSDPRT_UNARY_CLAMP
    return x >= a && x <= b ? dy : 0.0f;
  }
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_UNARY_H
