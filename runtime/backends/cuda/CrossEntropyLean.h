//===- CrossEntropyLean.h - The opt-in lean cross-entropy rows ------------===//
//
// FSDPRT_XENT_KERNELS=lean selects CrossEntropyLean.cu's kernels for the
// cross-entropy rows (loss terms, gradient, both in one pass) in place of
// RowKernels.cu's, where they apply; docs/CUDA.md.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_CROSSENTROPYLEAN_H
#define FSDP_RT_CUDA_CROSSENTROPYLEAN_H

#include "Kernels.h"

namespace fsdp {
namespace rt {
namespace cuda {

/// RowKernels.cu's crossEntropyRowTermsAndGrad by the lean kernels (terms
/// or dlogits may be null, not both); false, with nothing queued, for rows
/// of 2^31 - 8 elements or more (32-bit indices).
bool leanCrossEntropyRows(Stream s, DType dt, bool i32, const void *logits,
                          const void *targets, const int64_t *count,
                          const float *dloss, double *terms, void *dlogits,
                          LogitRows rows, bool mean, int64_t ignoreIndex);

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif
