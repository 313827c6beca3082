//===- Loss.cu - Cross-entropy and MSE losses -----------------------------===//
//
// The losses' blocked sums and finishing kernels (cross-entropy rows are in
// RowKernels.cu).
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

__global__ void crossEntropyFinishKernel(const double *partial, int64_t blocks,
                                         const int64_t *count, bool mean,
                                         float *loss) {
  if (!firstThread())
    return;
  double total = totalOf(partial, blocks);
  *loss =
      static_cast<float>(mean ? total / static_cast<double>(*count) : total);
}

__global__ void mseFinishKernel(const double *partial, int64_t blocks,
                                int64_t n, bool mean, float *loss) {
  if (!firstThread())
    return;
  double total = totalOf(partial, blocks);
  *loss = static_cast<float>(mean ? total / static_cast<double>(n) : total);
}

__global__ void mseBackwardKernel(const float *a, const float *b,
                                  const float *dloss, float *da, float *db,
                                  int64_t n, bool mean) {
  float g = 2.0f * (mean ? *dloss / static_cast<float>(n) : *dloss);
  FSDPRT_GRID_STRIDE(i, n) {
    float d = g * (a[i] - b[i]);
    if (da)
      da[i] = d;
    if (db)
      db[i] = -d;
  }
}

} // namespace

namespace {
/// The loss from the row terms: their blocked sum (/ count for a mean).
void crossEntropyLoss(Stream s, const double *terms, int64_t n,
                      const int64_t *count, LossReduction reduction,
                      float *loss) {
  int64_t blocks;
  Scratch partial = blockSums(s, ArrayTerm{terms}, n, blocks);
  FSDPRT_LAUNCH(crossEntropyFinishKernel, 1, s, partial.as<double>(), blocks,
                count, reduction == LossReduction::Mean, loss);
}
} // namespace

void crossEntropyForward(Stream s, DType dt, DType targetType,
                         const void *logits, const void *targets,
                         const int64_t *count, float *loss, LogitRows rows,
                         LossReduction reduction, int64_t ignoreIndex) {
  Scratch terms(s, std::max<int64_t>(rows.n, 1) * 8);
  crossEntropyRowTerms(s, dt, targetType == DType::I32, logits, targets,
                       terms.as<double>(), rows, ignoreIndex);
  crossEntropyLoss(s, terms.as<double>(), rows.n, count, reduction, loss);
}

void crossEntropyForwardBackward(Stream s, DType dt, DType targetType,
                                 const void *logits, const void *targets,
                                 const int64_t *count, const float *dloss,
                                 float *loss, void *dlogits, LogitRows rows,
                                 LossReduction reduction,
                                 int64_t ignoreIndex) {
  Scratch terms(s, std::max<int64_t>(rows.n, 1) * 8);
  crossEntropyRowTermsAndGrad(s, dt, targetType == DType::I32, logits,
                              targets, count, dloss, terms.as<double>(),
                              dlogits, rows,
                              reduction == LossReduction::Mean, ignoreIndex);
  crossEntropyLoss(s, terms.as<double>(), rows.n, count, reduction, loss);
}

void mseLossForward(Stream s, const float *a, const float *b, float *loss,
                    int64_t n, LossReduction reduction) {
  int64_t blocks;
  Scratch partial = blockSums(s, MseTerm{a, b}, n, blocks);
  FSDPRT_LAUNCH(mseFinishKernel, 1, s, partial.as<double>(), blocks, n,
                reduction == LossReduction::Mean, loss);
}

void mseLossBackward(Stream s, const float *a, const float *b,
                     const float *dloss, float *da, float *db, int64_t n,
                     LossReduction reduction) {
  FSDPRT_LAUNCH(mseBackwardKernel, n, s, a, b, dloss, da, db, n,
                reduction == LossReduction::Mean);
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
