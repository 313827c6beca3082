//===- EmuKernels.cpp - The CUDA kernels compiled for host emulation ------===//
//
// runtime/cuda/Kernels.cu built as C++ against the emulation headers (see
// EmuBackend.cpp).
//
//===----------------------------------------------------------------------===//
#include "cuda/Kernels.cu"
