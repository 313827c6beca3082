//===- CApiLayout.cpp - transpose, split / concat, slices, cumsum, reduce -===//
//
// Entry points of the C ABI (fsdprt.h) for transpose, split / concat, slice
// (strided too), pad, cumsum, reduce: each validates dims and operand extents on the calling thread,
// then enqueues the backend call (CApiSupport.h).
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

#include <algorithm>
#include <optional>
#include <vector>

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

std::vector<int64_t> sortedDims(int32_t numDims, const int64_t *dims,
                                size_t rank) {
  if (numDims < 0 || (numDims > 0 && !dims))
    fail(Status::InvalidArgument, "invalid dims list");
  std::vector<int64_t> out;
  for (int32_t i = 0; i < numDims; ++i)
    out.push_back(normalizeDim(dims[i], rank, "reduce dim"));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail(Status::InvalidArgument, "reduce dims contain a duplicate");
  return out;
}

int64_t keptNumel(const Shape &shape, const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (!std::binary_search(dims.begin(), dims.end(), int64_t(i)))
      n *= shape[i];
  return n;
}

std::vector<int64_t> checkedPerm(int32_t rank, const int64_t *perm) {
  if (rank > 0 && !perm)
    fail(Status::InvalidArgument, "null permutation");
  std::vector<int64_t> p(perm, perm + rank);
  std::vector<bool> seen(rank, false);
  for (int64_t v : p) {
    if (v < 0 || v >= rank || seen[v])
      fail(Status::InvalidArgument, "perm is not a permutation of [0, ", rank,
           ")");
    seen[v] = true;
  }
  return p;
}

/// x's [xStart, xStart + size) along the dim lands at y's [yStart, ...);
/// y has ySize there and is first filled with `fill` if given.
struct Window {
  int64_t xStart, yStart, size, ySize;
  std::optional<double> fill;
};

/// The dimension `dim` of `s` that `op` slices or pads (not of a rank-0
/// tensor).
Around slicedAxis(const char *op, const Shape &s, int32_t dim) {
  if (s.empty())
    fail(Status::InvalidArgument, "cannot ", op, " a rank-0 tensor");
  return Around(s, normalizeDim(dim, s.size(), "dim"));
}

/// slice and pad: `window` maps the size of x's dim to the copy.
template <typename WindowOf>
void copyWindow(const char *op, int64_t ctx, int64_t stream, int32_t dtype,
                int64_t x, int64_t x_off, int32_t rank, const int64_t *shape,
                int32_t dim, WindowOf windowOf, int64_t y, int64_t y_off) {
  Launch l(ctx, stream, op);
  DType dt = dtypeFromCode(dtype, "dtype");
  Shape s = shapeFromAbi(rank, shape, "shape");
  Around a = slicedAxis(op, s, dim);
  Window w = windowOf(a.size);
  const void *px = l.operand(x, x_off, numelOf(s), dt, "x");
  int64_t yNumel = mul(a.outer, mul(w.ySize, a.inner));
  void *py = l.operand(y, y_off, yNumel, dt, "y");
  Backend &be = l.backend();
  l.enqueue([=, &be] {
    if (w.fill)
      be.fill(dt, py, yNumel, *w.fill);
    be.copySlab(dt, px, a.size, w.xStart, py, w.ySize, w.yStart, a.outer,
                w.size, a.inner);
  });
}

/// strided_slice (gather) and its backward (scatter into zeros): `x` is
/// the sliced side, `shape` its shape, `y` the other.
void stridedWindow(const char *op, bool scatter, int64_t ctx, int64_t stream,
                   int32_t dtype, int64_t x, int64_t x_off, int32_t rank,
                   const int64_t *shape, int32_t dim, int64_t start,
                   int64_t step, int64_t size, int64_t y, int64_t y_off) {
  Launch l(ctx, stream, op);
  DType dt = dtypeFromCode(dtype, "dtype");
  Shape s = shapeFromAbi(rank, shape, "shape");
  Around a = slicedAxis(op, s, dim);
  if (step <= 0)
    fail(Status::InvalidArgument, "step must be positive, got ", step);
  nonNegative(size, "size");
  if (start < 0 || (size > 0 && start + (size - 1) * step >= a.size))
    fail(Status::InvalidArgument, op, " of ", size, " elements from ", start,
         " by step ", step, " is outside a dimension of size ", a.size);
  StridedWindow w{a.outer, a.size, a.inner, start, step, size};
  int64_t wholeNumel = numelOf(s), partNumel = mul(a.outer, mul(size, a.inner));
  const void *src = l.operand(x, x_off, scatter ? partNumel : wholeNumel, dt,
                              scatter ? "dy" : "x");
  void *dst = l.operand(y, y_off, scatter ? wholeNumel : partNumel, dt,
                        scatter ? "dx" : "y");
  Backend &be = l.backend();
  l.enqueue([=, &be] {
    if (scatter)
      be.fill(dt, dst, wholeNumel, 0.0);
    be.copyStrided(dt, src, dst, w, scatter);
  });
}

} // namespace

extern "C" {

static int32_t transposeImpl(const char *fn, const char *op, bool backward,
                             int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t x, int64_t x_off, int64_t y, int64_t y_off,
                             int32_t rank, const int64_t *shape,
                             const int64_t *perm) {
  return guarded(fn, [&] {
    Launch l(ctx, stream, op);
    DType dt = dtypeFromCode(dtype, "dtype");
    // `shape` is always the forward input's shape.
    Shape xs = shapeFromAbi(rank, shape, "shape");
    std::vector<int64_t> p = checkedPerm(rank, perm);
    Shape inShape = xs;
    if (backward) {
      // dy has the permuted shape; inverse permutation maps it back.
      std::vector<int64_t> inv(rank);
      for (int32_t i = 0; i < rank; ++i) {
        inShape[i] = xs[p[i]];
        inv[p[i]] = i;
      }
      p = inv;
    }
    const void *px =
        l.operand(x, x_off, numelOf(xs), dt, backward ? "dy" : "x");
    void *py = l.operand(y, y_off, numelOf(xs), dt, backward ? "dx" : "y");
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.transpose(dt, px, py, inShape, p); });
  });
}

int32_t fsdprt_transpose_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t x, int64_t x_off, int64_t y,
                                 int64_t y_off, int32_t rank,
                                 const int64_t *shape, const int64_t *perm) {
  return transposeImpl(__func__, "transpose_forward", false, ctx, stream, dtype,
                       x, x_off, y, y_off, rank, shape, perm);
}

int32_t fsdprt_transpose_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t dy, int64_t dy_off, int64_t dx,
                                  int64_t dx_off, int32_t rank,
                                  const int64_t *x_shape, const int64_t *perm) {
  return transposeImpl(__func__, "transpose_backward", true, ctx, stream, dtype,
                       dy, dy_off, dx, dx_off, rank, x_shape, perm);
}

/// Shared by split and concat: the whole tensor and its parts along `dim`.
static void splitConcat(const char *op, bool isSplit, int64_t ctx,
                        int64_t stream, int32_t dtype, int64_t whole,
                        int64_t whole_off, int32_t rank, const int64_t *shape,
                        int32_t dim, int32_t num_parts, const int64_t *sizes,
                        const int64_t *parts, const int64_t *part_offs) {
  Launch l(ctx, stream, op);
  DType dt = dtypeFromCode(dtype, "dtype");
  Shape s = shapeFromAbi(rank, shape, "shape");
  if (s.empty())
    fail(Status::InvalidArgument, "cannot split or concat a rank-0 tensor");
  int32_t d = normalizeDim(dim, s.size(), "dim");
  if (num_parts <= 0 || !sizes || !parts || !part_offs)
    fail(Status::InvalidArgument,
         "num_parts must be positive with non-null sizes and part arrays");
  Around a(s, d);
  int64_t total = 0;
  for (int32_t i = 0; i < num_parts; ++i)
    total += nonNegative(sizes[i], "part size");
  if (total != a.size)
    fail(Status::InvalidArgument, "part sizes sum to ", total, " but dim ", d,
         " has size ", a.size);
  void *pw = l.operand(whole, whole_off, numelOf(s), dt, isSplit ? "x" : "out");
  std::vector<void *> ptrs;
  for (int32_t i = 0; i < num_parts; ++i)
    ptrs.push_back(l.operand(parts[i], part_offs[i],
                             mul(a.outer, mul(sizes[i], a.inner)), dt,
                             isSplit ? "outs[i]" : "ins[i]"));
  std::vector<int64_t> sz(sizes, sizes + num_parts);
  Backend &be = l.backend();
  l.enqueue([=, &be] {
    int64_t at = 0;
    for (size_t i = 0; i < ptrs.size(); ++i) {
      if (isSplit)
        be.copySlab(dt, pw, a.size, at, ptrs[i], sz[i], 0, a.outer, sz[i],
                    a.inner);
      else
        be.copySlab(dt, ptrs[i], sz[i], 0, pw, a.size, at, a.outer, sz[i],
                    a.inner);
      at += sz[i];
    }
  });
}

int32_t fsdprt_split(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                     int64_t x_off, int32_t rank, const int64_t *shape,
                     int32_t dim, int32_t num_parts, const int64_t *sizes,
                     const int64_t *outs, const int64_t *out_offs) {
  return guarded(__func__, [&] {
    splitConcat("split", true, ctx, stream, dtype, x, x_off, rank, shape, dim,
                num_parts, sizes, outs, out_offs);
  });
}

int32_t fsdprt_concat(int64_t ctx, int64_t stream, int32_t dtype,
                      int32_t num_parts, const int64_t *ins,
                      const int64_t *in_offs, const int64_t *sizes,
                      int32_t rank, const int64_t *out_shape, int32_t dim,
                      int64_t out, int64_t out_off) {
  return guarded(__func__, [&] {
    splitConcat("concat", false, ctx, stream, dtype, out, out_off, rank,
                out_shape, dim, num_parts, sizes, ins, in_offs);
  });
}

int32_t fsdprt_slice(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                     int64_t x_off, int32_t rank, const int64_t *shape,
                     int32_t dim, int64_t start, int64_t size, int64_t y,
                     int64_t y_off) {
  return guarded(__func__, [&] {
    copyWindow("slice", ctx, stream, dtype, x, x_off, rank, shape, dim,
               [&](int64_t extent) {
                 if (start < 0 || size < 0 || start + size > extent)
                   fail(Status::InvalidArgument, "slice [", start, ", ",
                        start + size, ") is outside a dimension of size ",
                        extent);
                 return Window{start, 0, size, size, std::nullopt};
               },
               y, y_off);
  });
}

int32_t fsdprt_pad(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                   int64_t x_off, int32_t rank, const int64_t *shape,
                   int32_t dim, int64_t low, int64_t high, double value,
                   int64_t y, int64_t y_off) {
  return guarded(__func__, [&] {
    nonNegative(low, "low");
    nonNegative(high, "high");
    copyWindow("pad", ctx, stream, dtype, x, x_off, rank, shape, dim,
               [&](int64_t extent) {
                 return Window{0, low, extent, low + extent + high, value};
               },
               y, y_off);
  });
}

int32_t fsdprt_strided_slice(int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t x, int64_t x_off, int32_t rank,
                             const int64_t *shape, int32_t dim, int64_t start,
                             int64_t step, int64_t size, int64_t y,
                             int64_t y_off) {
  return guarded(__func__, [&] {
    stridedWindow("strided_slice", false, ctx, stream, dtype, x, x_off, rank,
                  shape, dim, start, step, size, y, y_off);
  });
}

int32_t fsdprt_strided_slice_backward(int64_t ctx, int64_t stream,
                                      int32_t dtype, int64_t dy, int64_t dy_off,
                                      int32_t rank, const int64_t *x_shape,
                                      int32_t dim, int64_t start, int64_t step,
                                      int64_t size, int64_t dx,
                                      int64_t dx_off) {
  return guarded(__func__, [&] {
    stridedWindow("strided_slice_backward", true, ctx, stream, dtype, dy,
                  dy_off, rank, x_shape, dim, start, step, size, dx, dx_off);
  });
}

int32_t fsdprt_cumsum(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                      int64_t x_off, int32_t rank, const int64_t *shape,
                      int32_t dim, int32_t reverse, int64_t y, int64_t y_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "cumsum");
    DType dt = dtypeFromCode(dtype, "dtype");
    Shape s = shapeFromAbi(rank, shape, "shape");
    if (s.empty())
      fail(Status::InvalidArgument, "cannot cumsum a rank-0 tensor");
    Around a(s, normalizeDim(dim, s.size(), "dim"));
    const void *px = l.operand(x, x_off, numelOf(s), dt, "x");
    void *py = l.operand(y, y_off, numelOf(s), dt, "y");
    Backend &be = l.backend();
    bool rev = reverse != 0;
    l.enqueue(
        [=, &be] { be.cumsum(dt, px, py, a.outer, a.size, a.inner, rev); });
  });
}

int32_t fsdprt_reduce_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t kind, int64_t x, int64_t x_off,
                              int32_t rank, const int64_t *shape,
                              int32_t num_dims, const int64_t *dims, int64_t y,
                              int64_t y_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "reduce_forward");
    if (kind != FSDPRT_REDUCE_SUM && kind != FSDPRT_REDUCE_MEAN)
      fail(Status::InvalidArgument, "unknown reduce kind ", kind);
    Shape s = shapeFromAbi(rank, shape, "shape");
    std::vector<int64_t> ds = sortedDims(num_dims, dims, s.size());
    const void *px = l.operand(x, x_off, numelOf(s), "x");
    void *py = l.operand(y, y_off, keptNumel(s, ds), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    auto rk = static_cast<ReduceKind>(kind);
    l.enqueue([=, &be] { be.reduceForward(dt, rk, px, s, ds, py); });
  });
}

int32_t fsdprt_reduce_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int32_t kind, int64_t dy, int64_t dy_off,
                               int32_t rank, const int64_t *x_shape,
                               int32_t num_dims, const int64_t *dims,
                               int64_t dx, int64_t dx_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "reduce_backward");
    if (kind != FSDPRT_REDUCE_SUM && kind != FSDPRT_REDUCE_MEAN)
      fail(Status::InvalidArgument, "unknown reduce kind ", kind);
    Shape s = shapeFromAbi(rank, x_shape, "x_shape");
    std::vector<int64_t> ds = sortedDims(num_dims, dims, s.size());
    const void *pdy = l.operand(dy, dy_off, keptNumel(s, ds), "dy");
    void *pdx = l.operand(dx, dx_off, numelOf(s), "dx");
    Backend &be = l.backend();
    DType dt = l.dtype();
    auto rk = static_cast<ReduceKind>(kind);
    l.enqueue([=, &be] { be.reduceBackward(dt, rk, pdy, s, ds, pdx); });
  });
}

} // extern "C"
