//===- Optimizer.cpp - SGD and AdamW on a flat shard ----------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/math/Optimizer.h"

#include <cmath>

namespace fsdp {
namespace rt {
namespace cpu {

static constexpr int64_t kGrain = 1 << 14;

void sgdStep(int threads, float *param, const float *grad, float *momentumBuf,
             int64_t n, int64_t step, const SgdOptions &o) {
  SgdScalars s{static_cast<float>(o.lr),
               static_cast<float>(o.momentum),
               static_cast<float>(o.dampening),
               static_cast<float>(o.weightDecay),
               o.nesterov,
               step == 1};
  parallelFor(threads, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      sgdUpdate(param[i], grad[i], momentumBuf ? momentumBuf + i : nullptr, s);
  });
}

void adamwStep(int threads, float *param, const float *grad, float *expAvg,
               float *expAvgSq, int64_t n, int64_t step,
               const AdamWOptions &o) {
  // Scalars as torch.optim.AdamW computes them in Python (double), then
  // rounded to f32 when applied to f32 tensors.
  double t = static_cast<double>(step);
  double biasCorrection1 = 1.0 - std::pow(o.beta1, t);
  double biasCorrection2 = 1.0 - std::pow(o.beta2, t);
  AdamWScalars s{static_cast<float>(1.0 - o.lr * o.weightDecay),
                 static_cast<float>(1.0 - o.beta1),
                 static_cast<float>(o.beta2),
                 static_cast<float>(1.0 - o.beta2),
                 static_cast<float>(o.lr / biasCorrection1),
                 static_cast<float>(std::sqrt(biasCorrection2)),
                 static_cast<float>(o.eps)};
  parallelFor(threads, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      adamwUpdate(param[i], grad[i], expAvg[i], expAvgSq[i], s);
  });
}

double sumOfSquares(int threads, const float *x, int64_t n) {
  return blockedSum(threads, n, [&](int64_t b, int64_t e) {
    double sum = 0.0;
    for (int64_t i = b; i < e; ++i)
      sum += static_cast<double>(x[i]) * x[i];
    return sum;
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
