//===- Pointwise.h - Binary arithmetic bodies -------------------*- C++ -*-===//
#ifndef FSDP_RT_MATH_POINTWISE_H
#define FSDP_RT_MATH_POINTWISE_H

#include "fsdp/rt/fsdprt.h"
#include "fsdp/rt/math/Hd.h"

namespace fsdp {
namespace rt {

/// op is FSDPRT_ADD, FSDPRT_SUB or FSDPRT_MUL.
FSDPRT_HD inline float binaryApply(int op, float a, float b) {
  return op == FSDPRT_ADD ? a + b : op == FSDPRT_SUB ? a - b : a * b;
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_POINTWISE_H
