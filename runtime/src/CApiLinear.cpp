//===- CApiLinear.cpp - C ABI: linear and matmul --------------------------===//
//
// Entry points of the C ABI (fsdprt.h) for linear and matmul: each validates
// dims and operand extents on the calling thread, then enqueues the backend
// call (CApiSupport.h).
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

MatmulDims matmulDims(int64_t batch, int64_t m, int64_t k, int64_t n,
                      int32_t transA, int32_t transB, int32_t bBatched) {
  for (auto [v, what] :
       {std::pair{batch, "batch"}, {m, "m"}, {k, "k"}, {n, "n"}})
    nonNegative(v, what);
  return MatmulDims{batch, m, k, n, transA != 0, transB != 0, bBatched != 0};
}

} // namespace

extern "C" {

int32_t fsdprt_linear_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t x, int64_t x_off, int64_t w,
                              int64_t w_off, int64_t b, int64_t b_off,
                              int64_t y, int64_t y_off, int64_t m, int64_t k,
                              int64_t n) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "linear_forward");
    nonNegative(m, "m"), nonNegative(k, "k"), nonNegative(n, "n");
    const void *px = l.operand(x, x_off, mul(m, k), "x");
    const void *pw = l.operand(w, w_off, mul(n, k), "w");
    const void *pb = l.optional(b, b_off, n, "b");
    void *py = l.operand(y, y_off, mul(m, n), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.linearForward(dt, px, pw, pb, py, m, k, n); });
  });
}

int32_t fsdprt_linear_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t w,
                               int64_t w_off, int64_t dy, int64_t dy_off,
                               int64_t dx, int64_t dx_off, int64_t dw,
                               int64_t dw_off, int64_t db, int64_t db_off,
                               int64_t m, int64_t k, int64_t n) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "linear_backward");
    nonNegative(m, "m"), nonNegative(k, "k"), nonNegative(n, "n");
    const void *px = l.operand(x, x_off, mul(m, k), "x");
    const void *pw = l.operand(w, w_off, mul(n, k), "w");
    const void *pdy = l.operand(dy, dy_off, mul(m, n), "dy");
    void *pdx = l.optional(dx, dx_off, mul(m, k), "dx");
    void *pdw = l.optional(dw, dw_off, mul(n, k), "dw");
    void *pdb = l.optional(db, db_off, n, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.linearBackward(dt, px, pw, pdy, pdx, pdw, pdb, m, k, n);
    });
  });
}

int32_t fsdprt_linear_gelu_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                   int64_t x, int64_t x_off, int64_t w,
                                   int64_t w_off, int64_t b, int64_t b_off,
                                   int64_t pre, int64_t pre_off, int64_t y,
                                   int64_t y_off, int64_t m, int64_t k,
                                   int64_t n) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "linear_gelu_forward");
    nonNegative(m, "m"), nonNegative(k, "k"), nonNegative(n, "n");
    const void *px = l.operand(x, x_off, mul(m, k), "x");
    const void *pw = l.operand(w, w_off, mul(n, k), "w");
    const void *pb = l.optional(b, b_off, n, "b");
    void *ppre = l.operand(pre, pre_off, mul(m, n), "pre");
    void *py = l.operand(y, y_off, mul(m, n), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue(
        [=, &be] { be.linearGeluForward(dt, px, pw, pb, ppre, py, m, k, n); });
  });
}

int32_t fsdprt_linear_gelu_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                    int64_t x, int64_t x_off, int64_t w,
                                    int64_t w_off, int64_t dy, int64_t dy_off,
                                    int64_t pre, int64_t pre_off, int64_t dx,
                                    int64_t dx_off, int64_t dw, int64_t dw_off,
                                    int64_t db, int64_t db_off, int64_t m,
                                    int64_t k, int64_t n) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "linear_gelu_backward");
    nonNegative(m, "m"), nonNegative(k, "k"), nonNegative(n, "n");
    const void *px = l.operand(x, x_off, mul(m, k), "x");
    const void *pw = l.operand(w, w_off, mul(n, k), "w");
    const void *pdy = l.operand(dy, dy_off, mul(m, n), "dy");
    const void *ppre = l.operand(pre, pre_off, mul(m, k), "pre");
    void *pdx = l.operand(dx, dx_off, mul(m, k), "dx");
    void *pdw = l.optional(dw, dw_off, mul(n, k), "dw");
    void *pdb = l.optional(db, db_off, n, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.linearGeluBackward(dt, px, pw, pdy, ppre, pdx, pdw, pdb, m, k, n);
    });
  });
}

int32_t fsdprt_matmul_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t a, int64_t a_off, int64_t b,
                              int64_t b_off, int64_t c, int64_t c_off,
                              int64_t batch, int64_t m, int64_t k, int64_t n,
                              int32_t trans_a, int32_t trans_b,
                              int32_t b_batched) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "matmul_forward");
    MatmulDims d = matmulDims(batch, m, k, n, trans_a, trans_b, b_batched);
    const void *pa = l.operand(a, a_off, mul(batch, mul(m, k)), "a");
    const void *pb =
        l.operand(b, b_off, mul(d.bBatched ? batch : 1, mul(k, n)), "b");
    void *pc = l.operand(c, c_off, mul(batch, mul(m, n)), "c");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.matmulForward(dt, pa, pb, pc, d); });
  });
}

int32_t fsdprt_matmul_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t a, int64_t a_off, int64_t b,
                               int64_t b_off, int64_t dc, int64_t dc_off,
                               int64_t da, int64_t da_off, int64_t db,
                               int64_t db_off, int64_t batch, int64_t m,
                               int64_t k, int64_t n, int32_t trans_a,
                               int32_t trans_b, int32_t b_batched) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "matmul_backward");
    MatmulDims d = matmulDims(batch, m, k, n, trans_a, trans_b, b_batched);
    int64_t bNumel = mul(d.bBatched ? batch : 1, mul(k, n));
    const void *pa = l.operand(a, a_off, mul(batch, mul(m, k)), "a");
    const void *pb = l.operand(b, b_off, bNumel, "b");
    const void *pdc = l.operand(dc, dc_off, mul(batch, mul(m, n)), "dc");
    void *pda = l.optional(da, da_off, mul(batch, mul(m, k)), "da");
    void *pdb = l.optional(db, db_off, bNumel, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.matmulBackward(dt, pa, pb, pdc, pda, pdb, d); });
  });
}

} // extern "C"
