//===- LtMatmul.cpp - cuBLASLt GEMMs with bias and GELU epilogues ---------===//
#include "LtMatmul.h"

#include <chrono>
#include <cstdint>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// The largest power of two up to 16 that divides the address: cuBLASLt's
/// heuristic picks among the kernels this alignment allows.
int64_t alignmentOf(const void *p) {
  auto v = reinterpret_cast<uintptr_t>(p);
  int64_t a = 16;
  while (a > 1 && v % a != 0)
    a /= 2;
  return a;
}

void setAttr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
             const void *value, size_t bytes) {
  checkCublas(cublasLtMatmulDescSetAttribute(d, attr, value, bytes),
              "cublasLtMatmulDescSetAttribute");
}

cublasLtMatrixLayout_t layout(cudaDataType_t t, int64_t rows, int64_t cols,
                              int64_t ld) {
  cublasLtMatrixLayout_t l = nullptr;
  checkCublas(cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows),
                                         static_cast<uint64_t>(cols), ld),
              "cublasLtMatrixLayoutCreate");
  return l;
}

/// FSDPRT_GEMM_AUTOTUNE=1: a shape's first call outside a capture (the
/// step's eager warm-up) times this many of the heuristic's candidates on
/// its own operands and keeps the fastest. Off by default: the choice
/// follows timing noise, and with it the rounding (not the same bits
/// every run).
constexpr int kTuneCandidates = 8;
constexpr int kTuneReps = 3;

cublasLtEpilogue_t epilogueOf(LtGemm::Epilogue e) {
  switch (e) {
  case LtGemm::Epilogue::Bias:
    return CUBLASLT_EPILOGUE_BIAS;
  case LtGemm::Epilogue::BiasGradientB:
    return CUBLASLT_EPILOGUE_BGRADB;
  case LtGemm::Epilogue::GeluAux:
    return CUBLASLT_EPILOGUE_GELU_AUX;
  case LtGemm::Epilogue::GeluAuxBias:
    return CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  case LtGemm::Epilogue::DGelu:
    return CUBLASLT_EPILOGUE_DGELU;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  checkCuda(cudaStreamIsCapturing(s, &status), "cudaStreamIsCapturing");
  return status != cudaStreamCaptureStatusNone;
}

} // namespace

/// Descriptors of one GEMM shape and the algorithm chosen for it.
struct LtMatmul::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
  ~Plan() {
    if (a)
      cublasLtMatrixLayoutDestroy(a);
    if (b)
      cublasLtMatrixLayoutDestroy(b);
    if (d)
      cublasLtMatrixLayoutDestroy(d);
    if (desc)
      cublasLtMatmulDescDestroy(desc);
  }
};

LtMatmul::LtMatmul(cudaStream_t stream, void *workspace, size_t bytes)
    : stream_(stream), workspace_(workspace), workspaceBytes_(bytes),
      autotune_(envFlag("FSDPRT_GEMM_AUTOTUNE")) {
  checkCublas(cublasLtCreate(&handle_), "cublasLtCreate");
}

LtMatmul::~LtMatmul() {
  plans_.clear();
  if (handle_)
    cublasLtDestroy(handle_);
}

LtMatmul::Plan *LtMatmul::plan(const LtGemm &g) {
  Key key{int64_t(g.epilogue),
          g.compute,
          g.ab,
          g.d,
          g.transA,
          g.transB,
          g.m,
          g.n,
          g.k,
          g.lda,
          g.ldb,
          g.ldd,
          alignmentOf(g.a),
          alignmentOf(g.b),
          alignmentOf(g.out),
          alignmentOf(g.bias),
          g.ldAux,
          alignmentOf(g.aux)};
  std::unique_ptr<Plan> &slot = plans_[key];
  if (slot)
    return slot.get();
  slot = std::make_unique<Plan>();
  Plan &p = *slot;
  checkCublas(cublasLtMatmulDescCreate(&p.desc, g.compute, CUDA_R_32F),
              "cublasLtMatmulDescCreate");
  cublasOperation_t ta = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t tb = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  setAttr(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  setAttr(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  cublasLtEpilogue_t ep = epilogueOf(g.epilogue);
  setAttr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep));
  // The heuristic reads the bias and aux pointers' alignment (the key holds
  // them); the aux (the GELU's input) has D's type, cuBLASLt's default.
  setAttr(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias));
  if (g.aux) {
    setAttr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux,
            sizeof(g.aux));
    setAttr(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &g.ldAux,
            sizeof(g.ldAux));
  }
  // Layouts describe the stored matrices: op(A) is m x k, op(B) k x n.
  p.a = g.transA ? layout(g.ab, g.k, g.m, g.lda)
                 : layout(g.ab, g.m, g.k, g.lda);
  p.b = g.transB ? layout(g.ab, g.n, g.k, g.ldb)
                 : layout(g.ab, g.k, g.n, g.ldb);
  p.d = layout(g.d, g.m, g.n, g.ldd);

  cublasLtMatmulPreference_t pref = nullptr;
  checkCublas(cublasLtMatmulPreferenceCreate(&pref),
              "cublasLtMatmulPreferenceCreate");
  uint64_t ws = workspaceBytes_;
  uint32_t alignA = uint32_t(alignmentOf(g.a));
  uint32_t alignB = uint32_t(alignmentOf(g.b));
  uint32_t alignD = uint32_t(alignmentOf(g.out));
  struct {
    cublasLtMatmulPreferenceAttributes_t attr;
    const void *value;
    size_t bytes;
  } prefs[] = {{CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)},
               {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, 4},
               {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, 4},
               {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD, 4},
               {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, 4}};
  for (const auto &pr : prefs)
    checkCublas(
        cublasLtMatmulPreferenceSetAttribute(pref, pr.attr, pr.value, pr.bytes),
        "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t results[kTuneCandidates]{};
  int count = 0;
  bool tune = autotune_ && !capturing(stream_);
  cublasStatus_t rc = cublasLtMatmulAlgoGetHeuristic(
      handle_, p.desc, p.a, p.b, p.d, p.d, pref, tune ? kTuneCandidates : 1,
      results, &count);
  cublasLtMatmulPreferenceDestroy(pref);
  // No algorithm (NOT_SUPPORTED) is an answer, not an error.
  if (rc != CUBLAS_STATUS_NOT_SUPPORTED)
    checkCublas(rc, "cublasLtMatmulAlgoGetHeuristic");
  p.found = rc == CUBLAS_STATUS_SUCCESS && count > 0 &&
            results[0].state == CUBLAS_STATUS_SUCCESS;
  p.algo = results[0].algo;
  if (p.found && count > 1)
    p.algo = fastest(g, p, results, count);
  return &p;
}

void LtMatmul::launch(const LtGemm &g, const Plan &p,
                      const cublasLtMatmulAlgo_t &algo) {
  float one = 1.0f, zero = 0.0f;
  checkCublas(cublasLtMatmul(handle_, p.desc, &one, g.a, p.a, g.b, p.b, &zero,
                             g.out, p.d, g.out, p.d, &algo, workspace_,
                             workspaceBytes_, stream_),
              "cublasLtMatmul");
}

/// The candidate with the least time over kTuneReps calls after one to
/// warm up, timed on the host around synchronisations (the GEMMs tuned
/// take tens of microseconds or more). Each call writes only g's output
/// (and bias gradient or GELU aux), which the real call then overwrites.
/// Called by plan(), whose descriptor already points at g's bias.
cublasLtMatmulAlgo_t
LtMatmul::fastest(const LtGemm &g, const Plan &p,
                  const cublasLtMatmulHeuristicResult_t *candidates,
                  int count) {
  cublasLtMatmulAlgo_t best = candidates[0].algo;
  double bestSeconds = -1.0;
  for (int i = 0; i < count; ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS ||
        candidates[i].workspaceSize > workspaceBytes_)
      continue;
    launch(g, p, candidates[i].algo);
    // host-sync: the opt-in autotune times on the host, outside captures.
    checkCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < kTuneReps; ++r)
      launch(g, p, candidates[i].algo);
    // host-sync: as above, the timed calls' end.
    checkCuda(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (bestSeconds < 0 || seconds < bestSeconds) {
      bestSeconds = seconds;
      best = candidates[i].algo;
    }
  }
  return best;
}

bool LtMatmul::run(const LtGemm &g) {
  if (g.m > INT32_MAX || g.n > INT32_MAX || g.k > INT32_MAX)
    return false;
  // cuBLASLt's rule for a GELU aux: its leading dimension divisible by 8.
  if (g.aux && g.ldAux % 8 != 0)
    return false;
  Plan *p = plan(g);
  if (!p->found)
    return false;
  setAttr(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof(g.bias));
  if (g.aux)
    setAttr(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g.aux,
            sizeof(g.aux));
  launch(g, *p, p->algo);
  return true;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
