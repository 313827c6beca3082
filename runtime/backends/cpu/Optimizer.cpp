//===- Optimizer.cpp - SGD and AdamW on a flat shard ----------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include <cmath>

namespace fsdp {
namespace rt {
namespace cpu {

static constexpr int64_t kGrain = 1 << 14;

void sgdStep(int threads, float *param, const float *grad, float *momentumBuf,
             int64_t n, const SgdScalars &s) {
  parallelFor(threads, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      sgdUpdate(param[i], grad[i], momentumBuf ? momentumBuf + i : nullptr, s);
  });
}

void adamwStep(int threads, float *param, const float *grad, float *expAvg,
               float *expAvgSq, int64_t n, const AdamWScalars &s) {
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
