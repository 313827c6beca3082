//===- Norm.cpp - layer_norm, rms_norm, batch_norm ------------------------===//
//
// Backward passes recompute row (or channel) statistics from x instead of
// saving them in forward: one extra read of x, and no extra buffers for the
// compiler's memory plan.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"
#include "Storage.h"

#include "fsdp/rt/math/BatchNorm.h"
#include "fsdp/rt/math/Pointwise.h"
#include "fsdp/rt/math/Rows.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

static int64_t rowGrain(int64_t d) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(d, 1));
}

/// One row of layer_norm: the unfused and the fused (add) forward share it.
static void layerNormRow(const float *xr, const float *w, const float *b,
                         float *yr, int64_t d, float eps) {
  float mean, rstd;
  meanRstd(xr, d, 1, eps, mean, rstd);
  for (int64_t i = 0; i < d; ++i) {
    float v = (xr[i] - mean) * rstd;
    yr[i] = v * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
  }
}

void layerNormForward(int threads, const float *x, const float *w,
                      const float *b, float *y, int64_t rows, int64_t d,
                      float eps) {
  parallelFor(threads, rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      layerNormRow(x + r * d, w, b, y + r * d, d, eps);
  });
}

void addLayerNormForward(int threads, DType dt, const void *a, const void *b,
                         const float *w, const float *bias, void *sum,
                         float *y, int64_t rows, int64_t d, float eps) {
  withStorage(dt, [&](auto s) {
    using S = decltype(s);
    using T = typename S::T;
    parallelFor(threads, rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
      std::vector<float> x(d);
      for (int64_t r = r0; r < r1; ++r) {
        const T *ar = static_cast<const T *>(a) + r * d;
        const T *br = static_cast<const T *>(b) + r * d;
        T *sr = static_cast<T *>(sum) + r * d;
        // The add kernel's rounding (binaryForward), then the norm of the
        // sum as stored, as the unfused layer_norm reads it.
        for (int64_t i = 0; i < d; ++i) {
          sr[i] = S::store(binaryApply(FSDPRT_ADD, S::load(ar[i]),
                                       S::load(br[i])));
          x[i] = S::load(sr[i]);
        }
        layerNormRow(x.data(), w, bias, y + r * d, d, eps);
      }
    });
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

/// layer_norm's backward: each row's statistics and, when `withDx`, its
/// input gradient, written to `dx` (f32) where given, else to a scratch row,
/// then handed to rowDone(r, row); then the column gradients. The unfused
/// and the fused (addend) backward share it.
template <typename RowDone>
static void layerNormBackwardRows(int threads, const float *x, const float *w,
                                  const float *dy, bool withDx, float *dx,
                                  float *dw, float *db, int64_t rows, int64_t d,
                                  float eps, RowDone rowDone) {
  std::vector<float> mean(rows), rstd(rows);
  parallelFor(threads, rows, rowGrain(d), [&](int64_t r0, int64_t r1) {
    std::vector<float> g(d), scratch(dx ? 0 : d);
    for (int64_t r = r0; r < r1; ++r) {
      meanRstd(x + r * d, d, 1, eps, mean[r], rstd[r]);
      if (!withDx)
        continue;
      for (int64_t i = 0; i < d; ++i)
        g[i] = dy[r * d + i] * (w ? w[i] : 1.0f);
      float *row = dx ? dx + r * d : scratch.data();
      layerNormRowBackward(x + r * d, g.data(), mean[r], rstd[r], d, row);
      rowDone(r, row);
    }
  });
  columnGrads(threads, dy, dw, db, rows, d, [&](int64_t r, int64_t j) {
    return (x[r * d + j] - mean[r]) * rstd[r];
  });
}

void layerNormBackward(int threads, const float *x, const float *w,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t rows, int64_t d, float eps) {
  layerNormBackwardRows(threads, x, w, dy, dx != nullptr, dx, dw, db, rows, d,
                        eps, [](int64_t, const float *) {});
}

void addLayerNormBackward(int threads, DType dt, const float *x, const float *w,
                          const float *dy, const void *addend, void *dx,
                          float *dw, float *db, int64_t rows, int64_t d,
                          float eps) {
  withStorage(dt, [&](auto s) {
    using S = decltype(s);
    using T = typename S::T;
    layerNormBackwardRows(
        threads, x, w, dy, /*withDx=*/true, /*dx=*/nullptr, dw, db, rows, d,
        eps,
        [&](int64_t r, const float *dxRow) {
          const T *ar = static_cast<const T *>(addend) + r * d;
          T *out = static_cast<T *>(dx) + r * d;
          // The norm's gradient rounded to storage as layer_norm_backward
          // stores it, then the add kernel's rounding (binaryForward); each
          // addend element is read before its dx element is written.
          for (int64_t i = 0; i < d; ++i)
            out[i] = S::store(binaryApply(FSDPRT_ADD, S::load(ar[i]),
                                          S::load(S::store(dxRow[i]))));
        });
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

void batchNormForward(int threads, const float *x, const float *w,
                      const float *b, float *runningMean, float *runningVar,
                      float *y, int64_t n, int64_t c, int64_t spatial,
                      float eps, float momentum, bool training) {
  parallelFor(threads, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch)
      batchNormChannelForward(x, w, b, runningMean, runningVar, y, n, c,
                              spatial, ch, eps, momentum, training);
  });
}

void batchNormBackward(int threads, const float *x, const float *w,
                       const float *runningMean, const float *runningVar,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t n, int64_t c, int64_t spatial, float eps,
                       bool training) {
  parallelFor(threads, c, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch)
      batchNormChannelBackward(x, w, runningMean, runningVar, dy, dx, dw, db,
                               n, c, spatial, ch, eps, training);
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
