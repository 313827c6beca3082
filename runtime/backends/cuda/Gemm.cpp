//===- Gemm.cpp - cuBLAS GEMMs of the CUDA backend ------------------------===//
//
// GEMMs run through cublasGemmEx / cublasGemmStridedBatchedEx (linear
// layers with a bias through cuBLASLt's bias epilogues, LtMatmul.h) with
// f32/bf16/f16 operands in their storage type, an f32 result and
// CUBLAS_COMPUTE_32F (f32 accumulation, no TF32, as PyTorch's default;
// FSDPRT_CUDA_TF32=1 lets f32 GEMMs round their inputs to TF32, as
// torch.backends.cuda.matmul.allow_tf32); 16-bit results are rounded once
// from the f32 result, as the CPU backend does. Host code only: it queues
// cuBLAS calls and copies, and launches no kernel of its own.
//
//===----------------------------------------------------------------------===//
#include "Gemm.h"
#include "Worker.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <utility>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

int blasInt(int64_t v, const char *what) {
  if (v > INT_MAX)
    fail(Status::Unsupported, "cuda backend: GEMM ", what, " = ", v,
         " exceeds cuBLAS's 32-bit limit");
  return static_cast<int>(v);
}

/// Whether a leading dimension of `ld` elements of `t` breaks the 16-byte
/// alignment cuBLAS's fastest (TMA) kernels need.
bool misaligned(int64_t ld, DType t) { return ld * dtypeSize(t) % 16 != 0; }

int64_t roundUp8(int64_t v) { return (v + 7) / 8 * 8; }

/// The row-major [rows, cols] matrix at p (leading dimension ld) as a
/// zero-padded [padRows, padCols] matrix: p itself when nothing changes,
/// else a copy in `copy`.
const void *zeroPadded(cudaStream_t s, const void *p, int64_t rows,
                       int64_t cols, int64_t &ld, int64_t padRows,
                       int64_t padCols, DType t, Scratch &copy) {
  if (rows == padRows && cols == padCols && !misaligned(ld, t))
    return p;
  int64_t es = dtypeSize(t);
  copy = Scratch(s, padRows * padCols * es);
  if (rows != padRows || cols != padCols)
    checkCuda(cudaMemsetAsync(copy.as<void>(), 0, padRows * padCols * es, s),
              "cudaMemsetAsync (GEMM operand padding)");
  checkCuda(cudaMemcpy2DAsync(copy.as<void>(), padCols * es, p, ld * es,
                              cols * es, rows, cudaMemcpyDeviceToDevice, s),
            "cudaMemcpy2DAsync (GEMM operand padding)");
  ld = padCols;
  return copy.as<void>();
}

} // namespace

cudaDataType_t cudaType(DType dt) {
  switch (dt) {
  case DType::F32:
    return CUDA_R_32F;
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  default:
    fail(Status::InvalidArgument, "cuda backend: dtype ", dtypeName(dt),
         " is not a GEMM operand type");
  }
}

cublasComputeType_t computeType(const Exec &e, DType dt) {
  return dt == DType::F32 && e.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                    : CUBLAS_COMPUTE_32F;
}

/// The FLOPs from which a 16-bit GEMM with a dimension or leading dimension
/// that is not a multiple of 8 elements (GPT-2's 50257-word vocabulary)
/// runs on zero-padded copies instead, as inductor's pad_mm does: cuBLAS
/// ran the lm head at 130 TFLOP/s on an H100 against 600 for aligned
/// shapes; the copies cost a pass over each padded operand.
/// FSDPRT_CUDA_PAD_GEMM_FLOPS overrides it (read once per backend).
double padGemmFlops() {
  const char *v = std::getenv("FSDPRT_CUDA_PAD_GEMM_FLOPS");
  return v && *v ? std::atof(v) : 1e9;
}

bool padsGemm(const Exec &e, DType dt, DType ct, int64_t m, int64_t n,
              int64_t k, int64_t lda, int64_t ldb, int64_t ldc) {
  bool unaligned = roundUp8(m) != m || roundUp8(n) != n || roundUp8(k) != k ||
                   misaligned(lda, dt) || misaligned(ldb, dt) ||
                   misaligned(ldc, ct);
  return dt != DType::F32 && unaligned && 2.0 * m * n * k >= e.padGemmFlops;
}

/// cuBLAS is column-major, so it computes C^T = op(B)^T op(A)^T.
void gemm(const Exec &e, DType dt, bool transA, bool transB, int64_t m,
          int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
          int64_t strideA, const void *b, int64_t ldb, int64_t strideB,
          float beta, void *c, DType ct, int64_t ldc, int64_t strideC,
          int64_t batch) {
  if (m == 0 || n == 0 || batch == 0)
    return;
  if (batch == 1 && padsGemm(e, dt, ct, m, n, k, lda, ldb, ldc)) {
    int64_t pm = roundUp8(m), pn = roundUp8(n), pk = roundUp8(k);
    // Zero rows / columns added along k contribute exact zeros.
    Scratch pa, pb, pc;
    const void *ua = transA ? zeroPadded(e.s, a, k, m, lda, pk, pm, dt, pa)
                            : zeroPadded(e.s, a, m, k, lda, pm, pk, dt, pa);
    const void *ub = transB ? zeroPadded(e.s, b, n, k, ldb, pn, pk, dt, pb)
                            : zeroPadded(e.s, b, k, n, ldb, pk, pn, dt, pb);
    int64_t ldcIn = ldc, es = dtypeSize(ct);
    void *uc = c;
    if (pm != m || pn != n || misaligned(ldc, ct)) {
      if (beta != 0.0f)
        uc = const_cast<void *>(zeroPadded(e.s, c, m, n, ldc, pm, pn, ct, pc));
      else {
        pc = Scratch(e.s, pm * pn * es);
        uc = pc.as<void>();
        ldc = pn;
      }
    }
    gemm(e, dt, transA, transB, pm, pn, pk, alpha, ua, lda, 0, ub, ldb, 0, beta,
         uc, ct, ldc, 0);
    if (uc != c)
      checkCuda(cudaMemcpy2DAsync(c, ldcIn * es, uc, ldc * es, n * es, m,
                                  cudaMemcpyDeviceToDevice, e.s),
                "cudaMemcpy2DAsync (GEMM result padding)");
    return;
  }
  cudaDataType_t t = cudaType(dt);
  cublasOperation_t opA = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  int im = blasInt(m, "m"), in = blasInt(n, "n"), ik = blasInt(k, "k");
  int ilda = blasInt(std::max<int64_t>(lda, 1), "lda");
  int ildb = blasInt(std::max<int64_t>(ldb, 1), "ldb");
  int ildc = blasInt(std::max<int64_t>(ldc, 1), "ldc");
  if (batch == 1) {
    checkCublas(cublasGemmEx(e.blas(), opB, opA, in, im, ik, &alpha, b, t, ildb,
                             a, t, ilda, &beta, c, cudaType(ct), ildc,
                             computeType(e, dt), CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx");
    return;
  }
  checkCublas(cublasGemmStridedBatchedEx(
                  e.blas(), opB, opA, in, im, ik, &alpha, b, t, ildb, strideB,
                  a, t, ilda, strideA, &beta, c, cudaType(ct), ildc, strideC,
                  blasInt(batch, "batch"), computeType(e, dt),
                  CUBLAS_GEMM_DEFAULT),
              "cublasGemmStridedBatchedEx");
}

/// The calling thread's handles, made at its first GEMM (GemmHandles).
GemmHandles &Exec::gemm() const {
  GemmHandles &g = st->gemm;
  if (g.lt) // the last one made: all or nothing
    return g;
  // Made outside step graphs: a step runs eagerly before it is captured
  // (a stream can also join a capture through an event wait).
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  checkCuda(cudaStreamIsCapturing(s, &capture), "cudaStreamIsCapturing");
  if (st->capturing || capture != cudaStreamCaptureStatusNone)
    fail(Status::Unsupported, "cuda backend: a worker stream's first GEMM "
                              "inside a step being captured");
  GemmHandles made;
  try {
    checkCublas(cublasCreate(&made.blas), "cublasCreate");
    checkCublas(cublasSetStream(made.blas, s), "cublasSetStream");
    // From the pool, so that the device high-water mark counts it.
    checkCuda(cudaMallocAsync(&made.workspace, kGemmWorkspaceBytes, s),
              "cudaMallocAsync (GEMM workspace)");
    checkCublas(
        cublasSetWorkspace(made.blas, made.workspace, kGemmWorkspaceBytes),
        "cublasSetWorkspace");
    made.lt =
        std::make_unique<LtMatmul>(s, made.workspace, kGemmWorkspaceBytes);
  } catch (...) {
    if (made.blas)
      cublasDestroy(made.blas);
    if (made.workspace)
      cudaFreeAsync(made.workspace, s);
    throw;
  }
  g = std::move(made);
  return g;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
