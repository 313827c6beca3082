//===- FusedAttention.h - Attention through cuDNN's fused SDPA --*- C++ -*-===//
//
// Attention forward and backward through cuDNN's fused flash attention
// (cudnn-frontend SDPA graphs), the kernels PyTorch's SDPA dispatches to on
// Hopper, for bf16 / f16 operands in the runtime's [batch, seq, heads,
// headDim] layout: causal masks top-left aligned (key j <= query i, as on
// the CPU), grouped-query heads, the backward in cuDNN's deterministic mode.
//
// cuDNN is opened at run time (dlopen of libcudnn.so.9 through the
// frontend's dynamic loading), so a build with cuDNN's headers still runs
// where cuDNN is absent: create() then says why and the backend keeps its
// cuBLAS attention. Graphs are built once per shape and cached.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_FUSEDATTENTION_H
#define FSDP_RT_CUDA_FUSEDATTENTION_H

#include "fsdp/rt/backend/Backend.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace fsdp {
namespace rt {
namespace cuda {

class FusedAttention {
public:
  /// One per CUDA worker stream (a cuDNN handle is bound to one stream);
  /// null, with the reason in `why`, when cuDNN cannot be loaded.
  static std::unique_ptr<FusedAttention> create(cudaStream_t stream,
                                                std::string &why);
  ~FusedAttention();

  /// Queue the forward (out = attention(q, k, v)) on the stream. False,
  /// with the reason in `why` and nothing queued, when cuDNN has no engine
  /// for this dtype and these dimensions.
  /// With stats (not null), the forward also writes its softmax
  /// statistics (cuDNN's Stats, f32 [batch, heads, tq]: each row's
  /// log-sum-exp).
  bool forward(DType dt, const void *q, const void *k, const void *v,
               void *out, float *stats, const AttentionDims &d,
               std::string &why);
  /// Queue the backward: dq, dk, dv (any may be null) from the forward's
  /// out and stats, or (both null) after running the forward again for
  /// them. False as for forward.
  bool backward(DType dt, const void *q, const void *k, const void *v,
                const void *dout, const void *out, const float *stats,
                void *dq, void *dk, void *dv, const AttentionDims &d,
                std::string &why);

  struct Impl;

private:
  explicit FusedAttention(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif
