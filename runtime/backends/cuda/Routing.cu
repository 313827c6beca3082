//===- Routing.cu - mixture-of-experts routing kernels --------------------===//
//
// Top-k (a thread per row), the stable sort (a thread per element, which
// counts the elements before it: its place), histc (a thread per bin) and
// the inverse permutation, in the orders of math/Routing.h, so results
// equal the CPU backend's. No atomics: the same bits every run.
//
// The grouped GEMM's segment ends are device values (the router's counts),
// so the kernels read them on the device: a thread per output element finds
// its group and sums in a fixed order. No host synchronisation, so a step
// with experts still captures as one CUDA graph; cuBLAS's grouped GEMMs
// take their sizes from the host and would need one. Offsets out of
// [0, rows] are reported by the index check; out-of-order ends are clamped
// (math/Routing.h's segmentEnd) rather than detected.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include "fsdp/rt/math/Routing.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// k passes over each row, each taking the first element in top-k order
/// that comes after the one taken before.
template <typename S>
__global__ void topkKernel(const typename S::T *x, typename S::T *values,
                           int64_t *indices, int64_t rows, int64_t n,
                           int64_t k) {
  FSDPRT_GRID_STRIDE(r, rows) {
    const typename S::T *row = x + r * n;
    int64_t prev = -1;
    for (int64_t j = 0; j < k; ++j) {
      int64_t best = -1;
      for (int64_t i = 0; i < n; ++i) {
        float v = S::load(row[i]);
        if (prev >= 0 && !topkBefore(S::load(row[prev]), prev, v, i))
          continue; // taken already
        if (best < 0 || topkBefore(v, i, S::load(row[best]), best))
          best = i;
      }
      values[r * k + j] = row[best];
      indices[r * k + j] = best;
      prev = best;
    }
  }
}

/// Element i of its row goes to the place of the count of elements before
/// it in the stable order.
template <typename T, typename Load>
__global__ void sortKernel(const T *x, T *values, int64_t *indices,
                           int64_t rows, int64_t n, Load load) {
  FSDPRT_GRID_STRIDE(e, rows * n) {
    int64_t r = e / n, i = e - r * n;
    const T *row = x + r * n;
    auto v = load(row[i]);
    int64_t place = 0;
    for (int64_t j = 0; j < n; ++j)
      place += sortBefore(load(row[j]), j, v, i);
    values[r * n + place] = row[i];
    indices[r * n + place] = i;
  }
}

template <typename S>
__global__ void histcKernel(const typename S::T *x, typename S::T *y,
                            int64_t numel, int64_t bins, double lo, double hi) {
  FSDPRT_GRID_STRIDE(b, bins) {
    int64_t count = 0;
    for (int64_t i = 0; i < numel; ++i)
      count += histcBin(S::load(x[i]), bins, lo, hi) == b;
    y[b] = S::store(static_cast<float>(count));
  }
}

/// Entries outside [0, n) are skipped (the index check reports them).
template <typename I>
__global__ void invertPermutationKernel(const I *p, I *y, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t v = p[i];
    if (v >= 0 && v < n)
      y[v] = static_cast<I>(i);
  }
}

/// Reads segment ends of either index type.
struct Ends {
  bool i32;
  const void *offsets;
  __device__ int64_t operator()(int64_t g) const {
    return loadIndex(i32, offsets, g);
  }
};

/// y[r, c] = x[r, :] · w[group of r][:, c], 0 past the last segment.
template <typename S>
__global__ void groupedForwardKernel(const typename S::T *x,
                                     const typename S::T *w, Ends ends,
                                     typename S::T *y, GroupedDims d) {
  FSDPRT_GRID_STRIDE(e, d.rows * d.n) {
    int64_t r = e / d.n, c = e - r * d.n;
    int64_t g = groupOfRow(ends, d.groups, d.rows, r);
    float acc = 0.0f;
    if (g >= 0)
      for (int64_t j = 0; j < d.k; ++j)
        acc += S::load(x[r * d.k + j]) * S::load(w[(g * d.k + j) * d.n + c]);
    y[e] = S::store(acc);
  }
}

/// dw[g, j, c] = sum over rows r of segment g of x[r, j] · dy[r, c].
template <typename S>
__global__ void groupedWeightGradKernel(const typename S::T *x,
                                        const typename S::T *dy, Ends ends,
                                        typename S::T *dw, GroupedDims d) {
  FSDPRT_GRID_STRIDE(e, d.groups * d.k * d.n) {
    int64_t g = e / (d.k * d.n), rest = e - g * d.k * d.n;
    int64_t j = rest / d.n, c = rest - j * d.n, begin, end;
    segmentOf(ends, g, d.rows, begin, end);
    float acc = 0.0f;
    for (int64_t r = begin; r < end; ++r)
      acc += S::load(x[r * d.k + j]) * S::load(dy[r * d.n + c]);
    dw[e] = S::store(acc);
  }
}

} // namespace

void topkForward(Stream s, DType dt, const void *x, void *values,
                 int64_t *indices, int64_t rows, int64_t n, int64_t k) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(topkKernel<S>, rows, s, static_cast<const T *>(x),
                  static_cast<T *>(values), indices, rows, n, k);
  });
}

namespace {
struct SameIndex {
  template <typename I> FSDPRT_HD I operator()(I v) const { return v; }
};
template <typename S> struct LoadStorage {
  FSDPRT_HD float operator()(typename S::T v) const { return S::load(v); }
};
} // namespace

void sortForward(Stream s, DType dt, const void *x, void *values,
                 int64_t *indices, int64_t rows, int64_t n) {
  int64_t total = rows * n;
  if (dt == DType::I32 || dt == DType::I64) {
    if (dt == DType::I32)
      FSDPRT_LAUNCH((sortKernel<int32_t, SameIndex>), total, s,
                    static_cast<const int32_t *>(x),
                    static_cast<int32_t *>(values), indices, rows, n,
                    SameIndex{});
    else
      FSDPRT_LAUNCH((sortKernel<int64_t, SameIndex>), total, s,
                    static_cast<const int64_t *>(x),
                    static_cast<int64_t *>(values), indices, rows, n,
                    SameIndex{});
    return;
  }
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH((sortKernel<T, LoadStorage<S>>), total, s,
                  static_cast<const T *>(x), static_cast<T *>(values), indices,
                  rows, n, LoadStorage<S>{});
  });
}

void histc(Stream s, DType dt, const void *x, void *y, int64_t numel,
           int64_t bins, double min, double max) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(histcKernel<S>, bins, s, static_cast<const T *>(x),
                  static_cast<T *>(y), numel, bins, min, max);
  });
}

void invertPermutation(Stream s, DType dt, const void *p, void *y, int64_t n) {
  if (dt == DType::I32)
    FSDPRT_LAUNCH(invertPermutationKernel<int32_t>, n, s,
                  static_cast<const int32_t *>(p), static_cast<int32_t *>(y),
                  n);
  else
    FSDPRT_LAUNCH(invertPermutationKernel<int64_t>, n, s,
                  static_cast<const int64_t *>(p), static_cast<int64_t *>(y),
                  n);
}

void groupedMatmulForward(Stream s, DType dt, DType offsetsType, const void *x,
                          const void *w, const void *offsets, void *y,
                          const GroupedDims &d) {
  Ends ends{offsetsType == DType::I32, offsets};
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(groupedForwardKernel<S>, d.rows * d.n, s,
                  static_cast<const T *>(x), static_cast<const T *>(w), ends,
                  static_cast<T *>(y), d);
  });
}

void groupedMatmulBackwardWeight(Stream s, DType dt, DType offsetsType,
                                 const void *x, const void *dy,
                                 const void *offsets, void *dw,
                                 const GroupedDims &d) {
  Ends ends{offsetsType == DType::I32, offsets};
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(groupedWeightGradKernel<S>, d.groups * d.k * d.n, s,
                  static_cast<const T *>(x), static_cast<const T *>(dy), ends,
                  static_cast<T *>(dw), d);
  });
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
