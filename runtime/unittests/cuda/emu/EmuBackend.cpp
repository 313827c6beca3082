//===- EmuBackend.cpp - The CUDA backend compiled for host emulation ------===//
//
// runtime/cuda/CudaBackend.cu built as C++ against the emulation headers of
// this directory (cuda_runtime.h, cublas_v2.h), with namespace cuda renamed
// cudaemu (so nothing clashes with the real backend in libfsdp_runtime) and
// registered as "cuda_emu". See cuda_runtime.h for what this checks.
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaBackend.cu"
