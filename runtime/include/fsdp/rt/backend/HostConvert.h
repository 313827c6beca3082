//===- HostConvert.h - Element conversion on the host -----------*- C++ -*-===//
//
// The one conversion between storage types that host code shares: the CPU
// backend's staging (backends/cpu/HostStaging.h, which splits it over threads) and the
// Gloo communicator's widening of 16-bit reductions. Each value is rounded
// once (fsdp/rt/math/Half.h), exactly as the device kernels round.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_HOSTCONVERT_H
#define FSDP_RT_HOSTCONVERT_H

#include "fsdp/rt/DType.h"

#include <cstdint>

namespace fsdp {
namespace rt {

/// dst[i] = src[i] converted, for i < n, on the calling thread: to an
/// integer type floats truncate toward zero and integers wrap, as torch's
/// casts; src == dst types copy (memmove).
void convertOnHost(DType srcType, const void *src, DType dstType, void *dst,
                   int64_t n);

} // namespace rt
} // namespace fsdp

#endif
