//===- Optimizer.cpp - the optimizer updates and gradient norms -----------===//
#include "Kernels.h"
#include "Parallel.h"

#include <algorithm>
#include <cmath>
#include <vector>

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

void lionStep(int threads, float *param, const float *grad, float *expAvg,
              int64_t n, const LionScalars &s) {
  parallelFor(threads, n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      lionUpdate(param[i], grad[i], expAvg[i], s);
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

float maxAbs(int threads, const float *x, int64_t n) {
  int64_t chunks = (n + kGrain - 1) / kGrain;
  std::vector<float> partial(chunks, 0.0f);
  parallelFor(threads, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      float m = 0.0f;
      for (int64_t i = c * kGrain, e = std::min(n, i + kGrain); i < e; ++i)
        m = maxAbsStep(m, x[i]);
      partial[c] = m;
    }
  });
  float m = 0.0f;
  for (float p : partial)
    m = maxAbsStep(m, p);
  return m;
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
