//===- CudnnConv.h - Convolutions through cuDNN's graphs --------*- C++ -*-===//
//
// The three convolutions of the runtime's conv op (forward, input gradient,
// weight gradient) through cudnn-frontend's conv_fprop / conv_dgrad /
// conv_wgrad graphs, the kernels PyTorch's convolutions run on, on the
// runtime's NCHW storage (CudnnConvShape.h), every stride, padding,
// dilation and group count, in f32, bf16 and f16 with f32 accumulation.
// The bias is not part of the graph: the caller adds it, as PyTorch does.
//
// Precision, as the backend's GEMMs (Gemm.cpp): f32 convolutions do not
// round their inputs to TF32 unless FSDPRT_CUDA_TF32=1 (PyTorch's
// default for cuDNN convolutions is TF32, torch.backends.cudnn.allow_tf32;
// ours is one switch for GEMMs and convolutions alike, off by default);
// like PyTorch, engines that down-convert inputs are never used, and
// non-deterministic ones only with FSDPRT_CUDNN_DETERMINISTIC=0 (Cudnn.h).
//
// One per CUDA worker stream, made at its first convolution; null, with
// the reason, where cuDNN cannot be loaded. Graphs are built once per
// (kind, dtype, geometry) and cached; their workspace is call scratch
// (Device.h), a piece of the stream's reserve (ScratchReserve.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_CUDNNCONV_H
#define FSDP_RT_CUDA_CUDNNCONV_H

#include "fsdp/rt/DType.h"
#include "fsdp/rt/math/Conv.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace fsdp {
namespace rt {
namespace cuda {

class CudnnConv {
public:
  /// `tf32`: f32 convolutions may round their inputs to TF32.
  static std::unique_ptr<CudnnConv> create(cudaStream_t stream, bool tf32,
                                           std::string &why);
  ~CudnnConv();

  /// Each queues its convolution on the stream (y without bias); false,
  /// with the reason in `why` and nothing queued, where cuDNN has no
  /// engine for this dtype and geometry.
  bool forward(DType dt, const void *x, const void *w, void *y,
               const ConvGeometry &g, std::string &why);
  bool backwardInput(DType dt, const void *dy, const void *w, void *dx,
                     const ConvGeometry &g, std::string &why);
  bool backwardWeight(DType dt, const void *dy, const void *x, void *dw,
                      const ConvGeometry &g, std::string &why);

  struct Impl;

private:
  explicit CudnnConv(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_CUDNNCONV_H
