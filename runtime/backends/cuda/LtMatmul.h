//===- LtMatmul.h - cuBLASLt GEMMs with bias epilogues ----------*- C++ -*-===//
//
// A linear layer's bias is added, and its gradient reduced, inside the GEMM
// by cuBLASLt's epilogues (CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_BGRADB),
// as PyTorch's addmm does, instead of a separate pass over the output; a
// tanh GELU after it, and its derivative in the backward, likewise
// (GELU_AUX_BIAS, DGELU: nn.linear_gelu, nn.linear_gelu_grad). The GEMM
// accumulates in f32 (TF32 inputs only where the backend allows them) and
// rounds the output once, the epilogue applied before that rounding.
//
// One LtMatmul per worker stream: descriptors and the algorithm cuBLASLt's
// heuristic picked are cached per shape, types and operand alignment.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_LTMATMUL_H
#define FSDP_RT_CUDA_LTMATMUL_H

#include "Device.h"

#include <cublasLt.h>

#include <array>
#include <map>
#include <memory>

namespace fsdp {
namespace rt {
namespace cuda {

/// Column-major D[m, n] = op(A) op(B) with one epilogue, A and B in type
/// `ab`, D (and the bias and aux) in `d`; ld* are the stored leading
/// dimensions in elements.
struct LtGemm {
  enum class Epilogue {
    Bias,          // D += bias[m] on every column, before rounding
    BiasGradientB, // bias[n] = sum over k of op(B), in f32, rounded once
    GeluAux,       // aux = D, D = gelu_tanh(D) (f32), each rounded once
    GeluAuxBias,   // D += bias[m], then as GeluAux
    DGelu,         // D *= gelu_tanh'(aux) (aux read), rounded once
  };
  Epilogue epilogue;
  cudaDataType_t ab, d;
  cublasComputeType_t compute; // f32 accumulation, TF32 inputs or not
  bool transA, transB;
  int64_t m, n, k;
  const void *a;
  int64_t lda;
  const void *b;
  int64_t ldb;
  void *out;
  int64_t ldd;
  void *bias;
  void *aux = nullptr; // the GELU's input [m, n]; ldAux % 8 == 0
  int64_t ldAux = 0;
};

class LtMatmul {
public:
  /// `workspace` (device memory, `workspaceBytes`) is used by every call on
  /// `stream`, one after another.
  LtMatmul(cudaStream_t stream, void *workspace, size_t workspaceBytes);
  ~LtMatmul();
  LtMatmul(const LtMatmul &) = delete;
  LtMatmul &operator=(const LtMatmul &) = delete;

  /// Queues g on the stream; false (nothing queued) when cuBLASLt has no
  /// algorithm for it, and the caller runs the plain GEMM and bias pass.
  bool run(const LtGemm &g);

private:
  struct Plan;
  using Key = std::array<int64_t, 18>; // the fields of LtGemm, alignments
  Plan *plan(const LtGemm &g);
  void launch(const LtGemm &g, const Plan &p, const cublasLtMatmulAlgo_t &algo);
  cublasLtMatmulAlgo_t
  fastest(const LtGemm &g, const Plan &p,
          const cublasLtMatmulHeuristicResult_t *candidates, int count);

  cudaStream_t stream_;
  void *workspace_;
  size_t workspaceBytes_;
  bool autotune_; // FSDPRT_GEMM_AUTOTUNE=1 (LtMatmul.cpp)
  cublasLtHandle_t handle_ = nullptr;
  std::map<Key, std::unique_ptr<Plan>> plans_; // null algorithm: none found
};

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_LTMATMUL_H
