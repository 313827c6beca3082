//===- Pointwise.h - Binary arithmetic bodies -------------------*- C++ -*-===//
//
// Float codes in f32 (binaryApply); add, sub and mul of i32 / i64 tensors
// in int64 (integerBinaryApply).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_POINTWISE_H
#define FSDP_RT_MATH_POINTWISE_H

#include "fsdp/rt/fsdprt.h"
#include "fsdp/rt/math/Hd.h"

#include <cmath>

namespace fsdp {
namespace rt {

/// op is one of the FSDPRT_ADD ... FSDPRT_NE codes or FSDPRT_FMOD (fsdprt.h):
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
  case FSDPRT_FMOD:
    return std::fmod(a, b);
  default: // FSDPRT_NE
    return a != b ? 1.0f : 0.0f;
  }
}

/// FSDPRT_ADD, FSDPRT_SUB or FSDPRT_MUL of integers (the only codes the C
/// API takes for them) in int64, wrapping as torch's integer ops do; the
/// caller narrows the result to the storage type.
FSDPRT_HD inline int64_t integerBinaryApply(int op, int64_t a, int64_t b) {
  uint64_t x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);
  switch (op) {
  case FSDPRT_ADD:
    return static_cast<int64_t>(x + y);
  case FSDPRT_SUB:
    return static_cast<int64_t>(x - y);
  case FSDPRT_FLOOR_DIV: {
    if (b == 0 || (a == INT64_MIN && b == -1))
      return b == 0 ? 0 : a; // torch raises on 0; -min wraps
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
  }
  default: // FSDPRT_MUL
    return static_cast<int64_t>(x * y);
  }
}

/// An integer storage type for the binary loops: integerBinaryApply's
/// operands and result.
template <typename I> struct IntegerStorage {
  using T = I;
  FSDPRT_HD static int64_t load(T v) { return v; }
  FSDPRT_HD static T store(int64_t v) { return static_cast<T>(v); }
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_POINTWISE_H
