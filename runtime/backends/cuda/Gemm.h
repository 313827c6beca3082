//===- Gemm.h - cuBLAS GEMMs of the CUDA backend ----------------*- C++ -*-===//
//
// The one GEMM entry of the backend's adapters and of its cuBLAS attention:
// row-major calls mapped onto column-major cuBLAS, with operands padded where
// cuBLAS's fast kernels need it and the compute type the backend allows. The
// handles it runs on belong to the calling worker thread (Worker.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_GEMM_H
#define FSDP_RT_CUDA_GEMM_H

#include "Device.h"
#include "LtMatmul.h"

#include <cstddef>
#include <cstdint>
#include <memory>

namespace fsdp {
namespace rt {
namespace cuda {

struct Exec;

/// The GEMM workspace of each worker stream, shared by cuBLAS and cuBLASLt
/// (one call at a time on the stream); 32 MiB as PyTorch uses on Hopper.
#ifdef FSDPRT_CUDA_EMULATION
constexpr size_t kGemmWorkspaceBytes = 4096;
#else
constexpr size_t kGemmWorkspaceBytes = size_t(32) << 20;
#endif

/// A worker thread's cuBLAS handle, its GEMM workspace (shared with
/// cuBLASLt) and cuBLASLt's cache, made at the thread's first GEMM
/// (Exec::blas, Gemm.cpp): only the threads that run GEMMs (the compute
/// stream's) hold a workspace, where every worker thread (the collectives'
/// too) held 32 MiB.
struct GemmHandles {
  cublasHandle_t blas = nullptr;
  void *workspace = nullptr;
  std::unique_ptr<LtMatmul> lt;
};

/// The cuBLAS type of a GEMM operand stored as `dt` (f32, bf16 or f16).
cudaDataType_t cudaType(DType dt);
/// f32 accumulation; TF32 inputs for f32 operands where the backend allows.
cublasComputeType_t computeType(const Exec &e, DType dt);

/// FSDPRT_CUDA_PAD_GEMM_FLOPS, or the default threshold of padsGemm (read
/// once per backend).
double padGemmFlops();
/// Whether gemm() runs a GEMM of these dimensions on zero-padded copies.
bool padsGemm(const Exec &e, DType dt, DType ct, int64_t m, int64_t n,
              int64_t k, int64_t lda, int64_t ldb, int64_t ldc);

/// Row-major C[batch][m, n] = alpha * op(A) op(B) + beta * C with A and B
/// in storage type `dt` and C in `ct` (f32 or dt: a 16-bit C is rounded
/// once from the f32 accumulation); strides are in elements. Queued on
/// e's stream.
void gemm(const Exec &e, DType dt, bool transA, bool transB, int64_t m,
          int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
          int64_t strideA, const void *b, int64_t ldb, int64_t strideB,
          float beta, void *c, DType ct, int64_t ldc, int64_t strideC,
          int64_t batch = 1);

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_GEMM_H
