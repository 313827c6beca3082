//===- EmuRowKernels.cpp - The row kernels compiled for host emulation ----===//
//
// runtime/cuda/RowKernels.cu built as C++ against the emulation headers (see
// EmuBackend.cpp).
//
//===----------------------------------------------------------------------===//
#include "cuda/RowKernels.cu"
