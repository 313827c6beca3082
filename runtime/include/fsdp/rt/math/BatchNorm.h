//===- BatchNorm.h - per-channel batch-norm bodies --------------*- C++ -*-===//
//
// The forward and backward of one channel of x[n, c, spatial], with sums in
// double in index order, so a channel's result is the same whoever computes
// it (a CPU thread, one GPU thread per channel).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_BATCHNORM_H
#define FSDP_RT_MATH_BATCHNORM_H

#include "fsdp/rt/math/Hd.h"

#include <cmath>
#include <cstdint>

namespace fsdp {
namespace rt {

/// Per-channel mean and biased variance.
struct ChannelStats {
  double mean, var;
};

FSDPRT_HD inline ChannelStats channelStats(const float *x, int64_t n,
                                           int64_t c, int64_t spatial,
                                           int64_t ch) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t s = 0; s < spatial; ++s)
      sum += x[(i * c + ch) * spatial + s];
  double count = static_cast<double>(n * spatial);
  double mean = sum / count, sq = 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t s = 0; s < spatial; ++s) {
      double v = x[(i * c + ch) * spatial + s] - mean;
      sq += v * v;
    }
  return {mean, sq / count};
}

/// The statistics channel `ch` is normalized with: the batch's in training,
/// the running ones in eval.
FSDPRT_HD inline void channelNormalization(const float *x,
                                           const float *runningMean,
                                           const float *runningVar, int64_t n,
                                           int64_t c, int64_t spatial,
                                           int64_t ch, float eps,
                                           bool training, ChannelStats &stats,
                                           float &mean, float &invstd) {
  if (training) {
    stats = channelStats(x, n, c, spatial, ch);
    mean = static_cast<float>(stats.mean);
    invstd = static_cast<float>(1.0 / std::sqrt(stats.var + eps));
  } else {
    mean = runningMean[ch];
    invstd = 1.0f / std::sqrt(runningVar[ch] + eps);
  }
}

/// Forward of channel `ch`; in training also updates its running
/// statistics (PyTorch: the running variance is the unbiased one).
FSDPRT_HD inline void batchNormChannelForward(
    const float *x, const float *w, const float *b, float *runningMean,
    float *runningVar, float *y, int64_t n, int64_t c, int64_t spatial,
    int64_t ch, float eps, float momentum, bool training) {
  ChannelStats stats{};
  float mean, invstd;
  channelNormalization(x, runningMean, runningVar, n, c, spatial, ch, eps,
                       training, stats, mean, invstd);
  if (training) {
    double count = static_cast<double>(n * spatial);
    float unbiased = static_cast<float>(stats.var * count / (count - 1.0));
    runningMean[ch] = (1.0f - momentum) * runningMean[ch] + momentum * mean;
    runningVar[ch] = (1.0f - momentum) * runningVar[ch] + momentum * unbiased;
  }
  float scaleC = (w ? w[ch] : 1.0f) * invstd;
  float shift = (b ? b[ch] : 0.0f) - mean * scaleC;
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + (i * c + ch) * spatial;
    float *yr = y + (i * c + ch) * spatial;
    for (int64_t s = 0; s < spatial; ++s)
      yr[s] = xr[s] * scaleC + shift;
  }
}

/// Backward of channel `ch`: the weight and bias gradients and, when `dx`
/// is given, the input gradient.
FSDPRT_HD inline void batchNormChannelBackward(
    const float *x, const float *w, const float *runningMean,
    const float *runningVar, const float *dy, float *dx, float *dw, float *db,
    int64_t n, int64_t c, int64_t spatial, int64_t ch, float eps,
    bool training) {
  ChannelStats stats{};
  float mean, invstd;
  channelNormalization(x, runningMean, runningVar, n, c, spatial, ch, eps,
                       training, stats, mean, invstd);
  double sumDy = 0.0, sumDyXhat = 0.0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t s = 0; s < spatial; ++s) {
      int64_t at = (i * c + ch) * spatial + s;
      sumDy += dy[at];
      sumDyXhat += static_cast<double>(dy[at]) * ((x[at] - mean) * invstd);
    }
  if (dw)
    dw[ch] = static_cast<float>(sumDyXhat);
  if (db)
    db[ch] = static_cast<float>(sumDy);
  if (!dx)
    return;
  float wc = w ? w[ch] : 1.0f;
  // Training: the batch statistics depend on x too, which adds the two mean
  // terms; eval statistics are constants.
  double count = static_cast<double>(n * spatial);
  float mDy = training ? static_cast<float>(sumDy / count) : 0.0f;
  float mDyXhat = training ? static_cast<float>(sumDyXhat / count) : 0.0f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t s = 0; s < spatial; ++s) {
      int64_t at = (i * c + ch) * spatial + s;
      float xhat = (x[at] - mean) * invstd;
      dx[at] = wc * invstd * (dy[at] - mDy - xhat * mDyXhat);
    }
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_BATCHNORM_H
