//===- BlasAttention.h - Attention head by head on cuBLAS -------*- C++ -*-===//
//
// The CUDA backend's attention where cuDNN's fused attention does not serve
// (FusedAttention.h): f32 operands, a bias, a build or a machine without
// cuDNN. Each head's GEMMs are batched over the batch (cuBLAS strided
// batches, Gemm.h) and its softmax runs one block per row; the query heads
// of a group accumulate into the group's dK/dV in head order, as on the
// CPU, so the result is deterministic.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_BLASATTENTION_H
#define FSDP_RT_CUDA_BLASATTENTION_H

#include "Worker.h"

#include "fsdp/rt/backend/Backend.h"

namespace fsdp {
namespace rt {
namespace cuda {

/// Backend::attentionForward on e's stream; slices of a packed projection
/// (d not contiguous) run on contiguous copies.
void blasAttentionForward(Exec &e, DType dt, const void *q, const void *k,
                          const void *v, const void *bias, void *out,
                          float *stats, const AttentionDims &d);
/// Backend::attentionBackward on e's stream, from the forward's statistics
/// (or, without them, making them again); slices as in the forward.
void blasAttentionBackward(Exec &e, DType dt, const void *q, const void *k,
                           const void *v, const void *bias, const void *dout,
                           const float *stats, void *dq, void *dk, void *dv,
                           void *dbias, const AttentionDims &d);

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_BLASATTENTION_H
