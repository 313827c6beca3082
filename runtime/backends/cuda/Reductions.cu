//===- Reductions.cu - Column sums, reduce, cumsum, batch norm ------------===//
//
// Sums down columns (bias gradients, reduce, layer_norm / rms_norm weight
// gradients) in two deterministic passes, reduce's backward, cumsum (one
// thread per line) and batch norm (one thread per channel).
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include "fsdp/rt/math/BatchNorm.h"
#include "fsdp/rt/math/Scan.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// Sums down columns (bias gradients, reduce, norm weight gradients) run in
/// two passes: chunk c of column k sums its `len` (at least 16) reduced
/// indices in order into partial[c * columns + k], enough chunks for ~256k
/// threads (GPT-2's 8192 x 768 norm gradients: 328 chunks of 25 rows; 64k
/// threads of 97 rows left an H100 latency-bound); then one warp per column
/// adds its chunks (columnChunksFinishKernel): parallel, and the same bits
/// every run.
struct ColumnChunks {
  int64_t count, len;
};

ColumnChunks columnChunks(int64_t columns, int64_t reduced) {
  int64_t want = (262144 + columns - 1) / std::max<int64_t>(columns, 1);
  int64_t count = std::max<int64_t>(1, std::min(want, (reduced + 15) / 16));
  int64_t len = std::max<int64_t>(1, (reduced + count - 1) / count);
  return {(reduced + len - 1) / len, len};
}

template <typename S>
__global__ void columnSumsPartialKernel(const typename S::T *x, double *partial,
                                        int64_t m, int64_t n, ColumnChunks ch) {
  FSDPRT_GRID_STRIDE(i, n * ch.count) {
    int64_t j = i % n, c = i / n, end = std::min(m, (c + 1) * ch.len);
    double acc = 0.0;
    for (int64_t r = c * ch.len; r < end; ++r)
      acc += S::load(x[r * n + j]);
    partial[i] = acc;
  }
}

/// out[k] = factor * sum_c partial[c * columns + k]: one warp per column,
/// lane l adding chunks l, l + 32, ... in order, the lanes then in warpSum's
/// fixed tree (a thread per column walked hundreds of chunks serially).
template <typename P>
__global__ void columnChunksFinishKernel(const P *partial, float *out,
                                         int64_t columns, int64_t chunks,
                                         double factor) {
  FSDPRT_WARP_ROW_STRIDE(k, columns) {
    double acc = 0.0;
    FSDPRT_LANE_STRIDE(c, chunks)
      acc += partial[c * columns + k];
    acc = warpSum(acc);
    if (threadIdx.x % kWarp == 0)
      out[k] = static_cast<float>(acc * factor);
  }
}

/// Kept dims (output index space) in strideA, reduced dims in strideB; the
/// reduced sub-space is walked row-major in dim order (as the CPU's
/// subspaceOffsets), so each output sums in the same order.
struct ReduceGeom {
  Dims kept;    // size + strideA
  Dims reduced; // size + strideA
  int64_t reducedCount;
};

__global__ void reducePartialKernel(const float *x, double *partial,
                                    ReduceGeom g, int64_t outCount,
                                    ColumnChunks ch) {
  FSDPRT_GRID_STRIDE(i, outCount * ch.count) {
    int64_t k = i % outCount, c = i / outCount, base, off, unused;
    offsetsOf(g.kept, k, base, unused);
    int64_t end = std::min(g.reducedCount, (c + 1) * ch.len);
    double acc = 0.0;
    for (int64_t r = c * ch.len; r < end; ++r) {
      offsetsOf(g.reduced, r, off, unused);
      acc += x[base + off];
    }
    partial[i] = acc;
  }
}

__global__ void reduceBackwardKernel(const float *dy, float *dx, Dims d,
                                     float factor, int64_t n) {
  FSDPRT_GRID_STRIDE(i, n) {
    int64_t off, unused;
    offsetsOf(d, i, off, unused);
    dx[i] = dy[off] * factor;
  }
}

/// Chunk sums (ColumnChunks) of dw[j] = sum_r dy * xhat and db[j] = sum_r dy
/// into pw / pb. mean == nullptr means rms_norm (xhat = x * rstd).
template <typename S>
__global__ void normColumnsPartialKernel(const typename S::T *x,
                                         const typename S::T *dy,
                                         const float *mean, const float *rstd,
                                         double *pw, double *pb, int64_t rows,
                                         int64_t d, ColumnChunks ch) {
  FSDPRT_GRID_STRIDE(i, d * ch.count) {
    int64_t j = i % d, c = i / d, end = std::min(rows, (c + 1) * ch.len);
    double aw = 0.0, ab = 0.0;
    for (int64_t r = c * ch.len; r < end; ++r) {
      float g = S::load(dy[r * d + j]), xv = S::load(x[r * d + j]);
      float xhat = mean ? (xv - mean[r]) * rstd[r] : xv * rstd[r];
      aw += static_cast<double>(g) * xhat;
      ab += g;
    }
    pw[i] = aw;
    pb[i] = ab;
  }
}

__global__ void batchNormKernel(const float *x, const float *w, const float *b,
                                float *runningMean, float *runningVar, float *y,
                                int64_t n, int64_t c, int64_t spatial,
                                float eps, float momentum, bool training) {
  FSDPRT_GRID_STRIDE(ch, c) {
    batchNormChannelForward(x, w, b, runningMean, runningVar, y, n, c, spatial,
                            ch, eps, momentum, training);
  }
}

__global__ void batchNormBackwardKernel(
    const float *x, const float *w, const float *runningMean,
    const float *runningVar, const float *dy, float *dx, float *dw, float *db,
    int64_t n, int64_t c, int64_t spatial, float eps, bool training) {
  FSDPRT_GRID_STRIDE(ch, c) {
    batchNormChannelBackward(x, w, runningMean, runningVar, dy, dx, dw, db, n,
                             c, spatial, ch, eps, training);
  }
}

} // namespace

void finishColumnChunks(Stream s, const double *partial, float *out,
                        int64_t columns, int64_t chunks, double factor) {
  FSDPRT_LAUNCH_WARP_ROWS(columnChunksFinishKernel<double>, columns, s, partial,
                          out, columns, chunks, factor);
}
void finishColumnChunks(Stream s, const float *partial, float *out,
                        int64_t columns, int64_t chunks, double factor) {
  FSDPRT_LAUNCH_WARP_ROWS(columnChunksFinishKernel<float>, columns, s, partial,
                          out, columns, chunks, factor);
}

void columnSums(Stream s, DType dt, const void *x, float *out, int64_t m,
                int64_t n, double factor) {
  ColumnChunks ch = columnChunks(n, m);
  Scratch partial(s, n * ch.count * 8);
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH(columnSumsPartialKernel<S>, n * ch.count, s,
                  static_cast<const typename S::T *>(x), partial.as<double>(),
                  m, n, ch);
  });
  finishColumnChunks(s, partial.as<double>(), out, n, ch.count, factor);
}

void reduceForward(Stream s, DType dt, ReduceKind kind, const void *x,
                   const Shape &xShape, const std::vector<int64_t> &dims,
                   float *y) {
  requireRank(xShape.size(), "reduce input");
  std::vector<bool> reduced(xShape.size(), false);
  for (int64_t d : dims)
    reduced[d] = true;
  std::vector<int64_t> strides = stridesOf(xShape);
  ReduceGeom g;
  g.reducedCount = 1;
  int64_t outCount = 1;
  for (size_t d = 0; d < xShape.size(); ++d) {
    Dims &part = reduced[d] ? g.reduced : g.kept;
    part.size[part.rank] = xShape[d];
    part.strideA[part.rank] = strides[d];
    part.strideB[part.rank] = 0;
    ++part.rank;
    (reduced[d] ? g.reducedCount : outCount) *= xShape[d];
  }
  double factor = kind == ReduceKind::Mean
                      ? 1.0 / static_cast<double>(g.reducedCount)
                      : 1.0;
  // Leading dims reduced (bias gradients): the same chunks and order as
  // below, without walking the reduced sub-space index by index.
  bool leading = true;
  for (size_t d = 0; d < xShape.size(); ++d)
    leading = leading && reduced[d] == (d < dims.size());
  if (leading)
    return columnSums(s, dt, x, y, g.reducedCount, outCount, factor);
  DeviceStaging st({s});
  const float *fx = st.in(dt, x, g.reducedCount * outCount);
  ColumnChunks ch = columnChunks(outCount, g.reducedCount);
  Scratch partial(s, outCount * ch.count * 8);
  FSDPRT_LAUNCH(reducePartialKernel, outCount * ch.count, s, fx,
                partial.as<double>(), g, outCount, ch);
  finishColumnChunks(s, partial.as<double>(), y, outCount, ch.count, factor);
}

void reduceBackward(Stream s, ReduceKind kind, const float *dy,
                    const Shape &xShape, const std::vector<int64_t> &dims,
                    float *dx) {
  requireRank(xShape.size(), "reduce input");
  int64_t count = 0; // dy seen with keepdim = true
  std::vector<int64_t> sdy =
      broadcastStrides(keptShape(xShape, dims, count), xShape);
  float factor =
      kind == ReduceKind::Mean ? 1.0f / static_cast<float>(count) : 1.0f;
  Dims d;
  d.rank = static_cast<int>(xShape.size());
  for (int i = 0; i < d.rank; ++i) {
    d.size[i] = xShape[i];
    d.strideA[i] = sdy[i];
    d.strideB[i] = 0;
  }
  int64_t n = numelOf(xShape);
  FSDPRT_LAUNCH(reduceBackwardKernel, n, s, dy, dx, d, factor, n);
}

/// dw and db (either may be null) of layer_norm / rms_norm, two passes.
static void normColumns(Stream s, DType dt, const void *x, const void *dy,
                        const float *mean, const float *rstd, float *dw,
                        float *db, int64_t rows, int64_t d) {
  ColumnChunks ch = columnChunks(d, rows);
  Scratch partial(s, 2 * d * ch.count * 8);
  double *pw = partial.as<double>(), *pb = pw + d * ch.count;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    FSDPRT_LAUNCH(normColumnsPartialKernel<S>, d * ch.count, s,
                  static_cast<const T *>(x), static_cast<const T *>(dy), mean,
                  rstd, pw, pb, rows, d, ch);
  });
  if (dw)
    finishColumnChunks(s, pw, dw, d, ch.count, 1.0);
  if (db)
    finishColumnChunks(s, pb, db, d, ch.count, 1.0);
}

void addLayerNormBackward(Stream s, DType dt, const void *x, const void *w,
                          const void *dy, const void *addend, void *dx,
                          float *dw, float *db, int64_t rows, int64_t d,
                          float eps, NormKernels kernels) {
  Scratch stats(s, 2 * rows * 4);
  float *mean = stats.as<float>(), *rstd = mean + rows;
  layerNormRowsBackward(s, dt, x, w, dy, addend, dx, mean, rstd, rows, d, eps,
                        kernels);
  if (dw || db)
    normColumns(s, dt, x, dy, mean, rstd, dw, db, rows, d);
}

void layerNormBackward(Stream s, DType dt, const void *x, const void *w,
                       const void *dy, void *dx, float *dw, float *db,
                       int64_t rows, int64_t d, float eps,
                       NormKernels kernels) {
  addLayerNormBackward(s, dt, x, w, dy, /*addend=*/nullptr, dx, dw, db, rows, d,
                       eps, kernels);
}

void rmsNormBackward(Stream s, DType dt, const void *x, const void *w,
                     const void *dy, void *dx, float *dw, int64_t rows,
                     int64_t d, float eps, NormKernels kernels) {
  Scratch stats(s, rows * 4);
  float *rstd = stats.as<float>();
  rmsNormRowsBackward(s, dt, x, w, dy, dx, rstd, rows, d, eps, kernels);
  if (dw)
    normColumns(s, dt, x, dy, nullptr, rstd, dw, nullptr, rows, d);
}

void batchNormForward(Stream s, const float *x, const float *w, const float *b,
                      float *runningMean, float *runningVar, float *y,
                      int64_t n, int64_t c, int64_t spatial, float eps,
                      float momentum, bool training) {
  FSDPRT_LAUNCH(batchNormKernel, c, s, x, w, b, runningMean, runningVar, y, n,
                c, spatial, eps, momentum, training);
}

void batchNormBackward(Stream s, const float *x, const float *w,
                       const float *runningMean, const float *runningVar,
                       const float *dy, float *dx, float *dw, float *db,
                       int64_t n, int64_t c, int64_t spatial, float eps,
                       bool training) {
  FSDPRT_LAUNCH(batchNormBackwardKernel, c, s, x, w, runningMean, runningVar,
                dy, dx, dw, db, n, c, spatial, eps, training);
}

namespace {
template <typename Sc>
__global__ void cumsumKernel(const typename Sc::T *x, typename Sc::T *y,
                             int64_t dim, int64_t inner, bool reverse,
                             int64_t lines) {
  FSDPRT_GRID_STRIDE(l, lines) {
    int64_t o = l / inner, at = o * dim * inner + (l - o * inner);
    cumsumLine<Sc>(x + at, y + at, dim, inner, reverse);
  }
}
} // namespace

void cumsum(Stream s, DType dt, const void *x, void *y, int64_t outer,
            int64_t dim, int64_t inner, bool reverse) {
  int64_t lines = outer * inner;
  if (lines == 0 || dim == 0)
    return;
  withScanTraits(dt, [&](auto scan) {
    using Sc = decltype(scan);
    FSDPRT_LAUNCH(cumsumKernel<Sc>, lines, s,
                  static_cast<const typename Sc::T *>(x),
                  static_cast<typename Sc::T *>(y), dim, inner, reverse,
                  lines);
  });
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
