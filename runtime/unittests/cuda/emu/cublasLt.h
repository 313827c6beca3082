//===- cublasLt.h - Host emulation of the cuBLASLt calls the backend uses -===//
//
// cublasLtMatmul with the bias epilogues (BIAS: D += bias[row] before the
// rounding; BGRADB: bias[col] = sum over k of op(B), in k order, rounded
// once) and the GELU ones (GELU_AUX[_BIAS]: aux = the f32 value, D = its
// tanh GELU, each rounded once; DGELU: D = the f32 product times the GELU's
// derivative at aux as stored, rounded once), column-major as documented;
// the GELU is the runtime's (math/Activation.h), as cuBLASLt's is its own
// tanh form. The heuristic returns one algorithm for every shape.
// emuLtMatmulCalls() counts the matmuls run, so tests can tell that a layer
// took the epilogue path.
//
//===----------------------------------------------------------------------===//
#ifndef FSDPRT_CUDA_EMU_CUBLASLT_H
#define FSDPRT_CUDA_EMU_CUBLASLT_H

#include "cublas_v2.h"

#include "fsdp/rt/math/Activation.h"

#include <atomic>
#include <cstdint>
#include <cstring>

struct EmuLt {};
using cublasLtHandle_t = EmuLt *;
inline cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = new EmuLt;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  delete h;
  return CUBLAS_STATUS_SUCCESS;
}

enum cublasLtEpilogue_t {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_GELU_AUX = 32 | 128,
  CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 32 | 128 | 4,
  CUBLASLT_EPILOGUE_DGELU = 64 | 128,
  CUBLASLT_EPILOGUE_BGRADB = 512,
};
enum cublasLtMatmulDescAttributes_t {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
  CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
};
struct EmuLtDesc {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void *bias = nullptr;
  void *aux = nullptr;
  int64_t auxLd = 0;
};
using cublasLtMatmulDesc_t = EmuLtDesc *;
inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d,
                                               cublasComputeType_t compute,
                                               cudaDataType_t) {
  *d = new EmuLtDesc;
  (*d)->compute = compute;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  delete d;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                               cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t bytes) {
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    std::memcpy(&d->ta, buf, bytes);
    break;
  case CUBLASLT_MATMUL_DESC_TRANSB:
    std::memcpy(&d->tb, buf, bytes);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE:
    std::memcpy(&d->epilogue, buf, bytes);
    break;
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    std::memcpy(&d->bias, buf, bytes);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    std::memcpy(&d->aux, buf, bytes);
    break;
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    std::memcpy(&d->auxLd, buf, bytes);
    break;
  }
  return CUBLAS_STATUS_SUCCESS;
}

struct EmuLtLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
};
using cublasLtMatrixLayout_t = EmuLtLayout *;
inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l,
                                                 cudaDataType_t t,
                                                 uint64_t rows, uint64_t cols,
                                                 int64_t ld) {
  if (ld < static_cast<int64_t>(std::max<uint64_t>(rows, 1)))
    return CUBLAS_STATUS_INVALID_VALUE;
  *l = new EmuLtLayout{t, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  delete l;
  return CUBLAS_STATUS_SUCCESS;
}

enum cublasLtMatmulPreferenceAttributes_t {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
struct EmuLtPreference {};
using cublasLtMatmulPreference_t = EmuLtPreference *;
inline cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = new EmuLtPreference;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  delete p;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t,
                                     cublasLtMatmulPreferenceAttributes_t,
                                     const void *, size_t) {
  return CUBLAS_STATUS_SUCCESS;
}

struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
    cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
    cublasLtMatmulPreference_t, int requested,
    cublasLtMatmulHeuristicResult_t *results, int *count) {
  // Up to two candidates (the one emulated algorithm twice), so that
  // FSDPRT_GEMM_AUTOTUNE's timing of several runs here too.
  *count = requested < 2 ? requested : 2;
  for (int i = 0; i < *count; ++i)
    results[i] =
        cublasLtMatmulHeuristicResult_t{{}, 0, CUBLAS_STATUS_SUCCESS, 1.0f, {}};
  return CUBLAS_STATUS_SUCCESS;
}

inline std::atomic<long> &emuLtMatmulCalls() {
  static std::atomic<long> calls{0};
  return calls;
}

inline cublasStatus_t
cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc, const void *alpha,
               const void *A, cublasLtMatrixLayout_t al, const void *B,
               cublasLtMatrixLayout_t bl, const void *beta, const void *C,
               cublasLtMatrixLayout_t cl, void *D, cublasLtMatrixLayout_t dl,
               const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t s) {
  bool ta = desc->ta == CUBLAS_OP_T, tb = desc->tb == CUBLAS_OP_T;
  long long m = dl->rows, n = dl->cols;
  long long k = ta ? al->rows : al->cols;
  if ((ta ? al->cols : al->rows) != uint64_t(m) ||
      (tb ? bl->rows : bl->cols) != uint64_t(n) ||
      (tb ? bl->cols : bl->rows) != uint64_t(k) || C != D ||
      cl->rows != dl->rows || cl->cols != dl->cols || al->type != bl->type)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (*static_cast<const float *>(beta) != 0.0f)
    return CUBLAS_STATUS_NOT_SUPPORTED; // the backend never accumulates here
  bool gelu = desc->epilogue == CUBLASLT_EPILOGUE_GELU_AUX ||
              desc->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  bool dgelu = desc->epilogue == CUBLASLT_EPILOGUE_DGELU;
  // The documented aux rules: a pointer, ld >= rows and divisible by 8.
  if ((gelu || dgelu) &&
      (!desc->aux || desc->auxLd < int64_t(dl->rows) || desc->auxLd % 8 != 0))
    return CUBLAS_STATUS_INVALID_VALUE;
  ++emuLtMatmulCalls();
  if (desc->compute == CUBLAS_COMPUTE_32F_FAST_TF32)
    ++emuTf32Gemms();
  float al0 = *static_cast<const float *>(alpha);
  // What the call reads of its descriptors, taken now.
  EmuLtDesc d = *desc;
  EmuLtLayout la = *al, lb = *bl, ld = *dl;
  emuRun(s, [=] {
    cudaDataType_t at = la.type, dt = ld.type;
    for (long long j = 0; j < n; ++j)
      for (long long i = 0; i < m; ++i) {
        float v =
            al0 * emuProduct(A, 0, la.ld, ta, B, 0, lb.ld, tb, at, i, j, k);
        if (d.epilogue == CUBLASLT_EPILOGUE_BIAS ||
            d.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS)
          v += emuLoad(d.bias, dt, i);
        if (gelu) {
          emuStore(d.aux, dt, i + j * d.auxLd, v);
          v = fsdp::rt::geluTanhForward(v);
        } else if (dgelu) {
          v = fsdp::rt::geluTanhBackward(emuLoad(d.aux, dt, i + j * d.auxLd),
                                         v);
        }
        emuStore(D, dt, i + j * ld.ld, v);
      }
    if (d.epilogue == CUBLASLT_EPILOGUE_BGRADB) {
      for (long long j = 0; j < n; ++j) {
        float sum = 0.0f;
        for (long long p = 0; p < k; ++p)
          sum += emuLoad(B, at, tb ? j + p * lb.ld : p + j * lb.ld);
        emuStore(d.bias, dt, j, sum);
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

#endif // FSDPRT_CUDA_EMU_CUBLASLT_H
