//===- Cudnn.h - Opening cuDNN, shared by its users -------------*- C++ -*-===//
//
// The cuDNN paths of the backend (FusedAttention.h, CudnnConv.h) go through
// the header-only cudnn-frontend, which resolves every cuDNN call through a
// dlopen'ed libcudnn.so.9: a build with cuDNN's headers still runs where
// cuDNN is absent. One library handle per process, one cudnnHandle_t per
// user and stream.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_CUDNN_H
#define FSDP_RT_CUDA_CUDNN_H

#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace fsdp {
namespace rt {
namespace cuda {

/// Opens libcudnn.so.9 once per process: "" on success, else why not.
const std::string &openCudnn();

/// Opens cuDNN and creates a handle bound to `stream`: null, with the
/// reason in `why`, where either fails (no library, no usable device).
cudnnHandle_t createCudnnHandle(cudaStream_t stream, std::string &why);
void destroyCudnnHandle(cudnnHandle_t handle); // statuses ignored (teardown)

/// cuDNN's deterministic algorithms (the same bits run to run), the
/// default; FSDPRT_CUDNN_DETERMINISTIC=0 allows the ones that add partial
/// sums atomically, as PyTorch's defaults do: less memory or time, results
/// that vary in their last bits.
bool cudnnDeterministic();

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_CUDNN_H
