//===- Norm.cpp - layer_norm, rms_norm, batch_norm ------------------------===//
//
// Backward passes recompute row (or channel) statistics from x instead of
// saving them in forward: one extra read of x, and no extra buffers for the
// compiler's memory plan.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/math/Rows.h"

#include <cmath>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

static int64_t rowGrain(int64_t d) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1));
}

void layerNormForward(int threads, const float *x, const float *w,
                      const float *b, float *y, int64_t rows, int64_t d,
                      float eps) {
  parallelFor(threads, rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * d;
      float *yr = y + r * d;
      float mean, rstd;
      meanRstd(xr, d, 1, eps, mean, rstd);
      for (int64_t i = 0; i < d; ++i) {
        float v = (xr[i] - mean) * rstd;
        yr[i] = v * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
      }
    }
  });
}

/// Column sums over rows, in row order: dw[j] = sum_r dy*xhat, db[j] = sum_r
/// dy.
template <typename XHat>
static void columnGrads(int threads, const float *dy, float *dw, float *db,
                        int64_t rows, int64_t d, XHat xhat) {
  if (!dw && !db)
    return;
  parallelFor(threads, d, 16, [&](int64_t c0, int64_t c1) {
    std::vector<double> aw(c1 - c0, 0.0), ab(c1 - c0, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = c0; j < c1; ++j) {
        float g = dy[r * d + j];
        aw[j - c0] += static_cast<double>(g) * xhat(r, j);
        ab[j - c0] += g;
      }
    for (int64_t j = c0; j < c1; ++j) {
      if (dw)
        dw[j] = static_cast<float>(aw[j - c0]);
      if (db)
        db[j] = static_cast<float>(ab[j - c0]);
    }
  });
}

void layerNormBackward(int threads, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t rows, int64_t d, float eps) {
  std::vector<float> mean(rows), rstd(rows);
  parallelFor(threads, rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    std::vector<float> g(d);
    for (int64_t r = r0; r < r1; ++r) {
      meanRstd(x + r * d, d, 1, eps, mean[r], rstd[r]);
      if (!dx)
        continue;
      for (int64_t i = 0; i < d; ++i)
        g[i] = dy[r * d + i] * (w ? w[i] : 1.0f);
      layerNormRowBackward(x + r * d, g.data(), mean[r], rstd[r], d,
                           dx + r * d);
    }
  });
  columnGrads(threads, dy, dw, db, rows, d, [&](int64_t r, int64_t j) {
    return (x[r * d + j] - mean[r]) * rstd[r];
  });
}

void rmsNormForward(int threads, const float *x, const float *w, float *y,
                    int64_t rows, int64_t d, float eps) {
  parallelFor(threads, rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *xr = x + r * d;
      float rstd = rmsRstd(xr, d, eps);
      for (int64_t i = 0; i < d; ++i)
        y[r * d + i] = xr[i] * rstd * (w ? w[i] : 1.0f);
    }
  });
}

void rmsNormBackward(int threads, const float *x, const float *w,
                     const float *dy, float *dx, float *dw, int64_t rows,
                     int64_t d, float eps) {
  std::vector<float> rstd(rows);
  parallelFor(threads, rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    std::vector<float> g(d);
    for (int64_t r = r0; r < r1; ++r) {
      rstd[r] = rmsRstd(x + r * d, d, eps);
      if (!dx)
        continue;
      for (int64_t i = 0; i < d; ++i)
        g[i] = dy[r * d + i] * (w ? w[i] : 1.0f);
      rmsNormRowBackward(x + r * d, g.data(), rstd[r], d, dx + r * d);
    }
  });
  columnGrads(threads, dy, dw, nullptr, rows, d,
              [&](int64_t r, int64_t j) { return x[r * d + j] * rstd[r]; });
}

namespace {
/// Per-channel mean and biased variance of x[n, c, spatial].
struct ChannelStats {
  double mean, var;
};
} // namespace

static ChannelStats channelStats(const float *x, int64_t n, int64_t c,
                                 int64_t spatial, int64_t ch) {
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

void batchNormForward(int threads, const float *x, const float *w,
                      const float *b, float *runningMean, float *runningVar,
                      float *y, int64_t n, int64_t c, int64_t spatial,
                      float eps, float momentum, bool training) {
  double count = static_cast<double>(n * spatial);
  parallelFor(threads, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      float mean, invstd;
      if (training) {
        ChannelStats st = channelStats(x, n, c, spatial, ch);
        mean = static_cast<float>(st.mean);
        invstd = static_cast<float>(1.0 / std::sqrt(st.var + eps));
        // PyTorch: running stats use the unbiased variance.
        float unbiased = static_cast<float>(st.var * count / (count - 1.0));
        runningMean[ch] = (1.0f - momentum) * runningMean[ch] + momentum * mean;
        runningVar[ch] =
            (1.0f - momentum) * runningVar[ch] + momentum * unbiased;
      } else {
        mean = runningMean[ch];
        invstd = 1.0f / std::sqrt(runningVar[ch] + eps);
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
  });
}

void batchNormBackward(int threads, const float *x, const float *w,
                       const float *runningMean, const float *runningVar,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t n, int64_t c, int64_t spatial, float eps,
                       bool training) {
  double count = static_cast<double>(n * spatial);
  parallelFor(threads, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      float mean, invstd;
      if (training) {
        ChannelStats st = channelStats(x, n, c, spatial, ch);
        mean = static_cast<float>(st.mean);
        invstd = static_cast<float>(1.0 / std::sqrt(st.var + eps));
      } else {
        mean = runningMean[ch];
        invstd = 1.0f / std::sqrt(runningVar[ch] + eps);
      }
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
        continue;
      float wc = w ? w[ch] : 1.0f;
      // Training: the batch statistics depend on x too, which adds the two
      // mean terms; eval statistics are constants.
      float mDy = training ? static_cast<float>(sumDy / count) : 0.0f;
      float mDyXhat = training ? static_cast<float>(sumDyXhat / count) : 0.0f;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t s = 0; s < spatial; ++s) {
          int64_t at = (i * c + ch) * spatial + s;
          float xhat = (x[at] - mean) * invstd;
          dx[at] = wc * invstd * (dy[at] - mDy - xhat * mDyXhat);
        }
    }
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
