//===- Routing.cu - mixture-of-experts routing kernels --------------------===//
//
// Top-k (a thread per row), the stable sort (a thread per element, which
// counts the elements before it: its place), histc (a thread per bin) and
// the inverse permutation, in the orders of math/Routing.h, so results
// equal the CPU backend's. No atomics: the same bits every run.
//
// The grouped GEMM's segment ends are device values (the router's counts),
// so the kernels read them on the device: a block per output tile finds its
// segment and sums in a fixed order. No host synchronisation, so a step
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

/// The grouped GEMMs in kTile x kTile output tiles: a block's threads stage
/// a kTile-deep slice of each operand in shared memory and each adds its
/// outputs' products over it (an output's sum runs over k, or over the
/// segment's rows, in order: the same bits every run). A block of the
/// host emulation is one thread, which does the whole tile.
constexpr int64_t kTile = 16;
static_assert(kTile * kTile == kThreads, "one output of a tile per thread");

/// Row tile `t` of the segments taken in order (each segment's rows split
/// into tiles of kTile, its last one shorter): its group and rows
/// [r0, rEnd); false past the last tile.
__device__ bool rowTileOf(Ends ends, const GroupedDims &d, int64_t t,
                          int64_t &g, int64_t &r0, int64_t &rEnd) {
  int64_t passed = 0, reach = 0;
  for (g = 0; g < d.groups; ++g) {
    int64_t e = segmentEnd(ends, g, d.rows);
    int64_t begin = reach;
    reach = e > reach ? e : reach;
    int64_t tiles = (reach - begin + kTile - 1) / kTile;
    if (t < passed + tiles) {
      r0 = begin + (t - passed) * kTile;
      rEnd = r0 + kTile < reach ? r0 + kTile : reach;
      return true;
    }
    passed += tiles;
  }
  return false;
}

/// acc[i * kTile + j] += sum over t < kTile of a(i, t) * b(t, j), t in
/// order: one tile's products over the staged slices.
template <typename A, typename B>
__device__ void accumulateTile(float *acc, A a, B b) {
  FSDPRT_COL_STRIDE(o, kTile * kTile) {
    int64_t i = o / kTile, j = o % kTile;
    float sum = acc[o];
    for (int64_t t = 0; t < kTile; ++t)
      sum += a(i, t) * b(t, j);
    acc[o] = sum;
  }
}

/// y[r, c] = x[r, :] · w[group of r][:, c] over the row tiles of the
/// segments (an upper bound of them: ceil(rows / kTile) + groups) times the
/// column tiles.
template <typename S>
__global__ void groupedForwardKernel(const typename S::T *x,
                                     const typename S::T *w, Ends ends,
                                     typename S::T *y, GroupedDims d,
                                     int64_t colTiles, int64_t tiles) {
  __shared__ float xs[kTile][kTile + 1], ws[kTile][kTile + 1];
  __shared__ float acc[kTile * kTile];
  FSDPRT_ROW_STRIDE(b, tiles) {
    int64_t g, r0, rEnd, c0 = (b % colTiles) * kTile;
    if (!rowTileOf(ends, d, b / colTiles, g, r0, rEnd))
      continue; // the same for the whole block
    FSDPRT_COL_STRIDE(o, kTile * kTile) { acc[o] = 0.0f; }
    for (int64_t k0 = 0; k0 < d.k; k0 += kTile) {
      FSDPRT_COL_STRIDE(o, kTile * kTile) {
        int64_t i = o / kTile, j = o % kTile;
        xs[i][j] = r0 + i < rEnd && k0 + j < d.k
                       ? S::load(x[(r0 + i) * d.k + k0 + j])
                       : 0.0f;
        ws[i][j] = k0 + i < d.k && c0 + j < d.n
                       ? S::load(w[(g * d.k + k0 + i) * d.n + c0 + j])
                       : 0.0f;
      }
      __syncthreads();
      accumulateTile(
          acc, [&](int64_t i, int64_t t) { return xs[i][t]; },
          [&](int64_t t, int64_t j) { return ws[t][j]; });
      __syncthreads(); // before the next slices overwrite xs and ws
    }
    FSDPRT_COL_STRIDE(o, kTile * kTile) {
      int64_t r = r0 + o / kTile, c = c0 + o % kTile;
      if (r < rEnd && c < d.n)
        y[r * d.n + c] = S::store(acc[o]);
    }
  }
}

/// Rows past the last segment belong to no group: 0.
template <typename T>
__global__ void groupedTailKernel(Ends ends, T *y, GroupedDims d) {
  FSDPRT_GRID_STRIDE(e, d.rows * d.n) {
    if (groupOfRow(ends, d.groups, d.rows, e / d.n) < 0)
      y[e] = T(0);
  }
}

/// dw[g, j, c] = sum over rows r of segment g of x[r, j] · dy[r, c], in
/// tiles of (j, c) per group, the segment's rows kTile at a time.
template <typename S>
__global__ void groupedWeightGradKernel(const typename S::T *x,
                                        const typename S::T *dy, Ends ends,
                                        typename S::T *dw, GroupedDims d,
                                        int64_t kTiles, int64_t nTiles) {
  __shared__ float xs[kTile][kTile + 1], dys[kTile][kTile + 1];
  __shared__ float acc[kTile * kTile];
  FSDPRT_ROW_STRIDE(b, d.groups * kTiles * nTiles) {
    int64_t g = b / (kTiles * nTiles), rest = b % (kTiles * nTiles);
    int64_t j0 = rest / nTiles * kTile, c0 = rest % nTiles * kTile;
    int64_t begin, end;
    segmentOf(ends, g, d.rows, begin, end);
    FSDPRT_COL_STRIDE(o, kTile * kTile) { acc[o] = 0.0f; }
    for (int64_t r0 = begin; r0 < end; r0 += kTile) {
      FSDPRT_COL_STRIDE(o, kTile * kTile) {
        int64_t i = o / kTile, j = o % kTile;
        bool row = r0 + i < end;
        xs[i][j] =
            row && j0 + j < d.k ? S::load(x[(r0 + i) * d.k + j0 + j]) : 0.0f;
        dys[i][j] =
            row && c0 + j < d.n ? S::load(dy[(r0 + i) * d.n + c0 + j]) : 0.0f;
      }
      __syncthreads();
      accumulateTile(
          acc, [&](int64_t j, int64_t t) { return xs[t][j]; },
          [&](int64_t t, int64_t c) { return dys[t][c]; });
      __syncthreads(); // before the next rows overwrite xs and dys
    }
    FSDPRT_COL_STRIDE(o, kTile * kTile) {
      int64_t j = j0 + o / kTile, c = c0 + o % kTile;
      if (j < d.k && c < d.n)
        dw[(g * d.k + j) * d.n + c] = S::store(acc[o]);
    }
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
  int64_t colTiles = (d.n + kTile - 1) / kTile;
  int64_t rowTiles = (d.rows + kTile - 1) / kTile + d.groups;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_BLOCKS(groupedForwardKernel<S>, rowTiles * colTiles, s,
                         static_cast<const T *>(x), static_cast<const T *>(w),
                         ends, static_cast<T *>(y), d, colTiles,
                         rowTiles * colTiles);
    FSDPRT_LAUNCH(groupedTailKernel<T>, d.rows * d.n, s, ends,
                  static_cast<T *>(y), d);
  });
}

void groupedMatmulBackwardWeight(Stream s, DType dt, DType offsetsType,
                                 const void *x, const void *dy,
                                 const void *offsets, void *dw,
                                 const GroupedDims &d) {
  Ends ends{offsetsType == DType::I32, offsets};
  int64_t kTiles = (d.k + kTile - 1) / kTile,
          nTiles = (d.n + kTile - 1) / kTile;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH_BLOCKS(groupedWeightGradKernel<S>, d.groups * kTiles * nTiles,
                         s, static_cast<const T *>(x),
                         static_cast<const T *>(dy), ends, static_cast<T *>(dw),
                         d, kTiles, nTiles);
  });
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
