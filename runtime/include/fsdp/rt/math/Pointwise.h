//===- Pointwise.h - Binary arithmetic bodies -------------------*- C++ -*-===//
#ifndef FSDP_RT_MATH_POINTWISE_H
#define FSDP_RT_MATH_POINTWISE_H

#include "fsdp/rt/fsdprt.h"
#include "fsdp/rt/math/Hd.h"

namespace fsdp {
namespace rt {

/// op is FSDPRT_ADD, FSDPRT_SUB, FSDPRT_MUL or FSDPRT_DIV.
FSDPRT_HD inline float binaryApply(int op, float a, float b) {
  switch (op) {
  case FSDPRT_ADD:
    return a + b;
  case FSDPRT_SUB:
    return a - b;
  case FSDPRT_MUL:
    return a * b;
  default:
    return a / b;
  }
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_POINTWISE_H
