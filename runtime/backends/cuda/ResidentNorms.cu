//===- ResidentNorms.cu - layer_norm / rms_norm rows held in registers ---===//
//
// Norm rows up to kResidentWidth wide (GPT-2 124M's 768, GPT-2 medium's
// 1024), with FSDPRT_NORM_RESIDENT=1 (NormTuning below), are read from
// memory once: each lane of the row's warp keeps its
// groups in registers for the statistics, the output and, in the backward,
// the weight gradients. The streaming kernels (RowKernels.cu, with the
// column sums of Reductions.cu) read a row four times in the forward and
// the backward's x and dy twice more for dw / db, and sat 3.8x (forward)
// and 7.3x (backward) above their bandwidth ceilings on an H200
// (2026-11-28); wider rows still take them.
//
// Sums: a group's 8 terms in f32, then the lane's groups and the warp's
// lanes in f32 (FSDPRT_NORM_SUMS=double: in double), 1/sqrt as rsqrtf;
// the same warp tree every run.
// The backward accumulates dw = sum_r dy * xhat and db = sum_r dy in the
// block that owns a fixed slice of rows (a warp's rows in f32, the warps
// in warp order, then the blocks' partials in double in block order), so
// the bits depend on the shapes only, never on the grid or the device.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "RowGroups.cuh"

#include <algorithm>
#include <cmath>
#include <type_traits>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

constexpr int kMaxResidentGroups = 4; // per lane: 32 floats of a row
constexpr int64_t kResidentWidth =
    int64_t(kMaxResidentGroups) * kWarp * kRowGroup;

/// Lane `lane`'s g-th group of a row starts at groupStart(lane, g).
__device__ inline int64_t groupStart(int lane, int g) {
  return (static_cast<int64_t>(g) * kWarp + lane) * kRowGroup;
}
/// The elements of this lane's G groups in a d-wide row (0 past its end),
/// computed once per kernel: the per-element bounds are `i < len[g]`.
template <int G> struct GroupLengths {
  int len[G];
  __device__ explicit GroupLengths(int64_t d) {
    int lane = threadIdx.x % kWarp;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      int64_t j0 = groupStart(lane, g);
      len[g] =
          j0 >= d ? 0 : static_cast<int>(std::min<int64_t>(d - j0, kRowGroup));
    }
  }
};

/// Loads this lane's G groups of a row into v (zeros past the row's end).
template <typename S, int G>
__device__ void loadRow(const typename S::T *row, const GroupLengths<G> &n,
                        float (&v)[G][kRowGroup]) {
  int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int i = 0; i < kRowGroup; ++i)
      v[g][i] = 0.0f;
    if (n.len[g] > 0)
      loadGroup<S>(row, groupStart(lane, g), n.len[g], v[g]);
  }
}

template <typename S, int G>
__device__ void storeRow(typename S::T *row, const GroupLengths<G> &n,
                         float (&v)[G][kRowGroup]) {
  int lane = threadIdx.x % kWarp;
#pragma unroll
  for (int g = 0; g < G; ++g)
    if (n.len[g] > 0)
      storeGroup<S>(row, groupStart(lane, g), n.len[g], v[g]);
}

template <int G>
__device__ void copyRow(const float (&from)[G][kRowGroup],
                        float (&to)[G][kRowGroup]) {
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < kRowGroup; ++i)
      to[g][i] = from[g][i];
}

/// The mean over the row's d elements of f(g, i), summed over this warp's
/// registers (f must be 0 past the row's end: loadRow zero-fills).
template <typename Acc, int G, typename F>
__device__ float rowMean(F f, int64_t d) {
  Acc lane = 0;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float group = 0.0f;
#pragma unroll
    for (int i = 0; i < kRowGroup; ++i)
      group += f(g, i);
    lane += group;
  }
  return static_cast<float>(warpSum(lane) / static_cast<Acc>(d));
}

/// The row's mean (0 for rms_norm) and 1 / sqrt(variance or mean square +
/// eps), from the registers; xv becomes xhat. Elements past the row's end
/// stay 0 (their xhat too), so they add nothing to later sums.
template <typename Acc, bool kCentered, int G>
__device__ float normalizeRow(float (&xv)[G][kRowGroup],
                              const GroupLengths<G> &n, int64_t d, float eps) {
  float mean = 0.0f;
  if (kCentered)
    mean = rowMean<Acc, G>([&](int g, int i) { return xv[g][i]; }, d);
  float var = rowMean<Acc, G>(
      [&](int g, int i) {
        float c = i < n.len[g] ? xv[g][i] - mean : 0.0f;
        return c * c;
      },
      d);
  float rstd = rsqrtf(var + eps);
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < kRowGroup; ++i)
      xv[g][i] = i < n.len[g] ? (xv[g][i] - mean) * rstd : 0.0f;
  return rstd;
}

/// y = xhat * w + b (w, b null: 1, 0), one warp per row.
template <typename S, int G, bool kCentered, typename Acc>
__global__ void residentNormKernel(const typename S::T *x,
                                   const typename S::T *w,
                                   const typename S::T *b, typename S::T *y,
                                   int64_t rows, int64_t d, float eps) {
  int lane = threadIdx.x % kWarp;
  GroupLengths<G> n(d);
  // The next row's loads are issued before this row's arithmetic: a warp
  // that waited for its row and then computed kept no memory request in
  // flight half the time (the first resident kernels ran at a third of
  // the bandwidth on an H200, as the streaming ones).
  // (FSDPRT_WARP_ROW_STRIDE's rows, walked by hand to know the next one.)
  const int64_t step = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) +
              threadIdx.x / kWarp;
  float next[G][kRowGroup];
  if (r < rows)
    loadRow<S>(x + r * d, n, next);
  for (; r < rows; r += step) {
    float v[G][kRowGroup];
    copyRow(next, v);
    if (r + step < rows)
      loadRow<S>(x + (r + step) * d, n, next);
    normalizeRow<Acc, kCentered>(v, n, d, eps);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      if (n.len[g] == 0)
        continue;
      float wv[kRowGroup], bv[kRowGroup];
      loadGroup<S>(w, groupStart(lane, g), n.len[g], wv, 1.0f);
      loadGroup<S>(b, groupStart(lane, g), n.len[g], bv, 0.0f);
      FSDPRT_GROUP_FOR(i, n.len[g])
      v[g][i] = v[g][i] * wv[i] + bv[i];
    }
    storeRow<S>(y + r * d, n, v);
  }
}

/// Rows [blk * rowsPerBlock, ...) of block slice `blk`: dx = rstd * (g -
/// mean(g) - xhat * mean(g * xhat)) with g = dy * w (rms_norm: no mean(g)
/// term), and the slice's partial dw / db (either null: not wanted) at
/// [blk * d, (blk + 1) * d) of pw / pb.
template <typename S, int G, bool kCentered, typename Acc, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    residentNormBackwardKernel(const typename S::T *x, const typename S::T *w,
                               const typename S::T *dy, typename S::T *dx,
                               float *pw, float *pb, int64_t rows, int64_t d,
                               int64_t rowsPerBlock, int64_t blocks,
                               float eps) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp,
            warps = blockDim.x / kWarp;
  // The block's dw / db, combined warp by warp (kResidentWidth each).
  __shared__ float blockW[kResidentWidth], blockB[kResidentWidth];
  GroupLengths<G> n(d);
  for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
    float aw[G][kRowGroup] = {}, ab[G][kRowGroup] = {};
    int64_t end = std::min(rows, (blk + 1) * rowsPerBlock);
    // The next row's loads go out before this row's arithmetic (as in the
    // forward).
    float nextX[G][kRowGroup], nextDy[G][kRowGroup];
    int64_t r0 = blk * rowsPerBlock + warp;
    if (r0 < end) {
      loadRow<S>(x + r0 * d, n, nextX);
      loadRow<S>(dy + r0 * d, n, nextDy);
    }
    for (int64_t r = r0; r < end; r += warps) {
      float xv[G][kRowGroup], gv[G][kRowGroup];
      copyRow(nextX, xv);
      copyRow(nextDy, gv);
      if (r + warps < end) {
        loadRow<S>(x + (r + warps) * d, n, nextX);
        loadRow<S>(dy + (r + warps) * d, n, nextDy);
      }
      float rstd = normalizeRow<Acc, kCentered>(xv, n, d, eps);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float wv[kRowGroup];
        loadGroup<S>(n.len[g] > 0 ? w : nullptr, groupStart(lane, g), n.len[g],
                     wv, 1.0f);
#pragma unroll
        for (int i = 0; i < kRowGroup; ++i) {
          aw[g][i] += gv[g][i] * xv[g][i];
          ab[g][i] += gv[g][i];
          gv[g][i] *= wv[i]; // zero past the row's end (dy is)
        }
      }
      if (!dx)
        continue;
      float mg = 0.0f;
      if (kCentered)
        mg = rowMean<Acc, G>([&](int g, int i) { return gv[g][i]; }, d);
      float mgx =
          rowMean<Acc, G>([&](int g, int i) { return gv[g][i] * xv[g][i]; }, d);
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int i = 0; i < kRowGroup; ++i)
          gv[g][i] = rstd * (gv[g][i] - mg - xv[g][i] * mgx);
      storeRow<S>(dx + r * d, n, gv);
    }
    if (!pw && !pb)
      continue;
    // Warp k adds its sums to the first k's (every lane owns the same
    // columns in every warp), one warp at a time: a fixed order.
    for (int k = 0; k < warps; ++k) {
      if (warp == k) {
#pragma unroll
        for (int g = 0; g < G; ++g)
#pragma unroll
          for (int i = 0; i < kRowGroup; ++i) {
            int64_t j = groupStart(lane, g) + i;
            if (i < n.len[g]) {
              blockW[j] = k == 0 ? aw[g][i] : blockW[j] + aw[g][i];
              blockB[j] = k == 0 ? ab[g][i] : blockB[j] + ab[g][i];
            }
          }
      }
      __syncthreads();
    }
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
      if (pw)
        pw[blk * d + j] = blockW[j];
      if (pb)
        pb[blk * d + j] = blockB[j];
    }
    __syncthreads(); // blockW / blockB are reused by the next slice
  }
}

/// Calls f(std::integral_constant<int, G>) with G the groups per lane of a
/// d-wide row (1 .. kMaxResidentGroups).
template <typename F> void withResidentGroups(int64_t d, F &&f) {
  switch ((d + kWarp * kRowGroup - 1) / (kWarp * kRowGroup)) {
  case 1:
    return f(std::integral_constant<int, 1>{});
  case 2:
    return f(std::integral_constant<int, 2>{});
  case 3:
    return f(std::integral_constant<int, 3>{});
  default:
    return f(std::integral_constant<int, 4>{});
  }
}

/// Choices a GPU run settles, read once from the environment (the lease
/// kit's kernel bench runs them side by side). FSDPRT_NORM_RESIDENT=1 takes
/// these kernels: off by default until a GPU measures them faster than the
/// streaming ones (the first version, without the next row's loads ahead
/// and with double sums, was not: H200, 2026-11-28, docs/GPU-Results.md).
/// FSDPRT_NORM_SUMS=double sums lanes and warps in double instead of f32;
/// FSDPRT_NORM_ONE_BLOCK=1 lets the backward keep every accumulator in
/// registers (~220 at 3 groups a lane: one block an SM) instead of capping
/// them at 128 for two blocks.
struct NormTuning {
  bool resident = false, sumsInDouble = false, oneBlock = false;
};
const NormTuning &normTuning() {
  static const NormTuning t{envIs("FSDPRT_NORM_RESIDENT", "1"),
                            envIs("FSDPRT_NORM_SUMS", "double"),
                            envIs("FSDPRT_NORM_ONE_BLOCK", "1")};
  return t;
}

/// Calls f(centered, acc, minBlocks) with std::bool_constant, the sums'
/// type (a value) and std::integral_constant<int, 1 or 2>.
template <typename F> void withNormVariant(bool centered, F &&f) {
  const NormTuning &t = normTuning();
  auto blocks = [&](auto c, auto acc) {
    if (t.oneBlock)
      f(c, acc, std::integral_constant<int, 1>{});
    else
      f(c, acc, std::integral_constant<int, 2>{});
  };
  auto sums = [&](auto c) {
    if (t.sumsInDouble)
      blocks(c, 0.0);
    else
      blocks(c, 0.0f);
  };
  if (centered)
    sums(std::true_type{});
  else
    sums(std::false_type{});
}

/// Rows per block slice of the backward: 4 rows per warp at least (the
/// partials stay small beside the rows: 1/16 of x and dy in bf16), and at
/// most 512 slices.
int64_t rowsPerSlice(int64_t rows) {
  int64_t least = int64_t(4) * kWarpsPerBlock;
  return std::max(least, (rows + 511) / 512);
}

} // namespace

bool residentNormFits(int64_t d) {
  return normTuning().resident && d > 0 && d <= kResidentWidth;
}

void residentNormForward(Stream s, DType dt, bool centered, const void *x,
                         const void *w, const void *b, void *y, int64_t rows,
                         int64_t d, float eps) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    withResidentGroups(d, [&](auto groups) {
      withNormVariant(centered, [&](auto c, auto acc, auto) {
        FSDPRT_LAUNCH_WARP_ROWS(
            (residentNormKernel<S, decltype(groups)::value, decltype(c)::value,
                                decltype(acc)>),
            rows, s, static_cast<const T *>(x), static_cast<const T *>(w),
            static_cast<const T *>(b), static_cast<T *>(y), rows, d, eps);
      });
    });
  });
}

void residentNormBackward(Stream s, DType dt, bool centered, const void *x,
                          const void *w, const void *dy, void *dx, float *dw,
                          float *db, int64_t rows, int64_t d, float eps) {
  int64_t perSlice = rowsPerSlice(rows),
          slices = (rows + perSlice - 1) / perSlice;
  Scratch partial(s, dw || db ? 2 * slices * d * 4 : 0);
  float *pw = dw ? partial.as<float>() : nullptr,
        *pb = db ? partial.as<float>() + slices * d : nullptr;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    withResidentGroups(d, [&](auto groups) {
      withNormVariant(centered, [&](auto c, auto acc, auto minBlocks) {
        FSDPRT_LAUNCH_BLOCKS(
            (residentNormBackwardKernel<S, decltype(groups)::value,
                                        decltype(c)::value, decltype(acc),
                                        decltype(minBlocks)::value>),
            slices, s, static_cast<const T *>(x), static_cast<const T *>(w),
            static_cast<const T *>(dy), static_cast<T *>(dx), pw, pb, rows, d,
            perSlice, slices, eps);
      });
    });
  });
  if (dw)
    finishColumnChunks(s, pw, dw, d, slices, 1.0);
  if (db)
    finishColumnChunks(s, pb, db, d, slices, 1.0);
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
