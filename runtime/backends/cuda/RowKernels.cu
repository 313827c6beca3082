//===- RowKernels.cu - Row-parallel norms, softmax and cross-entropy ------===//
//
// layer_norm and rms_norm rows (their weight gradients are column sums in
// Reductions.cu), softmax and attention rows, cross-entropy rows.
// Softmax runs one 256-thread block per row, its threads striding across
// the row, sums reduced in double through a fixed shared-memory tree:
// every row keeps the whole GPU busy at attention's widths (T up to 32k)
// where one thread per row left most SMs idle. Cross-entropy runs one
// 1024-thread block per row (vocabularies of 50k) holding the row in
// registers, so that the loss and gradient read it from DRAM once, sums
// reduced through fixed shuffle trees. Norm rows (a few thousand wide) run
// one warp per row, sums through a fixed shuffle tree. Either way the
// result does not depend on scheduling (the same bits run to run); the
// order differs from the CPU's index order only in how the partial sums
// are added.
//
//===----------------------------------------------------------------------===//
#include "CrossEntropyLean.h"
#include "KernelSupport.cuh"
#include "Kernels.h"
#include "RowGroups.cuh"

#include "fsdp/rt/math/Pointwise.h"

#ifndef FSDPRT_CUDA_EMULATION
#include <cuda_bf16.h>
#endif

#include <cmath>
#include <cstring>
#include <type_traits>

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

// Cross-entropy rows (a vocabulary wide: GPT-2's 50304 bf16 logits are
// 100 KB) run one 1024-thread block per row. Each thread keeps its groups
// of the row in registers, loaded all at once, so that the gradient pass
// reads no memory: the row crosses DRAM once each way, the bandwidth
// ceiling. Rows too wide for the registers stream through memory twice
// (the log-sum-exp in one read, the gradient in a second) with the same
// arithmetic in the same order: the same bits whichever form runs.

/// The log-sum-exp of a row in one read: each thread keeps a running max
/// and its sum of exp(x - max) over the groups it owns, in order (rescaled
/// when a group raises the max), and the block combines them at the row's
/// max. A group's (at most 8) terms, each <= 1, are summed in f32 (a few
/// 1e-7 of the group's sum) and the groups' sums in double: one f32 to f64
/// conversion and one double add per 8 elements rather than per element
/// (on sm_90 conversions run at 1/8 of the f32 rate, double adds at 1/2).
struct OnlineLogSumExp {
  /// exp(x) as fastExp2(x * log2(e)), an FMUL and one instruction where
  /// expf's accurate range reduction took about ten and exp2f's subnormal
  /// handling four, twice per element (here and the gradient): the kernel
  /// was issue-bound (an H200 profile: SM 66-85% busy, DRAM 22-42%). The
  /// difference from the max is taken first, so the scaling's rounding is
  /// relative to it (a few 1e-7 of a term). Results below 2^-126 (terms
  /// 1e-38 of the max) flush to 0.

  float m = -INFINITY;
  double sum = 0.0;

  template <typename N> __device__ void add(const float *v, N n) {
    float gm = m;
    FSDPRT_GROUP_FOR(i, n) { gm = fmaxf(gm, v[i]); }
    if (gm > m) {
      sum *= expf(m - gm); // 0 while m is -inf
      m = gm;
    }
    if (m == -INFINITY) { // -inf adds exp(-inf) = 0; NaN (fmaxf skips it)
      FSDPRT_GROUP_FOR(i, n) {
        if (v[i] != v[i])
          sum = NAN;
      }
      return;
    }
    float group = 0.0f;
    FSDPRT_GROUP_FOR(i, n) { group += fastExp2((v[i] - m) * kLog2e); }
    sum += group;
  }

  /// The row's max and log(sum(exp(x - max))) (every thread of the block).
  __device__ void finish(float &max, float &logSum) const {
    max = wideBlockReduce(m, Max{});
    // A thread that saw only -inf (or nothing) adds 0, one that saw a NaN
    // NaN.
    double rescaled = m == -INFINITY ? sum : sum * expf(m - max);
    logSum = logf(static_cast<float>(wideBlockReduce(rescaled, Add{})));
  }
};

/// A group's elements in their storage type, as loaded (16 bytes of bf16 /
/// f16, 32 of f32), in 32-bit words: a held row costs registers at its
/// storage width (as 16-bit elements, the compiler gave each its own
/// register and spilled), and widening bf16 to f32 is a shift.
template <typename T> struct RawGroup {
  static constexpr int kWords = kRowGroup * sizeof(T) / 4;
  static constexpr int kPacks = kWords / 4;
  static_assert(sizeof(T) == 2 || sizeof(T) == 4, "16- or 32-bit elements");
  uint32_t w[kWords];

  __device__ T at(int i) const {
    T x;
    if constexpr (sizeof(T) == 4)
      std::memcpy(&x, &w[i], 4);
    else
      x = static_cast<T>(w[i / 2] >> (16 * (i % 2)));
    return x;
  }
  __device__ void set(int i, T x) {
    if constexpr (sizeof(T) == 4)
      std::memcpy(&w[i], &x, 4);
    else
      w[i / 2] |= static_cast<uint32_t>(x) << (16 * (i % 2));
  }
};

/// Elements [j0, j0 + n) of p (n <= kRowGroup), in whole packs where the
/// group is complete and aligned.
template <typename T>
__device__ RawGroup<T> loadRawGroup(const T *p, int64_t j0, int64_t n) {
  RawGroup<T> g{};
  if (n == kRowGroup && packAligned(p + j0)) {
#pragma unroll
    for (int k = 0; k < RawGroup<T>::kPacks; ++k) {
      Pack<T> pack = loadPack(p + j0, k);
      std::memcpy(&g.w[4 * k], &pack, sizeof pack);
    }
  } else {
    FSDPRT_GROUP_FOR(i, n) { g.set(i, p[j0 + i]); }
  }
  return g;
}

/// f(n) for a group of n elements, n a compile-time kRowGroup for a
/// complete group: its loops then carry no per-element bound checks (the
/// kernel was issue-bound on integer work).
template <typename F> __device__ void withGroupSize(int64_t n, F f) {
  if (n == kRowGroup)
    f(std::integral_constant<int, kRowGroup>{});
  else
    f(n);
}

/// Stores a complete, aligned group of finite bf16 results rounded by the
/// hardware (cvt.rn.bf16x2.f32, one instruction per two elements, where
/// Bf16Storage::store's bit arithmetic takes about seven per element to
/// also keep a NaN's sign): the same bits for finite values. False where
/// it does not apply (other types, the host emulation).
template <typename S>
__device__ bool storeFiniteBf16Group(typename S::T *p, int64_t j0,
                                     const float *v) {
#ifdef FSDPRT_CUDA_EMULATION
  return false;
#else
  if constexpr (!std::is_same<S, Bf16Storage>::value) {
    return false;
  } else {
    if (!packAligned(p + j0))
      return false;
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      __nv_bfloat162 h = __floats2bfloat162_rn(v[2 * k], v[2 * k + 1]);
      std::memcpy(&w[k], &h, 4);
    }
    Pack<uint16_t> pack;
    std::memcpy(&pack, w, sizeof pack);
    storePack(p + j0, 0, pack);
    return true;
  }
#endif
}

/// Packs of logits a thread keeps in registers: 7 x 4 of the 64 registers
/// a thread of a 1024-thread block may use, the rest left to the
/// arithmetic (spills would cost more than a second read). A bf16 / f16
/// row of up to 7 x 8 x 1024 = 57344 elements is held, an f32 row of up to
/// 3 x 8 x 1024 = 24576; under the host emulation (one thread) 56 and 24.
/// (f16 rows stream: see launchCrossEntropyRows.)
constexpr int kHeldPacks = 7;

/// Cross-entropy rows: `terms` (where given) gets each row's
/// max + log(sum(exp(x - max))) - x[target], `dlogits` (where given) the
/// gradient (softmax(x) - onehot(target)) * dloss (/ count for a mean),
/// computed in f32 and rounded once to the storage type; padding columns
/// get 0. dlogits may be logits: each thread reads the target's logit
/// before the reductions' barriers and writes only the elements it read.
///
/// kHeld > 0 (the row has at most kHeld groups per thread): the thread's
/// groups are loaded up front into registers (~112 bytes in flight per
/// thread, where a group at a time kept the loads' latency exposed) and
/// both passes read them there. kHeld = 0: both passes read memory.
/// One block per SM at 64 registers: 1024 threads keep enough loads in
/// flight to cover DRAM latency (__launch_bounds__ holds the budget); a
/// streaming block keeps to 32 registers, two to an SM.
template <typename S, int kHeld>
__global__ void __launch_bounds__(kWideThreads, kHeld > 0 ? 1 : 2)
    crossEntropyRowsKernel(bool i32, const typename S::T *logits,
                           const void *targets, const int64_t *count,
                           const float *dloss, double *terms,
                           typename S::T *dlogits, LogitRows rows, bool mean,
                           int64_t ignoreIndex) {
  using T = typename S::T;
  const int64_t c = rows.c;
  float g = !dlogits ? 0.0f
            : mean   ? *dloss / static_cast<float>(*count)
                     : *dloss;
  // Group k of this thread held: elements [start(k), start(k) + size(j0))
  // of c; int indices, as a held row is at most kHeld * kRowGroup *
  // kWideThreads wide (fewer registers than int64_t).
  auto start = [&](int k) {
    return static_cast<int>((threadIdx.x + k * blockDim.x) * kRowGroup);
  };
  auto size = [&](int j0) {
    return static_cast<int>(c) - j0 < kRowGroup ? static_cast<int>(c) - j0
                                                : kRowGroup;
  };
  FSDPRT_ROW_STRIDE(r, rows.n) {
    const T *xr = logits + r * rows.width;
    T *dr = dlogits ? dlogits + r * rows.width : nullptr;
    if (dr) {
      FSDPRT_COL_STRIDE(j, rows.width - c) { dr[c + j] = S::store(0.0f); }
    }
    int64_t t = loadIndex(i32, targets, r);
    // The CPU skips an ignored row; adding +0.0 is the same. A target out
    // of range is reported by the index check; nothing outside is read.
    if (t == ignoreIndex || t < 0 || t >= c) {
      if (terms && threadIdx.x == 0)
        terms[r] = 0.0;
      if (dr) {
        FSDPRT_COL_STRIDE(j, c) { dr[j] = S::store(0.0f); }
      }
      continue;
    }
    float target = S::load(xr[t]);
    RawGroup<T> held[kHeld > 0 ? kHeld : 1];
    float v[kRowGroup];
    OnlineLogSumExp lse;
    if constexpr (kHeld > 0) {
#pragma unroll
      for (int k = 0; k < kHeld; ++k) {
        int j0 = start(k);
        if (j0 < c)
          held[k] = loadRawGroup(xr, j0, size(j0));
      }
    }
    // f(j0, n) for each of this thread's groups in order, v holding the
    // group's elements (read from the registers where held, else memory).
    auto forEachGroup = [&](auto f) {
      if constexpr (kHeld > 0) {
#pragma unroll
        for (int k = 0; k < kHeld; ++k) {
          int j0 = start(k);
          if (j0 < c)
            withGroupSize(size(j0), [&](auto n) {
              FSDPRT_GROUP_FOR(i, n) { v[i] = S::load(held[k].at(i)); }
              f(int64_t(j0), n);
            });
        }
      } else {
        forBlockGroups(c, [&](int64_t j0, int64_t len) {
          withGroupSize(len, [&](auto n) {
            loadGroup<S>(xr, j0, n, v);
            f(j0, n);
          });
        });
      }
    };
    forEachGroup([&](int64_t, auto n) { lse.add(v, n); });
    float max, logSum;
    lse.finish(max, logSum);
    if (terms && threadIdx.x == 0)
      terms[r] = static_cast<double>(max) + logSum - target;
    if (!dr)
      continue;
    // p = exp(x - max - logSum) = exp2((x - max) * log2(e) - logSum2).
    float logSum2 = logSum * kLog2e;
    // Every gradient of the row is finite unless max, logSum or g is not
    // (a NaN logit makes the sum NaN, +inf the max).
    bool finite =
        std::isfinite(max) && std::isfinite(logSum) && std::isfinite(g);
    auto storeGrad = [&](int64_t j0, auto n) {
      int64_t tj = t - j0; // the target's place in the group, if there
      int ti = tj >= 0 && tj < n ? static_cast<int>(tj) : -1;
      FSDPRT_GROUP_FOR(i, n) {
        float p = fastExp2(fmaf(v[i] - max, kLog2e, -logSum2));
        v[i] = (i == ti ? p - 1.0f : p) * g;
      }
      if (n != kRowGroup || !finite || !storeFiniteBf16Group<S>(dr, j0, v))
        storeGroup<S>(dr, j0, n, v);
    };
    forEachGroup(storeGrad);
  }
}

/// crossEntropyRowsKernel over rows.n rows, held in registers where the
/// row fits.
template <typename S>
void launchCrossEntropyRows(Stream s, bool i32, const void *logits,
                            const void *targets, const int64_t *count,
                            const float *dloss, double *terms, void *dlogits,
                            LogitRows rows, bool mean, int64_t ignoreIndex) {
  using T = typename S::T;
  // f16's widening (software, shared with the CPU) needs the registers a
  // held row would take (it spilled): f16 rows stream.
  constexpr int kHeld =
      std::is_same<S, F16Storage>::value ? 0 : kHeldPacks / RawGroup<T>::kPacks;
  int64_t groups = (rows.c + kRowGroup - 1) / kRowGroup;
  // The loss alone reads each element once either way: it streams, two
  // blocks to an SM (32 registers), so that one block's loads overlap the
  // other's arithmetic, where a held row's 64 registers allow one block.
  bool held = dlogits && groups <= int64_t(kHeld) * kWideThreads;
  auto *crossEntropyRows =
      held ? crossEntropyRowsKernel<S, kHeld> : crossEntropyRowsKernel<S, 0>;
  FSDPRT_LAUNCH_WIDE_ROWS(
      crossEntropyRows, rows.n, s, i32, static_cast<const T *>(logits), targets,
      count, dloss, terms, static_cast<T *>(dlogits), rows, mean, ignoreIndex);
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

/// One row of layer_norm by a warp: the unfused and the fused (add)
/// forward share it.
template <typename S>
__device__ void layerNormRow(const typename S::T *xr, const typename S::T *w,
                             const typename S::T *b, typename S::T *yr,
                             int64_t d, float eps) {
  float mean, rstd;
  blockMeanRstd<S>(xr, d, eps, mean, rstd);
  forWarpGroups(d, [&](int64_t j0, int64_t n) {
    float v[kRowGroup], wv[kRowGroup], bv[kRowGroup];
    loadGroup<S>(xr, j0, n, v);
    loadGroup<S>(w, j0, n, wv, 1.0f);
    loadGroup<S>(b, j0, n, bv, 0.0f);
    FSDPRT_GROUP_FOR(i, n)
      v[i] = (v[i] - mean) * rstd * wv[i] + bv[i];
    storeGroup<S>(yr, j0, n, v);
  });
}

template <typename S>
__global__ void layerNormRowsKernel(const typename S::T *x,
                                    const typename S::T *w,
                                    const typename S::T *b, typename S::T *y,
                                    int64_t rows, int64_t d, float eps) {
  FSDPRT_WARP_ROW_STRIDE(r, rows) {
    layerNormRow<S>(x + r * d, w, b, y + r * d, d, eps);
  }
}

/// sum = a + b rounded to storage as the add kernel does, then the row's
/// layer_norm from the stored sum: each lane reads back only the groups it
/// wrote (forWarpGroups), so no barrier, and the bits are those of the two
/// kernels. a and b are read once; the sum is re-read while cache-hot.
template <typename S>
__global__ void addLayerNormRowsKernel(
    const typename S::T *a, const typename S::T *b, const typename S::T *w,
    const typename S::T *bias, typename S::T *sum, typename S::T *y,
    int64_t rows, int64_t d, float eps) {
  FSDPRT_WARP_ROW_STRIDE(r, rows) {
    forWarpGroups(d, [&](int64_t j0, int64_t n) {
      float av[kRowGroup], bv[kRowGroup];
      loadGroup<S>(a + r * d, j0, n, av);
      loadGroup<S>(b + r * d, j0, n, bv);
      FSDPRT_GROUP_FOR(i, n)
        av[i] = binaryApply(FSDPRT_ADD, av[i], bv[i]);
      storeGroup<S>(sum + r * d, j0, n, av);
    });
    layerNormRow<S>(sum + r * d, w, bias, y + r * d, d, eps);
  }
}

/// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * w, plus
/// `addend` when there is one (nn.add_layer_norm_grad): read and added once
/// before dx's single store.
template <typename S>
__global__ void layerNormRowsBackwardKernel(
    const typename S::T *x, const typename S::T *w, const typename S::T *dy,
    const typename S::T *addend, typename S::T *dx, float *mean, float *rstd,
    int64_t rows, int64_t d, float eps) {
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
    // g and xhat of a group (xv becomes xhat, gv g). g is rounded on its
    // own (__fmul_rn: never contracted into the second pass's g - mg), as
    // the lean kernel (LeanNorms.cu) computes it: the same bits.
    auto group = [&](int64_t j0, int64_t n) {
      loadGroup<S>(xr, j0, n, xv);
      loadGroup<S>(dyr, j0, n, gv);
      loadGroup<S>(w, j0, n, wv, 1.0f);
      FSDPRT_GROUP_FOR(i, n) {
        gv[i] = __fmul_rn(gv[i], wv[i]);
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
      if (addend) {
        // The gradient rounded to storage as the unfused kernel stores it,
        // then the add kernel's a + b (binaryApply) as __fadd_rn, which nvcc
        // never contracts with the product above into an FMA.
        float av[kRowGroup];
        loadGroup<S>(addend + r * d, j0, n, av);
        FSDPRT_GROUP_FOR(i, n)
          gv[i] = __fadd_rn(av[i], S::load(S::store(gv[i])));
      }
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
    // g rounded on its own, as in layerNormRowsBackwardKernel.
    auto group = [&](int64_t j0, int64_t n) {
      loadGroup<S>(xr, j0, n, xv);
      loadGroup<S>(dyr, j0, n, gv);
      loadGroup<S>(w, j0, n, wv, 1.0f);
      FSDPRT_GROUP_FOR(i, n)
        gv[i] = __fmul_rn(gv[i], wv[i]);
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
                      float eps, NormKernels kernels) {
  if (kernels == NormKernels::Lean &&
      leanLayerNormForward(s, dt, x, w, b, y, rows, d, eps))
    return;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_WARP_ROWS(layerNormRowsKernel<S>, rows, s,
                       static_cast<const T *>(x), static_cast<const T *>(w),
                       static_cast<const T *>(b), static_cast<T *>(y), rows, d,
                       eps);
  });
}

void addLayerNormForward(Stream s, DType dt, const void *a, const void *b,
                         const void *w, const void *bias, void *sum, void *y,
                         int64_t rows, int64_t d, float eps,
                         NormKernels kernels) {
  if (kernels == NormKernels::Lean &&
      leanAddLayerNormForward(s, dt, a, b, w, bias, sum, y, rows, d, eps))
    return;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_WARP_ROWS(
        addLayerNormRowsKernel<S>, rows, s, static_cast<const T *>(a),
        static_cast<const T *>(b), static_cast<const T *>(w),
        static_cast<const T *>(bias), static_cast<T *>(sum),
        static_cast<T *>(y), rows, d, eps);
  });
}

void layerNormRowsBackward(Stream s, DType dt, const void *x, const void *w,
                           const void *dy, const void *addend, void *dx,
                           float *mean, float *rstd, int64_t rows, int64_t d,
                           float eps, NormKernels kernels) {
  if (kernels == NormKernels::Lean &&
      leanLayerNormRowsBackward(s, dt, x, w, dy, addend, dx, mean, rstd, rows,
                                d, eps))
    return;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_WARP_ROWS(
        layerNormRowsBackwardKernel<S>, rows, s, static_cast<const T *>(x),
        static_cast<const T *>(w), static_cast<const T *>(dy),
        static_cast<const T *>(addend), static_cast<T *>(dx), mean, rstd, rows,
        d, eps);
  });
}

void rmsNormForward(Stream s, DType dt, const void *x, const void *w, void *y,
                    int64_t rows, int64_t d, float eps, NormKernels kernels) {
  if (kernels == NormKernels::Lean &&
      leanRmsNormForward(s, dt, x, w, y, rows, d, eps))
    return;
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
                         int64_t d, float eps, NormKernels kernels) {
  if (kernels == NormKernels::Lean &&
      leanRmsNormRowsBackward(s, dt, x, w, dy, dx, rstd, rows, d, eps))
    return;
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
  if (rows.lean && leanCrossEntropyRows(s, dt, i32, logits, targets, nullptr,
                                        nullptr, terms, nullptr, rows, false,
                                        ignoreIndex))
    return;
  withStorage(dt, [&](auto st) {
    launchCrossEntropyRows<decltype(st)>(s, i32, logits, targets, nullptr,
                                         nullptr, terms, nullptr, rows, false,
                                         ignoreIndex);
  });
}

void crossEntropyRowTermsAndGrad(Stream s, DType dt, bool i32,
                                 const void *logits, const void *targets,
                                 const int64_t *count, const float *dloss,
                                 double *terms, void *dlogits, LogitRows rows,
                                 bool mean, int64_t ignoreIndex) {
  if (rows.lean && leanCrossEntropyRows(s, dt, i32, logits, targets, count,
                                        dloss, terms, dlogits, rows, mean,
                                        ignoreIndex))
    return;
  withStorage(dt, [&](auto st) {
    launchCrossEntropyRows<decltype(st)>(s, i32, logits, targets, count, dloss,
                                         terms, dlogits, rows, mean,
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
