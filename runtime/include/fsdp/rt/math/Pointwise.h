//===- Pointwise.h - Binary arithmetic bodies -------------------*- C++ -*-===//
#ifndef FSDP_RT_MATH_POINTWISE_H
#define FSDP_RT_MATH_POINTWISE_H

#include "fsdp/rt/fsdprt.h"
#include "fsdp/rt/math/Hd.h"

namespace fsdp {
namespace rt {

/// op is one of the FSDPRT_ADD ... FSDPRT_NE codes (fsdprt.h):
/// maximum and minimum return a NaN operand, as torch's do; the weights
/// are torch's subgradients (derivatives.yaml: the gradient where a wins,
/// half of it where a == b).
FSDPRT_HD inline float binaryApply(int op, float a, float b) {
  switch (op) {
  case FSDPRT_ADD:
    return a + b;
  case FSDPRT_SUB:
    return a - b;
  case FSDPRT_MUL:
    return a * b;
  case FSDPRT_DIV:
    return a / b;
  case FSDPRT_MAX:
    return a != a ? a : b != b ? b : a > b ? a : b;
  case FSDPRT_MIN:
    return a != a ? a : b != b ? b : a < b ? a : b;
  case FSDPRT_MAX_WEIGHT:
    return a == b ? 0.5f : a < b ? 0.0f : 1.0f;
  case FSDPRT_MIN_WEIGHT:
    return a == b ? 0.5f : a > b ? 0.0f : 1.0f;
  case FSDPRT_KEEP:
    return b != 0.0f ? a : 0.0f;
  case FSDPRT_LT:
    return a < b ? 1.0f : 0.0f;
  case FSDPRT_LE:
    return a <= b ? 1.0f : 0.0f;
  case FSDPRT_GT:
    return a > b ? 1.0f : 0.0f;
  case FSDPRT_GE:
    return a >= b ? 1.0f : 0.0f;
  case FSDPRT_EQ:
    return a == b ? 1.0f : 0.0f;
  default: // FSDPRT_NE
    return a != b ? 1.0f : 0.0f;
  }
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_POINTWISE_H
