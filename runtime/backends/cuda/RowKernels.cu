//===- RowKernels.cu - Row-parallel norms, softmax and cross-entropy ------===//
//
// layer_norm and rms_norm rows (their weight gradients are column sums in
// Reductions.cu), softmax and attention rows, cross-entropy rows.
// Softmax and cross-entropy run one block per row, its threads striding
// across the row, sums reduced in double through a fixed shared-memory
// tree: every row keeps the whole GPU busy at attention's widths (T up to
// 32k) and vocabularies (50k) where one thread per row left most SMs idle.
// Norm rows (a few thousand wide) run one warp per row, sums through a
// fixed shuffle tree. Either way the result does not depend on scheduling
// (the same bits run to run); the order differs from the CPU's index order
// only in how the double partial sums are added.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"
#include "Kernels.h"
#include "RowGroups.cuh"

#include <cmath>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// `v` of every thread of the block combined by `combine` in a fixed tree
/// order; every thread gets the result.
template <typename T, typename Combine>
__device__ T blockReduce(T v, Combine combine) {
  __shared__ T buf[kThreads];
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      buf[threadIdx.x] = combine(buf[threadIdx.x], buf[threadIdx.x + half]);
    __syncthreads();
  }
  T result = buf[0];
  __syncthreads(); // buf is reused by the next reduction
  return result;
}

struct Add {
  __device__ double operator()(double a, double b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ double blockSum(double v) { return blockReduce(v, Add{}); }
__device__ float blockMax(float v) { return blockReduce(v, Max{}); }

/// Calls f on the f32 elements of a row (n of them, `stride` apart) that
/// this thread owns (j = threadIdx.x + k * blockDim.x), in increasing j,
/// loading four ahead (softmax rows may be strided: no packs).
template <typename F>
__device__ void forEachOwned(const float *x, int64_t n, int64_t stride, F f) {
  constexpr int kAhead = 4;
  int64_t step = blockDim.x, j = threadIdx.x;
  for (; j + (kAhead - 1) * step < n; j += kAhead * step) {
    float v[kAhead];
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      v[u] = x[(j + u * step) * stride];
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      f(v[u]);
  }
  for (; j < n; j += step)
    f(x[j * stride]);
}

/// The max and log(sum(exp(x - max))) of n elements `stride` apart.
__device__ void blockLogSumExp(const float *x, int64_t n, int64_t stride,
                               float &max, float &logSum) {
  float m = -INFINITY;
  forEachOwned(x, n, stride, [&](float v) { m = fmaxf(m, v); });
  m = blockMax(m);
  double sum = 0.0;
  forEachOwned(x, n, stride, [&](float v) { sum += expf(v - m); });
  max = m;
  logSum = static_cast<float>(log(blockSum(sum)));
}

/// y = softmax of each row (dim elements `inner` apart) of x; y may alias x.
__global__ void softmaxRowsKernel(const float *x, float *y, int64_t rows,
                                  int64_t dim, int64_t inner) {
  FSDPRT_ROW_STRIDE(r, rows) {
    int64_t base = (r / inner) * dim * inner + r % inner;
    const float *xr = x + base;
    float *yr = y + base;
    float m, logSum;
    blockLogSumExp(xr, dim, inner, m, logSum);
    FSDPRT_COL_STRIDE(j, dim) {
      yr[j * inner] = expf(xr[j * inner] - m - logSum);
    }
  }
}

/// What attentionRowsKernel does with a row of scores.
enum class AttentionRowsMode { Softmax, StatsOnly, FromStats };

/// Attention rows p[rows, tk], row r being query i = r % tq of batch
/// element r / tq of one head; with `causal`, columns j > i are masked
/// (probability 0, as a -inf score on the CPU). The row's log-sum-exp
/// lives at lse[(r / tq) * lseBatchStride + i] (the [batch, heads, tq]
/// statistics of the head). Softmax: p = softmax(p), and the log-sum-exp
/// written when lse is given; StatsOnly: the log-sum-exp only; FromStats:
/// p = exp(p - lse), the backward's probabilities.
__global__ void attentionRowsKernel(float *p, int64_t rows, int64_t tq,
                                    int64_t tk, bool causal, float *lse,
                                    int64_t lseBatchStride,
                                    AttentionRowsMode mode) {
  FSDPRT_ROW_STRIDE(r, rows) {
    float *pr = p + r * tk;
    int64_t i = r % tq, live = causal && i + 1 < tk ? i + 1 : tk;
    float *lr = lse ? lse + (r / tq) * lseBatchStride + i : nullptr;
    if (mode == AttentionRowsMode::FromStats) {
      float l = *lr;
      FSDPRT_COL_STRIDE(j, tk) { pr[j] = j < live ? expf(pr[j] - l) : 0.0f; }
      continue;
    }
    float m, logSum;
    blockLogSumExp(pr, live, 1, m, logSum);
    if (lr && threadIdx.x == 0)
      *lr = m + logSum;
    if (mode == AttentionRowsMode::StatsOnly)
      continue;
    FSDPRT_COL_STRIDE(j, tk) {
      pr[j] = j < live ? expf(pr[j] - m - logSum) : 0.0f;
    }
  }
}

/// dx = y * (dy - sum(dy * y)) per row; dx may alias dy.
__global__ void softmaxBackwardRowsKernel(const float *y, const float *dy,
                                          float *dx, int64_t rows, int64_t dim,
                                          int64_t inner) {
  FSDPRT_ROW_STRIDE(r, rows) {
    int64_t base = (r / inner) * dim * inner + r % inner;
    double dot = 0.0;
    FSDPRT_COL_STRIDE(j, dim) {
      dot += static_cast<double>(dy[base + j * inner]) * y[base + j * inner];
    }
    float s = static_cast<float>(blockSum(dot));
    FSDPRT_COL_STRIDE(j, dim) {
      int64_t at = base + j * inner;
      dx[at] = y[at] * (dy[at] - s);
    }
  }
}

/// The max and log(sum(exp(x - max))) of a contiguous n-wide row, in one
/// read: each thread keeps a running max and its sum relative to it
/// (rescaled when a group raises the max), the block combines them at the
/// row's max. The two-pass form read 50k-wide logit rows twice.
template <typename S>
__device__ void rowLogSumExp(const typename S::T *x, int64_t n, float &max,
                             float &logSum) {
  float m = -INFINITY, v[kRowGroup];
  double sum = 0.0;
  forBlockGroups(n, [&](int64_t j0, int64_t k) {
    loadGroup<S>(x, j0, k, v);
    float gm = m;
    FSDPRT_GROUP_FOR(i, k) { gm = fmaxf(gm, v[i]); }
    if (gm > m) {
      sum *= exp(static_cast<double>(m) - gm); // 0 while m is -inf
      m = gm;
    }
    if (m == -INFINITY) { // -inf adds exp(-inf) = 0; NaN (fmaxf skips it)
      FSDPRT_GROUP_FOR(i, k) {
        if (v[i] != v[i])
          sum = NAN;
      }
      return;
    }
    FSDPRT_GROUP_FOR(i, k) { sum += expf(v[i] - m); }
  });
  max = blockMax(m);
  // A thread that saw only -inf (or nothing) adds 0, one that saw a NaN
  // NaN, as the two-pass sum does.
  double rescaled =
      m == -INFINITY ? sum : sum * exp(static_cast<double>(m) - max);
  logSum = static_cast<float>(log(blockSum(rescaled)));
}

template <typename S>
__global__ void crossEntropyTermsKernel(bool i32, const typename S::T *logits,
                                        const void *targets, double *terms,
                                        LogitRows rows, int64_t ignoreIndex) {
  FSDPRT_ROW_STRIDE(r, rows.n) {
    const typename S::T *xr = logits + r * rows.width;
    int64_t t = loadIndex(i32, targets, r);
    // The CPU skips an ignored row; adding +0.0 is the same. A target out
    // of range is reported by the index check; nothing outside is read.
    if (t == ignoreIndex || t < 0 || t >= rows.c) {
      if (threadIdx.x == 0)
        terms[r] = 0.0;
      continue;
    }
    float max, logSum;
    rowLogSumExp<S>(xr, rows.c, max, logSum);
    if (threadIdx.x == 0)
      terms[r] = static_cast<double>(max) + logSum - S::load(xr[t]);
  }
}

/// dlogits = (softmax(logits) - onehot(target)) * dloss (/ count for a
/// mean), computed in f32 and rounded once to the storage type, and where
/// `terms` is given the row terms of crossEntropyTermsKernel from the same
/// pass (the same bits); dlogits may be logits (every thread reads the
/// target's logit before any writes). Padding columns get 0.
template <typename S>
__global__ void crossEntropyTermsAndGradKernel(
    bool i32, const typename S::T *logits, const void *targets,
    const int64_t *count, const float *dloss, double *terms,
    typename S::T *dlogits, LogitRows rows, bool mean, int64_t ignoreIndex) {
  float g = mean ? *dloss / static_cast<float>(*count) : *dloss;
  int64_t c = rows.c;
  FSDPRT_ROW_STRIDE(r, rows.n) {
    const typename S::T *xr = logits + r * rows.width;
    typename S::T *dr = dlogits + r * rows.width;
    FSDPRT_COL_STRIDE(j, rows.width - c) { dr[c + j] = S::store(0.0f); }
    int64_t t = loadIndex(i32, targets, r);
    if (t == ignoreIndex || t < 0 || t >= c) {
      if (terms && threadIdx.x == 0)
        terms[r] = 0.0;
      FSDPRT_COL_STRIDE(j, c) { dr[j] = S::store(0.0f); }
      continue;
    }
    float max, logSum;
    rowLogSumExp<S>(xr, c, max, logSum);
    float target = S::load(xr[t]);
    __syncthreads();
    if (terms && threadIdx.x == 0)
      terms[r] = static_cast<double>(max) + logSum - target;
    forBlockGroups(c, [&](int64_t j0, int64_t k) {
      float v[kRowGroup];
      loadGroup<S>(xr, j0, k, v);
      FSDPRT_GROUP_FOR(i, k) {
        float p = expf(v[i] - max - logSum);
        v[i] = (j0 + i == t ? p - 1.0f : p) * g;
      }
      storeGroup<S>(dr, j0, k, v);
    });
  }
}

// Norm rows (d up to a few thousand) run one warp per row: a block per row
// spent most of its time in barriers at d = 768.

/// The row's mean and 1/sqrt(biased variance + eps), two passes as the CPU.
template <typename S>
__device__ void blockMeanRstd(const typename S::T *x, int64_t d, float eps,
                              float &mean, float &rstd) {
  float v[kRowGroup];
  double sum = 0.0;
  forWarpGroups(d, [&](int64_t j0, int64_t n) {
    loadGroup<S>(x, j0, n, v);
    FSDPRT_GROUP_FOR(i, n)
      sum += v[i];
  });
  double mu = warpSum(sum) / static_cast<double>(d);
  double sq = 0.0;
  forWarpGroups(d, [&](int64_t j0, int64_t n) {
    loadGroup<S>(x, j0, n, v);
    FSDPRT_GROUP_FOR(i, n) {
      double c = v[i] - mu;
      sq += c * c;
    }
  });
  mean = static_cast<float>(mu);
  rstd = static_cast<float>(
      1.0 / sqrt(warpSum(sq) / static_cast<double>(d) + eps));
}

template <typename S>
__device__ float blockRmsRstd(const typename S::T *x, int64_t d, float eps) {
  float v[kRowGroup];
  double sq = 0.0;
  forWarpGroups(d, [&](int64_t j0, int64_t n) {
    loadGroup<S>(x, j0, n, v);
    FSDPRT_GROUP_FOR(i, n)
      sq += static_cast<double>(v[i]) * v[i];
  });
  return static_cast<float>(
      1.0 / sqrt(warpSum(sq) / static_cast<double>(d) + eps));
}

template <typename S>
__global__ void layerNormRowsKernel(const typename S::T *x,
                                    const typename S::T *w,
                                    const typename S::T *b, typename S::T *y,
                                    int64_t rows, int64_t d, float eps) {
  FSDPRT_WARP_ROW_STRIDE(r, rows) {
    const typename S::T *xr = x + r * d;
    float mean, rstd;
    blockMeanRstd<S>(xr, d, eps, mean, rstd);
    forWarpGroups(d, [&](int64_t j0, int64_t n) {
      float v[kRowGroup], wv[kRowGroup], bv[kRowGroup];
      loadGroup<S>(xr, j0, n, v);
      loadGroup<S>(w, j0, n, wv, 1.0f);
      loadGroup<S>(b, j0, n, bv, 0.0f);
      FSDPRT_GROUP_FOR(i, n)
        v[i] = (v[i] - mean) * rstd * wv[i] + bv[i];
      storeGroup<S>(y + r * d, j0, n, v);
    });
  }
}

/// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w.
template <typename S>
__global__ void layerNormRowsBackwardKernel(
    const typename S::T *x, const typename S::T *w, const typename S::T *dy,
    typename S::T *dx, float *mean, float *rstd, int64_t rows, int64_t d,
    float eps) {
  FSDPRT_WARP_ROW_STRIDE(r, rows) {
    const typename S::T *xr = x + r * d, *dyr = dy + r * d;
    float mu, rs;
    blockMeanRstd<S>(xr, d, eps, mu, rs);
    if (threadIdx.x % kWarp == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    if (!dx)
      continue;
    float xv[kRowGroup], gv[kRowGroup], wv[kRowGroup];
    // g and xhat of a group (xv becomes xhat, gv g).
    auto group = [&](int64_t j0, int64_t n) {
      loadGroup<S>(xr, j0, n, xv);
      loadGroup<S>(dyr, j0, n, gv);
      loadGroup<S>(w, j0, n, wv, 1.0f);
      FSDPRT_GROUP_FOR(i, n) {
        gv[i] *= wv[i];
        xv[i] = (xv[i] - mu) * rs;
      }
    };
    double sg = 0.0, sgx = 0.0;
    forWarpGroups(d, [&](int64_t j0, int64_t n) {
      group(j0, n);
      FSDPRT_GROUP_FOR(i, n) {
        sg += gv[i];
        sgx += static_cast<double>(gv[i]) * xv[i];
      }
    });
    float mg = static_cast<float>(warpSum(sg) / d);
    float mgx = static_cast<float>(warpSum(sgx) / d);
    forWarpGroups(d, [&](int64_t j0, int64_t n) {
      group(j0, n);
      FSDPRT_GROUP_FOR(i, n)
        gv[i] = rs * (gv[i] - mg - xv[i] * mgx);
      storeGroup<S>(dx + r * d, j0, n, gv);
    });
  }
}

template <typename S>
__global__ void rmsNormRowsKernel(const typename S::T *x,
                                  const typename S::T *w, typename S::T *y,
                                  int64_t rows, int64_t d, float eps) {
  FSDPRT_WARP_ROW_STRIDE(r, rows) {
    const typename S::T *xr = x + r * d;
    float rstd = blockRmsRstd<S>(xr, d, eps);
    forWarpGroups(d, [&](int64_t j0, int64_t n) {
      float v[kRowGroup], wv[kRowGroup];
      loadGroup<S>(xr, j0, n, v);
      loadGroup<S>(w, j0, n, wv, 1.0f);
      FSDPRT_GROUP_FOR(i, n)
        v[i] = v[i] * rstd * wv[i];
      storeGroup<S>(y + r * d, j0, n, v);
    });
  }
}

/// dx = rstd * g - x * rstd^3 * mean(g * x) with g = dy * w.
template <typename S>
__global__ void rmsNormRowsBackwardKernel(const typename S::T *x,
                                          const typename S::T *w,
                                          const typename S::T *dy,
                                          typename S::T *dx, float *rstd,
                                          int64_t rows, int64_t d, float eps) {
  FSDPRT_WARP_ROW_STRIDE(r, rows) {
    const typename S::T *xr = x + r * d, *dyr = dy + r * d;
    float rs = blockRmsRstd<S>(xr, d, eps);
    if (threadIdx.x % kWarp == 0)
      rstd[r] = rs;
    if (!dx)
      continue;
    float xv[kRowGroup], gv[kRowGroup], wv[kRowGroup];
    auto group = [&](int64_t j0, int64_t n) {
      loadGroup<S>(xr, j0, n, xv);
      loadGroup<S>(dyr, j0, n, gv);
      loadGroup<S>(w, j0, n, wv, 1.0f);
      FSDPRT_GROUP_FOR(i, n)
        gv[i] *= wv[i];
    };
    double sgx = 0.0;
    forWarpGroups(d, [&](int64_t j0, int64_t n) {
      group(j0, n);
      FSDPRT_GROUP_FOR(i, n)
        sgx += static_cast<double>(gv[i]) * xv[i];
    });
    float c = static_cast<float>(warpSum(sgx) / d) * rs * rs * rs;
    forWarpGroups(d, [&](int64_t j0, int64_t n) {
      group(j0, n);
      FSDPRT_GROUP_FOR(i, n)
        gv[i] = rs * gv[i] - xv[i] * c;
      storeGroup<S>(dx + r * d, j0, n, gv);
    });
  }
}

} // namespace

void layerNormForward(Stream s, DType dt, const void *x, const void *w,
                      const void *b, void *y, int64_t rows, int64_t d,
                      float eps) {
  if (residentNormFits(d))
    return residentNormForward(s, dt, true, x, w, b, y, rows, d, eps);
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_WARP_ROWS(layerNormRowsKernel<S>, rows, s,
                       static_cast<const T *>(x), static_cast<const T *>(w),
                       static_cast<const T *>(b), static_cast<T *>(y), rows, d,
                       eps);
  });
}

void layerNormRowsBackward(Stream s, DType dt, const void *x, const void *w,
                           const void *dy, void *dx, float *mean, float *rstd,
                           int64_t rows, int64_t d, float eps) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_WARP_ROWS(layerNormRowsBackwardKernel<S>, rows, s,
                       static_cast<const T *>(x), static_cast<const T *>(w),
                       static_cast<const T *>(dy), static_cast<T *>(dx), mean,
                       rstd, rows, d, eps);
  });
}

void rmsNormForward(Stream s, DType dt, const void *x, const void *w, void *y,
                    int64_t rows, int64_t d, float eps) {
  if (residentNormFits(d))
    return residentNormForward(s, dt, false, x, w, nullptr, y, rows, d, eps);
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_WARP_ROWS(rmsNormRowsKernel<S>, rows, s,
                       static_cast<const T *>(x), static_cast<const T *>(w),
                       static_cast<T *>(y), rows, d, eps);
  });
}

void rmsNormRowsBackward(Stream s, DType dt, const void *x, const void *w,
                         const void *dy, void *dx, float *rstd, int64_t rows,
                         int64_t d, float eps) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_WARP_ROWS(rmsNormRowsBackwardKernel<S>, rows, s,
                       static_cast<const T *>(x), static_cast<const T *>(w),
                       static_cast<const T *>(dy), static_cast<T *>(dx), rstd,
                       rows, d, eps);
  });
}

void crossEntropyRowTerms(Stream s, DType dt, bool i32, const void *logits,
                          const void *targets, double *terms, LogitRows rows,
                          int64_t ignoreIndex) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH_ROWS(crossEntropyTermsKernel<S>, rows.n, s, i32,
                       static_cast<const typename S::T *>(logits), targets,
                       terms, rows, ignoreIndex);
  });
}

void crossEntropyRowTermsAndGrad(Stream s, DType dt, bool i32,
                                 const void *logits, const void *targets,
                                 const int64_t *count, const float *dloss,
                                 double *terms, void *dlogits, LogitRows rows,
                                 bool mean, int64_t ignoreIndex) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH_ROWS(crossEntropyTermsAndGradKernel<S>, rows.n, s, i32,
                       static_cast<const typename S::T *>(logits), targets,
                       count, dloss, terms,
                       static_cast<typename S::T *>(dlogits), rows, mean,
                       ignoreIndex);
  });
}

void crossEntropyBackward(Stream s, DType dt, DType targetType,
                          const void *logits, const void *targets,
                          const int64_t *count, const float *dloss,
                          void *dlogits, LogitRows rows,
                          LossReduction reduction, int64_t ignoreIndex) {
  crossEntropyRowTermsAndGrad(s, dt, targetType == DType::I32, logits, targets,
                              count, dloss, nullptr, dlogits, rows,
                              reduction == LossReduction::Mean, ignoreIndex);
}

void softmaxForward(Stream s, const float *x, float *y, int64_t outer,
                    int64_t dim, int64_t inner) {
  FSDPRT_LAUNCH_ROWS(softmaxRowsKernel, outer * inner, s, x, y, outer * inner,
                     dim, inner);
}

void softmaxBackward(Stream s, const float *y, const float *dy, float *dx,
                     int64_t outer, int64_t dim, int64_t inner) {
  FSDPRT_LAUNCH_ROWS(softmaxBackwardRowsKernel, outer * inner, s, y, dy, dx,
                     outer * inner, dim, inner);
}

void maskedSoftmaxRows(Stream s, float *p, int64_t rows, int64_t tq,
                       int64_t tk, bool causal, float *lse,
                       int64_t lseBatchStride) {
  FSDPRT_LAUNCH_ROWS(attentionRowsKernel, rows, s, p, rows, tq, tk, causal,
                     lse, lseBatchStride, AttentionRowsMode::Softmax);
}

void maskedLogSumExpRows(Stream s, const float *p, int64_t rows, int64_t tq,
                         int64_t tk, bool causal, float *lse,
                         int64_t lseBatchStride) {
  FSDPRT_LAUNCH_ROWS(attentionRowsKernel, rows, s, const_cast<float *>(p),
                     rows, tq, tk, causal, lse, lseBatchStride,
                     AttentionRowsMode::StatsOnly);
}

void maskedExpRows(Stream s, float *p, int64_t rows, int64_t tq, int64_t tk,
                   bool causal, const float *lse, int64_t lseBatchStride) {
  FSDPRT_LAUNCH_ROWS(attentionRowsKernel, rows, s, p, rows, tq, tk, causal,
                     const_cast<float *>(lse), lseBatchStride,
                     AttentionRowsMode::FromStats);
}

void softmaxBackwardRows(Stream s, const float *p, float *dp, int64_t rows,
                         int64_t tk) {
  FSDPRT_LAUNCH_ROWS(softmaxBackwardRowsKernel, rows, s, p, dp, dp, rows, tk,
                     int64_t(1));
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
