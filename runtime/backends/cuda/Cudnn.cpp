//===- Cudnn.cpp - Opening cuDNN and its handle ---------------------------===//
#include "Cudnn.h"
#include "Device.h"

#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <exception>

namespace cudnn_frontend {
// The frontend's dynamic loading resolves every cuDNN call through this.
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend

namespace fe = cudnn_frontend;

namespace fsdp {
namespace rt {
namespace cuda {

const std::string &openCudnn() {
  static const std::string why = [] {
    void *h = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (!h)
      return std::string("cannot open libcudnn.so.9: ") + dlerror();
    fe::cudnn_dlhandle = h;
    return std::string();
  }();
  return why;
}

cudnnHandle_t createCudnnHandle(cudaStream_t stream, std::string &why) {
  why = openCudnn();
  if (!why.empty())
    return nullptr;
  cudnnHandle_t handle = nullptr;
  try {
    cudnnStatus_t st = fe::detail::create_handle(&handle);
    if (st == CUDNN_STATUS_SUCCESS)
      st = fe::detail::set_stream(handle, stream);
    if (st != CUDNN_STATUS_SUCCESS)
      why = std::string("cudnnCreate or cudnnSetStream failed: ") +
            fe::detail::get_error_string(st);
  } catch (const std::exception &e) {
    why = e.what();
  }
  if (!why.empty() && handle) {
    destroyCudnnHandle(handle);
    handle = nullptr;
  }
  return handle;
}

void destroyCudnnHandle(cudnnHandle_t handle) {
  if (handle)
    fe::detail::destroy_handle(handle);
}

bool cudnnDeterministic() {
  static const bool deterministic = !envIs("FSDPRT_CUDNN_DETERMINISTIC", "0");
  return deterministic;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
