//===- CApiConv.cpp - C ABI: convolution and max pooling ------------------===//
//
// Entry points of the C ABI (fsdprt.h) for the convolution and the max
// pooling (on the same geometry): each validates
// the geometry and the operand extents on the calling thread, then enqueues
// the backend call (CApiSupport.h).
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"
#include "fsdp/rt/math/Conv.h"

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

/// The geometry of `geometry`, refused unless every extent, stride and
/// dilation is positive, the padding non-negative and the groups divide
/// both channel counts; products are overflow-checked.
static ConvGeometry checkedGeometry(const int64_t *geometry) {
  if (!geometry)
    fail(Status::InvalidArgument, "geometry must not be null");
  ConvGeometry g = convGeometryFromAbi(geometry);
  nonNegative(g.n, "n");
  std::pair<int64_t, const char *> positive[] = {{g.c, "c"},
                                                 {g.h, "h"},
                                                 {g.w, "w"},
                                                 {g.o, "o"},
                                                 {g.kh, "kh"},
                                                 {g.kw, "kw"},
                                                 {g.oh, "oh"},
                                                 {g.ow, "ow"},
                                                 {g.strideH, "stride_h"},
                                                 {g.strideW, "stride_w"},
                                                 {g.dilationH, "dilation_h"},
                                                 {g.dilationW, "dilation_w"},
                                                 {g.groups, "groups"}};
  for (auto [v, what] : positive)
    requirePositive(v, what);
  nonNegative(g.padH, "pad_h"), nonNegative(g.padW, "pad_w");
  if (g.c % g.groups || g.o % g.groups)
    fail(Status::InvalidArgument, "groups ", g.groups, " must divide c = ", g.c,
         " and o = ", g.o);
  mul(mul(g.n, g.c), mul(g.h, g.w));
  mul(mul(g.n, g.o), mul(g.oh, g.ow));
  mul(mul(g.o, g.c), mul(g.kh, g.kw));
  return g;
}

/// A pooling's geometry: a convolution's with o = groups = c, whose windows
/// each hold an input element (2 · pad at most the dilated window).
static ConvGeometry checkedPoolGeometry(const int64_t *geometry) {
  ConvGeometry g = checkedGeometry(geometry);
  if (g.o != g.c || g.groups != g.c)
    fail(Status::InvalidArgument, "a pooling has o = groups = c = ", g.c,
         ", got o = ", g.o, " and groups = ", g.groups);
  if (2 * g.padH > g.dilationH * (g.kh - 1) + 1 ||
      2 * g.padW > g.dilationW * (g.kw - 1) + 1)
    fail(Status::InvalidArgument,
         "padding exceeds half the dilated window (pad_h = ", g.padH,
         ", pad_w = ", g.padW, ")");
  return g;
}

extern "C" {

int32_t fsdprt_conv_forward(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t x, int64_t x_off, int64_t w, int64_t w_off,
                            int64_t b, int64_t b_off, int64_t y, int64_t y_off,
                            const int64_t *geometry) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "conv_forward");
    ConvGeometry g = checkedGeometry(geometry);
    const void *px = l.operand(x, x_off, g.inputNumel(), "x");
    const void *pw = l.operand(w, w_off, g.weightNumel(), "w");
    const void *pb = l.optional(b, b_off, g.o, "b");
    void *py = l.operand(y, y_off, g.outputNumel(), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.convForward(dt, px, pw, pb, py, g); });
  });
}

int32_t fsdprt_conv_backward_input(int64_t ctx, int64_t stream, int32_t dtype,
                                   int64_t dy, int64_t dy_off, int64_t w,
                                   int64_t w_off, int64_t dx, int64_t dx_off,
                                   const int64_t *geometry) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "conv_backward_input");
    ConvGeometry g = checkedGeometry(geometry);
    const void *pdy = l.operand(dy, dy_off, g.outputNumel(), "dy");
    const void *pw = l.operand(w, w_off, g.weightNumel(), "w");
    void *pdx = l.operand(dx, dx_off, g.inputNumel(), "dx");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.convBackwardInput(dt, pdy, pw, pdx, g); });
  });
}

int32_t fsdprt_conv_backward_weight(int64_t ctx, int64_t stream, int32_t dtype,
                                    int64_t dy, int64_t dy_off, int64_t x,
                                    int64_t x_off, int64_t dw, int64_t dw_off,
                                    const int64_t *geometry) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "conv_backward_weight");
    ConvGeometry g = checkedGeometry(geometry);
    const void *pdy = l.operand(dy, dy_off, g.outputNumel(), "dy");
    const void *px = l.operand(x, x_off, g.inputNumel(), "x");
    void *pdw = l.operand(dw, dw_off, g.weightNumel(), "dw");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.convBackwardWeight(dt, pdy, px, pdw, g); });
  });
}

int32_t fsdprt_max_pool_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t x, int64_t x_off, int64_t y,
                                int64_t y_off, const int64_t *geometry) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "max_pool_forward");
    ConvGeometry g = checkedPoolGeometry(geometry);
    const void *px = l.operand(x, x_off, g.inputNumel(), "x");
    void *py = l.operand(y, y_off, g.outputNumel(), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.maxPoolForward(dt, px, py, g); });
  });
}

int32_t fsdprt_max_pool_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t x, int64_t x_off, int64_t dy,
                                 int64_t dy_off, int64_t dx, int64_t dx_off,
                                 const int64_t *geometry) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "max_pool_backward");
    ConvGeometry g = checkedPoolGeometry(geometry);
    const void *px = l.operand(x, x_off, g.inputNumel(), "x");
    const void *pdy = l.operand(dy, dy_off, g.outputNumel(), "dy");
    void *pdx = l.operand(dx, dx_off, g.inputNumel(), "dx");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.maxPoolBackward(dt, px, pdy, pdx, g); });
  });
}

} // extern "C"
