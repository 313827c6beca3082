//===- Rows.h - Per-row reduction bodies ------------------------*- C++ -*-===//
//
// Row statistics and row-wise forward/backward formulas for layer_norm,
// rms_norm, softmax and cross_entropy. Each works on one row (elements
// `stride` apart) with sums accumulated in double in index order, so a row's
// result is the same whoever computes it. A device backend can call them one
// row per thread, or use them as the reference for its cooperative version.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_ROWS_H
#define FSDP_RT_MATH_ROWS_H

#include "fsdp/rt/math/Hd.h"

#include <cmath>
#include <cstdint>

namespace fsdp {
namespace rt {

/// Mean and 1/sqrt(biased variance + eps); two passes for stability.
FSDPRT_HD inline void meanRstd(const float *x, int64_t d, int64_t stride,
                               float eps, float &mean, float &rstd) {
  double sum = 0.0;
  for (int64_t i = 0; i < d; ++i)
    sum += x[i * stride];
  double mu = sum / static_cast<double>(d);
  double sq = 0.0;
  for (int64_t i = 0; i < d; ++i) {
    double c = x[i * stride] - mu;
    sq += c * c;
  }
  mean = static_cast<float>(mu);
  rstd = static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
}

/// 1/sqrt(mean(x^2) + eps).
FSDPRT_HD inline float rmsRstd(const float *x, int64_t d, float eps) {
  double sq = 0.0;
  for (int64_t i = 0; i < d; ++i)
    sq += static_cast<double>(x[i]) * x[i];
  return static_cast<float>(1.0 / std::sqrt(sq / static_cast<double>(d) + eps));
}

/// layer_norm input gradient of one row, given g = dy * w (or dy):
/// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)).
FSDPRT_HD inline void layerNormRowBackward(const float *x, const float *g,
                                           float mean, float rstd, int64_t d,
                                           float *dx) {
  double sg = 0.0, sgx = 0.0;
  for (int64_t i = 0; i < d; ++i) {
    float xhat = (x[i] - mean) * rstd;
    sg += g[i];
    sgx += static_cast<double>(g[i]) * xhat;
  }
  float mg = static_cast<float>(sg / d), mgx = static_cast<float>(sgx / d);
  for (int64_t i = 0; i < d; ++i) {
    float xhat = (x[i] - mean) * rstd;
    dx[i] = rstd * (g[i] - mg - xhat * mgx);
  }
}

/// rms_norm input gradient of one row, given g = dy * w (or dy):
/// dx = rstd * g - x * rstd^3 * mean(g * x).
FSDPRT_HD inline void rmsNormRowBackward(const float *x, const float *g,
                                         float rstd, int64_t d, float *dx) {
  double sgx = 0.0;
  for (int64_t i = 0; i < d; ++i)
    sgx += static_cast<double>(g[i]) * x[i];
  float c = static_cast<float>(sgx / d) * rstd * rstd * rstd;
  for (int64_t i = 0; i < d; ++i)
    dx[i] = rstd * g[i] - x[i] * c;
}

/// max and log(sum(exp(x - max))) of a strided row.
FSDPRT_HD inline void rowLogSumExp(const float *x, int64_t d, int64_t stride,
                                   float &max, float &logSum) {
  float m = -INFINITY;
  for (int64_t i = 0; i < d; ++i)
    m = x[i * stride] > m ? x[i * stride] : m;
  double sum = 0.0;
  for (int64_t i = 0; i < d; ++i)
    sum += std::exp(x[i * stride] - m);
  max = m;
  logSum = static_cast<float>(std::log(sum));
}

FSDPRT_HD inline void softmaxRow(const float *x, float *y, int64_t d,
                                 int64_t stride) {
  float m, logSum;
  rowLogSumExp(x, d, stride, m, logSum);
  for (int64_t i = 0; i < d; ++i)
    y[i * stride] = std::exp(x[i * stride] - m - logSum);
}

/// dx = y * (dy - sum(dy * y)).
FSDPRT_HD inline void softmaxRowBackward(const float *y, const float *dy,
                                         float *dx, int64_t d, int64_t stride) {
  double dot = 0.0;
  for (int64_t i = 0; i < d; ++i)
    dot += static_cast<double>(dy[i * stride]) * y[i * stride];
  float s = static_cast<float>(dot);
  for (int64_t i = 0; i < d; ++i)
    dx[i * stride] = y[i * stride] * (dy[i * stride] - s);
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_ROWS_H
