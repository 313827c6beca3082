//===- CudaBackend.h - The CUDA backend -------------------------*- C++ -*-===//
#ifndef FSDP_RT_CUDA_CUDABACKEND_H
#define FSDP_RT_CUDA_CUDABACKEND_H

#include "fsdp/rt/backend/Backend.h"

#include <memory>

namespace fsdp {
namespace rt {
namespace cuda {

/// Throws Error(Unsupported) with the reason (no driver, no device) when no
/// CUDA device is usable. numThreads is ignored. The device is the launch
/// environment's local rank modulo the device count (as the NCCL
/// communicator picks it).
std::unique_ptr<Backend> createCudaBackend(int numThreads);

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_CUDABACKEND_H
