//===- CApiNorm.cpp - C ABI: layer_norm, rms_norm, batch_norm, softmax ----===//
//
// Entry points of the C ABI (fsdprt.h) for layer_norm, rms_norm, batch_norm,
// softmax: each validates dims and operand extents on the calling thread, then
// enqueues the backend call (CApiSupport.h).
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

#include <cmath>

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

extern "C" {

static void checkNorm(int64_t rows, int64_t d, double eps) {
  nonNegative(rows, "rows");
  requirePositive(d, "d");
  if (!(eps >= 0) || !std::isfinite(eps))
    fail(Status::InvalidArgument, "eps must be finite and non-negative");
}

int32_t fsdprt_layer_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t x, int64_t x_off, int64_t w,
                                  int64_t w_off, int64_t b, int64_t b_off,
                                  int64_t y, int64_t y_off, int64_t rows,
                                  int64_t d, double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "layer_norm_forward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    const void *pb = l.optional(b, b_off, d, "b");
    void *py = l.operand(y, y_off, mul(rows, d), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue(
        [=, &be] { be.layerNormForward(dt, px, pw, pb, py, rows, d, eps); });
  });
}

int32_t fsdprt_add_layer_norm_forward(int64_t ctx, int64_t stream,
                                      int32_t dtype, int64_t a, int64_t a_off,
                                      int64_t b, int64_t b_off, int64_t w,
                                      int64_t w_off, int64_t bias,
                                      int64_t bias_off, int64_t sum,
                                      int64_t sum_off, int64_t y, int64_t y_off,
                                      int64_t rows, int64_t d, double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "add_layer_norm_forward");
    checkNorm(rows, d, eps);
    const void *pa = l.operand(a, a_off, mul(rows, d), "a");
    const void *pb = l.operand(b, b_off, mul(rows, d), "b");
    const void *pw = l.optional(w, w_off, d, "w");
    const void *pbias = l.optional(bias, bias_off, d, "bias");
    void *psum = l.operand(sum, sum_off, mul(rows, d), "sum");
    void *py = l.operand(y, y_off, mul(rows, d), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.addLayerNormForward(dt, pa, pb, pw, pbias, psum, py, rows, d, eps);
    });
  });
}

int32_t fsdprt_layer_norm_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                   int64_t x, int64_t x_off, int64_t w,
                                   int64_t w_off, int64_t dy, int64_t dy_off,
                                   int64_t dx, int64_t dx_off, int64_t dw,
                                   int64_t dw_off, int64_t db, int64_t db_off,
                                   int64_t rows, int64_t d, double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "layer_norm_backward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    const void *pdy = l.operand(dy, dy_off, mul(rows, d), "dy");
    void *pdx = l.optional(dx, dx_off, mul(rows, d), "dx");
    void *pdw = l.optional(dw, dw_off, d, "dw");
    void *pdb = l.optional(db, db_off, d, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.layerNormBackward(dt, px, pw, pdy, pdx, pdw, pdb, rows, d, eps);
    });
  });
}

int32_t fsdprt_add_layer_norm_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int64_t x, int64_t x_off,
    int64_t w, int64_t w_off, int64_t dy, int64_t dy_off, int64_t addend,
    int64_t addend_off, int64_t dx, int64_t dx_off, int64_t dw, int64_t dw_off,
    int64_t db, int64_t db_off, int64_t rows, int64_t d, double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "add_layer_norm_backward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    const void *pdy = l.operand(dy, dy_off, mul(rows, d), "dy");
    const void *padd = l.operand(addend, addend_off, mul(rows, d), "addend");
    void *pdx = l.operand(dx, dx_off, mul(rows, d), "dx");
    void *pdw = l.optional(dw, dw_off, d, "dw");
    void *pdb = l.optional(db, db_off, d, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.addLayerNormBackward(dt, px, pw, pdy, padd, pdx, pdw, pdb, rows, d,
                              eps);
    });
  });
}

int32_t fsdprt_rms_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t x, int64_t x_off, int64_t w,
                                int64_t w_off, int64_t y, int64_t y_off,
                                int64_t rows, int64_t d, double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "rms_norm_forward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    void *py = l.operand(y, y_off, mul(rows, d), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.rmsNormForward(dt, px, pw, py, rows, d, eps); });
  });
}

int32_t fsdprt_rms_norm_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t x, int64_t x_off, int64_t w,
                                 int64_t w_off, int64_t dy, int64_t dy_off,
                                 int64_t dx, int64_t dx_off, int64_t dw,
                                 int64_t dw_off, int64_t rows, int64_t d,
                                 double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "rms_norm_backward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    const void *pdy = l.operand(dy, dy_off, mul(rows, d), "dy");
    void *pdx = l.optional(dx, dx_off, mul(rows, d), "dx");
    void *pdw = l.optional(dw, dw_off, d, "dw");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.rmsNormBackward(dt, px, pw, pdy, pdx, pdw, rows, d, eps);
    });
  });
}

int32_t fsdprt_softmax_forward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t y,
                               int64_t y_off, int32_t rank,
                               const int64_t *shape, int32_t dim) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "softmax_forward");
    Shape s = shapeFromAbi(rank, shape, "shape");
    Around a(s, normalizeDim(dim, s.size(), "dim"));
    const void *px = l.operand(x, x_off, numelOf(s), "x");
    void *py = l.operand(y, y_off, numelOf(s), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue(
        [=, &be] { be.softmaxForward(dt, px, py, a.outer, a.size, a.inner); });
  });
}

int32_t fsdprt_softmax_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t y, int64_t y_off, int64_t dy,
                                int64_t dy_off, int64_t dx, int64_t dx_off,
                                int32_t rank, const int64_t *shape,
                                int32_t dim) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "softmax_backward");
    Shape s = shapeFromAbi(rank, shape, "shape");
    Around a(s, normalizeDim(dim, s.size(), "dim"));
    const void *py = l.operand(y, y_off, numelOf(s), "y");
    const void *pdy = l.operand(dy, dy_off, numelOf(s), "dy");
    void *pdx = l.operand(dx, dx_off, numelOf(s), "dx");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.softmaxBackward(dt, py, pdy, pdx, a.outer, a.size, a.inner);
    });
  });
}

static void checkBatchNorm(int64_t n, int64_t c, int64_t spatial, double eps,
                           bool training) {
  nonNegative(n, "n"), requirePositive(c, "c"), nonNegative(spatial, "spatial");
  if (!(eps >= 0) || !std::isfinite(eps))
    fail(Status::InvalidArgument, "eps must be finite and non-negative");
  if (training && mul(n, spatial) < 2)
    fail(Status::InvalidArgument,
         "expected more than 1 value per channel when training");
}

int32_t fsdprt_batch_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t x, int64_t x_off, int64_t w,
                                  int64_t w_off, int64_t b, int64_t b_off,
                                  int64_t running_mean, int64_t rm_off,
                                  int64_t running_var, int64_t rv_off,
                                  int64_t y, int64_t y_off, int64_t n,
                                  int64_t c, int64_t spatial, double eps,
                                  double momentum, int32_t training) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "batch_norm_forward");
    checkBatchNorm(n, c, spatial, eps, training);
    int64_t numel = mul(n, mul(c, spatial));
    const void *px = l.operand(x, x_off, numel, "x");
    const void *pw = l.optional(w, w_off, c, "w");
    const void *pb = l.optional(b, b_off, c, "b");
    void *prm = l.operand(running_mean, rm_off, c, "running_mean");
    void *prv = l.operand(running_var, rv_off, c, "running_var");
    void *py = l.operand(y, y_off, numel, "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    bool train = training != 0;
    l.enqueue([=, &be] {
      be.batchNormForward(dt, px, pw, pb, prm, prv, py, n, c, spatial, eps,
                          momentum, train);
    });
  });
}

int32_t fsdprt_batch_norm_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int64_t x, int64_t x_off,
    int64_t w, int64_t w_off, int64_t running_mean, int64_t rm_off,
    int64_t running_var, int64_t rv_off, int64_t dy, int64_t dy_off, int64_t dx,
    int64_t dx_off, int64_t dw, int64_t dw_off, int64_t db, int64_t db_off,
    int64_t n, int64_t c, int64_t spatial, double eps, int32_t training) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "batch_norm_backward");
    checkBatchNorm(n, c, spatial, eps, training);
    int64_t numel = mul(n, mul(c, spatial));
    const void *px = l.operand(x, x_off, numel, "x");
    const void *pw = l.optional(w, w_off, c, "w");
    // Eval mode normalises with the running statistics; training ignores them.
    const void *prm = training
                          ? l.optional(running_mean, rm_off, c, "running_mean")
                          : l.operand(running_mean, rm_off, c, "running_mean");
    const void *prv = training
                          ? l.optional(running_var, rv_off, c, "running_var")
                          : l.operand(running_var, rv_off, c, "running_var");
    const void *pdy = l.operand(dy, dy_off, numel, "dy");
    void *pdx = l.optional(dx, dx_off, numel, "dx");
    void *pdw = l.optional(dw, dw_off, c, "dw");
    void *pdb = l.optional(db, db_off, c, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    bool train = training != 0;
    l.enqueue([=, &be] {
      be.batchNormBackward(dt, px, pw, prm, prv, pdy, pdx, pdw, pdb, n, c,
                           spatial, eps, train);
    });
  });
}

} // extern "C"
