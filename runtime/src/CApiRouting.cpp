//===- CApiRouting.cpp - C ABI: mixture-of-experts routing ----------------===//
//
// Entry points of the C ABI (fsdprt.h) for top-k, sort, histc, the inverse
// permutation, the index check and the grouped GEMM: each validates extents
// and dtypes on the calling thread, then enqueues the backend call
// (CApiSupport.h).
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

/// Checks a grouped GEMM's sizes; the offsets' dtype.
DType groupedChecks(const GroupedDims &d, int32_t offsetsDtype) {
  nonNegative(d.rows, "rows"), nonNegative(d.k, "k"), nonNegative(d.n, "n");
  requirePositive(d.groups, "groups");
  return indexDType(offsetsDtype, "offsets_dtype");
}

} // namespace

extern "C" {

int32_t fsdprt_topk_forward(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t x, int64_t x_off, int64_t rows, int64_t n,
                            int64_t k, int64_t values, int64_t values_off,
                            int64_t indices, int64_t indices_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "topk_forward");
    nonNegative(rows, "rows");
    requirePositive(k, "k");
    if (k > n)
      fail(Status::InvalidArgument, "k = ", k, " exceeds the row length ", n);
    const void *px = l.operand(x, x_off, mul(rows, n), "x");
    void *pv = l.operand(values, values_off, mul(rows, k), "values");
    auto *pi = static_cast<int64_t *>(
        l.operand(indices, indices_off, mul(rows, k), DType::I64, "indices"));
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.topkForward(dt, px, pv, pi, rows, n, k); });
  });
}

int32_t fsdprt_sort_forward(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t x, int64_t x_off, int64_t rows, int64_t n,
                            int64_t values, int64_t values_off, int64_t indices,
                            int64_t indices_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "sort_forward");
    DType dt = dtypeFromCode(dtype, "dtype");
    nonNegative(rows, "rows"), nonNegative(n, "n");
    const void *px = l.operand(x, x_off, mul(rows, n), dt, "x");
    void *pv = l.operand(values, values_off, mul(rows, n), dt, "values");
    auto *pi = static_cast<int64_t *>(
        l.operand(indices, indices_off, mul(rows, n), DType::I64, "indices"));
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.sortForward(dt, px, pv, pi, rows, n); });
  });
}

int32_t fsdprt_histc(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                     int64_t x_off, int64_t numel, int64_t bins, double min,
                     double max, int64_t y, int64_t y_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "histc");
    nonNegative(numel, "numel");
    requirePositive(bins, "bins");
    if (!(min < max))
      fail(Status::InvalidArgument, "histc needs min < max, got [", min, ", ",
           max, "]");
    const void *px = l.operand(x, x_off, numel, "x");
    void *py = l.operand(y, y_off, bins, "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.histc(dt, px, py, numel, bins, min, max); });
  });
}

int32_t fsdprt_invert_permutation(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t p, int64_t p_off, int64_t n,
                                  int64_t y, int64_t y_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "invert_permutation");
    DType dt = indexDType(dtype, "dtype");
    nonNegative(n, "n");
    const void *pp = l.operand(p, p_off, n, dt, "p");
    void *py = l.operand(y, y_off, n, dt, "y");
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.invertPermutation(dt, pp, py, n); });
  });
}

int32_t fsdprt_index_check(int64_t ctx, int64_t stream, int32_t ids_dtype,
                           int64_t ids, int64_t ids_off, int64_t num_ids,
                           int64_t limit, int32_t has_ignore,
                           int64_t ignore_index, const char *what) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "index_check");
    DType it = indexDType(ids_dtype, "ids_dtype");
    nonNegative(num_ids, "num_ids"), nonNegative(limit, "limit");
    if (!what)
      fail(Status::InvalidArgument, "what is null");
    const void *pi = l.operand(ids, ids_off, num_ids, it, "ids");
    IndexRange range{limit, has_ignore != 0, ignore_index};
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.checkIndices(it, pi, num_ids, range, what); });
  });
}

int32_t fsdprt_grouped_matmul_forward(int64_t ctx, int64_t stream,
                                      int32_t dtype, int32_t offsets_dtype,
                                      int64_t x, int64_t x_off, int64_t w,
                                      int64_t w_off, int64_t offsets,
                                      int64_t offsets_off, int64_t y,
                                      int64_t y_off, int64_t rows,
                                      int64_t groups, int64_t k, int64_t n) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "grouped_matmul_forward");
    GroupedDims d{rows, groups, k, n};
    DType ot = groupedChecks(d, offsets_dtype);
    const void *px = l.operand(x, x_off, mul(rows, k), "x");
    const void *pw = l.operand(w, w_off, mul(groups, mul(k, n)), "w");
    const void *po = l.operand(offsets, offsets_off, groups, ot, "offsets");
    void *py = l.operand(y, y_off, mul(rows, n), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.groupedMatmulForward(dt, ot, px, pw, po, py, d); });
  });
}

int32_t fsdprt_grouped_matmul_backward_weight(
    int64_t ctx, int64_t stream, int32_t dtype, int32_t offsets_dtype,
    int64_t x, int64_t x_off, int64_t dy, int64_t dy_off, int64_t offsets,
    int64_t offsets_off, int64_t dw, int64_t dw_off, int64_t rows,
    int64_t groups, int64_t k, int64_t n) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "grouped_matmul_backward_weight");
    GroupedDims d{rows, groups, k, n};
    DType ot = groupedChecks(d, offsets_dtype);
    const void *px = l.operand(x, x_off, mul(rows, k), "x");
    const void *pdy = l.operand(dy, dy_off, mul(rows, n), "dy");
    const void *po = l.operand(offsets, offsets_off, groups, ot, "offsets");
    void *pdw = l.operand(dw, dw_off, mul(groups, mul(k, n)), "dw");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.groupedMatmulBackwardWeight(dt, ot, px, pdy, po, pdw, d);
    });
  });
}

} // extern "C"
