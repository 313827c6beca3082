//===- cublas_v2.h - Host emulation of the cuBLAS calls the backend uses --===//
//
// Column-major GEMM exactly as documented for cublasGemmEx /
// cublasGemmStridedBatchedEx (op(A) is m x k, lda >= rows of A as stored),
// with f32 accumulation in k order. Argument checks mirror cuBLAS's
// CUBLAS_STATUS_INVALID_VALUE conditions, so a wrong leading dimension or
// transpose flag in the backend fails here instead of on a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_CUDA_EMU_CUBLAS_V2_H
#define FSDPRT_CUDA_EMU_CUBLAS_V2_H

#include "cuda_runtime.h"

#include "fsdp/rt/math/Half.h"

#include <algorithm>
#include <atomic>

enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
inline const char *cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  default:
    return "CUBLAS_STATUS_EMULATED";
  }
}
inline const char *cublasGetStatusString(cublasStatus_t s) {
  return cublasGetStatusName(s);
}

struct EmuBlas {
  cudaStream_t stream = nullptr;
};
using cublasHandle_t = EmuBlas *;
inline cublasStatus_t cublasCreate(cublasHandle_t *h) {
  *h = new EmuBlas;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
  h->stream = s;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}

enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasComputeType_t {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
/// GEMMs that were allowed TF32 inputs (computed in f32 all the same).
inline std::atomic<long> &emuTf32Gemms() {
  static std::atomic<long> gemms{0};
  return gemms;
}
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };

inline float emuLoad(const void *p, cudaDataType_t t, long long i) {
  switch (t) {
  case CUDA_R_32F:
    return static_cast<const float *>(p)[i];
  case CUDA_R_16BF:
    return fsdp::rt::bf16ToFloat(static_cast<const uint16_t *>(p)[i]);
  default:
    return fsdp::rt::f16ToFloat(static_cast<const uint16_t *>(p)[i]);
  }
}

inline void emuStore(void *p, cudaDataType_t t, long long i, float v) {
  switch (t) {
  case CUDA_R_32F:
    static_cast<float *>(p)[i] = v;
    return;
  case CUDA_R_16BF:
    static_cast<uint16_t *>(p)[i] = fsdp::rt::floatToBf16(v);
    return;
  default:
    static_cast<uint16_t *>(p)[i] = fsdp::rt::floatToF16(v);
  }
}

/// (op(A) op(B))[i, j] of column-major A and B (type t) in f32, summed in
/// k order; a and b point at the batch's matrices.
inline float emuProduct(const void *A, long long aBase, long long lda,
                        bool ta, const void *B, long long bBase,
                        long long ldb, bool tb, cudaDataType_t t, long long i,
                        long long j, long long k) {
  float acc = 0.0f;
  for (long long p = 0; p < k; ++p) {
    long long ia = ta ? p + i * lda : i + p * lda;
    long long ib = tb ? j + p * ldb : p + j * ldb;
    acc += emuLoad(A, t, aBase + ia) * emuLoad(B, t, bBase + ib);
  }
  return acc;
}

inline cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
    int k, const void *alpha, const void *A, cudaDataType_t at, int lda,
    long long sa, const void *B, cudaDataType_t bt, int ldb, long long sb,
    const void *beta, void *C, cudaDataType_t ct, int ldc, long long sc,
    int batch, cublasComputeType_t compute, cublasGemmAlgo_t) {
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (lda < std::max(1, ta == CUBLAS_OP_N ? m : k) ||
      ldb < std::max(1, tb == CUBLAS_OP_N ? k : n) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (at != bt || (ct != CUDA_R_32F && ct != at))
    return CUBLAS_STATUS_NOT_SUPPORTED; // the combinations the backend uses
  float al = *static_cast<const float *>(alpha);
  float be = *static_cast<const float *>(beta);
  if (compute == CUBLAS_COMPUTE_32F_FAST_TF32)
    ++emuTf32Gemms();
  emuRun(h->stream, [=] {
    for (int bi = 0; bi < batch; ++bi) {
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          float acc = emuProduct(A, bi * sa, lda, ta == CUBLAS_OP_T, B,
                                 bi * sb, ldb, tb == CUBLAS_OP_T, at, i, j, k);
          long long ic = bi * sc + i + (long long)j * ldc;
          float old = be == 0.0f ? 0.0f : be * emuLoad(C, ct, ic);
          emuStore(C, ct, ic, al * acc + old);
        }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t
cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
             int m, int n, int k, const void *alpha, const void *A,
             cudaDataType_t at, int lda, const void *B, cudaDataType_t bt,
             int ldb, const void *beta, void *C, cudaDataType_t ct, int ldc,
             cublasComputeType_t comp, cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, at, lda, 0, B,
                                    bt, ldb, 0, beta, C, ct, ldc, 0, 1, comp,
                                    algo);
}

#endif // FSDPRT_CUDA_EMU_CUBLAS_V2_H
