//===- CApiPointwise.cpp - pointwise ops, dropout, random fills, casts ----===//
//
// Entry points of the C ABI (fsdprt.h) for pointwise ops, dropout, random
// fills, casts: each validates dims and operand extents on the calling thread,
// then enqueues the backend call (CApiSupport.h).
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

Activation activationFromCode(int32_t kind) {
  if (kind < FSDPRT_RELU || kind > FSDPRT_SILU)
    fail(Status::InvalidArgument, "unknown activation kind ", kind);
  return static_cast<Activation>(kind);
}

UnaryMath unaryFromCode(int32_t kind) {
  if (kind < FSDPRT_UNARY_TANH || kind > FSDPRT_UNARY_ATAN)
    fail(Status::InvalidArgument, "unknown unary math kind ", kind);
  return static_cast<UnaryMath>(kind);
}

BinaryOp binaryFromCode(int32_t op) {
  if (op < FSDPRT_ADD || op > FSDPRT_FMOD)
    fail(Status::InvalidArgument, "unknown binary op ", op);
  return static_cast<BinaryOp>(op);
}

/// Checks y = f(x) over `numel` elements and enqueues
/// kernel(backend, dtype, x, y) (activations, unary math).
template <typename Kernel>
void enqueuePointwise(Launch &l, int64_t x, int64_t x_off, int64_t y,
                      int64_t y_off, int64_t numel, Kernel kernel) {
  nonNegative(numel, "numel");
  const void *px = l.operand(x, x_off, numel, "x");
  void *py = l.operand(y, y_off, numel, "y");
  Backend &be = l.backend();
  DType dt = l.dtype();
  l.enqueue([=, &be] { kernel(be, dt, px, py); });
}

/// The backward of a pointwise op: dx from x and dy, kernel(backend,
/// dtype, x, dy, dx).
template <typename Kernel>
void enqueuePointwiseBackward(Launch &l, int64_t x, int64_t x_off, int64_t dy,
                              int64_t dy_off, int64_t dx, int64_t dx_off,
                              int64_t numel, Kernel kernel) {
  nonNegative(numel, "numel");
  const void *px = l.operand(x, x_off, numel, "x");
  const void *pdy = l.operand(dy, dy_off, numel, "dy");
  void *pdx = l.operand(dx, dx_off, numel, "dx");
  Backend &be = l.backend();
  DType dt = l.dtype();
  l.enqueue([=, &be] { kernel(be, dt, px, pdy, pdx); });
}

} // namespace

extern "C" {

int32_t fsdprt_binary_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t op, int64_t a, int64_t a_off,
                              int32_t a_rank, const int64_t *a_shape, int64_t b,
                              int64_t b_off, int32_t b_rank,
                              const int64_t *b_shape, int64_t out,
                              int64_t out_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "binary_forward");
    BinaryOp bop = binaryFromCode(op);
    DType dt = dtypeFromCode(dtype, "dtype");
    if (!isFloat(dt) && bop != BinaryOp::Add && bop != BinaryOp::Sub &&
        bop != BinaryOp::Mul && bop != BinaryOp::FloorDiv)
      fail(Status::InvalidArgument, "binary op ", op, " of ", dtypeName(dt),
           " tensors: integers take add, sub, mul and floor_div only");
    if (isFloat(dt) && bop == BinaryOp::FloorDiv)
      fail(Status::InvalidArgument, "floor_div takes integer tensors only");
    Shape as = shapeFromAbi(a_rank, a_shape, "a_shape");
    Shape bs = shapeFromAbi(b_rank, b_shape, "b_shape");
    Shape os = broadcastShapes(as, bs);
    const void *pa = l.operand(a, a_off, numelOf(as), dt, "a");
    const void *pb = l.operand(b, b_off, numelOf(bs), dt, "b");
    void *po = l.operand(out, out_off, numelOf(os), dt, "out");
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.binaryForward(dt, bop, pa, as, pb, bs, po); });
  });
}

int32_t fsdprt_binary_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int32_t op, int64_t a, int64_t a_off,
                               int32_t a_rank, const int64_t *a_shape,
                               int64_t b, int64_t b_off, int32_t b_rank,
                               const int64_t *b_shape, int64_t dout,
                               int64_t dout_off, int64_t da, int64_t da_off,
                               int64_t db, int64_t db_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "binary_backward");
    BinaryOp bop = binaryFromCode(op);
    if (op > FSDPRT_DIV)
      fail(Status::InvalidArgument,
           "binary_backward takes add, sub, mul or div; maximum's and "
           "minimum's gradients are dout times FSDPRT_MAX_WEIGHT / "
           "FSDPRT_MIN_WEIGHT, keep's FSDPRT_KEEP of dout; comparisons have "
           "none");
    Shape as = shapeFromAbi(a_rank, a_shape, "a_shape");
    Shape bs = shapeFromAbi(b_rank, b_shape, "b_shape");
    Shape os = broadcastShapes(as, bs);
    // a and b are read only by mul's and div's; add/sub accept buffer 0.
    bool needValues = bop == BinaryOp::Mul || bop == BinaryOp::Div;
    const void *pa = needValues ? l.operand(a, a_off, numelOf(as), "a")
                                : l.optional(a, a_off, numelOf(as), "a");
    const void *pb = needValues ? l.operand(b, b_off, numelOf(bs), "b")
                                : l.optional(b, b_off, numelOf(bs), "b");
    const void *pd = l.operand(dout, dout_off, numelOf(os), "dout");
    void *pda = l.optional(da, da_off, numelOf(as), "da");
    void *pdb = l.optional(db, db_off, numelOf(bs), "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue(
        [=, &be] { be.binaryBackward(dt, bop, pa, as, pb, bs, pd, pda, pdb); });
  });
}

static int32_t scaleImpl(const char *fn, const char *op, int64_t ctx,
                         int64_t stream, int32_t dtype, int64_t x,
                         int64_t x_off, int64_t y, int64_t y_off, int64_t numel,
                         double factor) {
  return guarded(fn, [&] {
    Launch l(ctx, stream, dtype, op);
    nonNegative(numel, "numel");
    const void *px = l.operand(x, x_off, numel, "x");
    void *py = l.operand(y, y_off, numel, "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.scale(dt, px, py, numel, factor); });
  });
}

int32_t fsdprt_scale_forward(int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t x, int64_t x_off, int64_t y, int64_t y_off,
                             int64_t numel, double factor) {
  return scaleImpl(__func__, "scale_forward", ctx, stream, dtype, x, x_off, y,
                   y_off, numel, factor);
}

int32_t fsdprt_scale_backward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t dy, int64_t dy_off, int64_t dx,
                              int64_t dx_off, int64_t numel, double factor) {
  return scaleImpl(__func__, "scale_backward", ctx, stream, dtype, dy, dy_off,
                   dx, dx_off, numel, factor);
}

int32_t fsdprt_unary_forward(int64_t ctx, int64_t stream, int32_t dtype,
                             int32_t kind, int64_t x, int64_t x_off, int64_t y,
                             int64_t y_off, int64_t numel, double a, double b) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "unary_forward");
    UnaryMath op = unaryFromCode(kind);
    enqueuePointwise(l, x, x_off, y, y_off, numel,
                     [=](Backend &be, DType dt, const void *px, void *py) {
                       be.unaryForward(dt, op, px, py, numel, a, b);
                     });
  });
}

int32_t fsdprt_unary_backward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t kind, int64_t x, int64_t x_off,
                              int64_t dy, int64_t dy_off, int64_t dx,
                              int64_t dx_off, int64_t numel, double a,
                              double b) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "unary_backward");
    UnaryMath op = unaryFromCode(kind);
    enqueuePointwiseBackward(
        l, x, x_off, dy, dy_off, dx, dx_off, numel,
        [=](Backend &be, DType dt, const void *px, const void *pdy,
            void *pdx) {
          be.unaryBackward(dt, op, px, pdy, pdx, numel, a, b);
        });
  });
}

int32_t fsdprt_activation_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int32_t kind, int64_t x, int64_t x_off,
                                  int64_t y, int64_t y_off, int64_t numel) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "activation_forward");
    Activation act = activationFromCode(kind);
    enqueuePointwise(l, x, x_off, y, y_off, numel,
                     [=](Backend &be, DType dt, const void *px, void *py) {
                       be.activationForward(dt, act, px, py, numel);
                     });
  });
}

int32_t fsdprt_activation_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                   int32_t kind, int64_t x, int64_t x_off,
                                   int64_t dy, int64_t dy_off, int64_t dx,
                                   int64_t dx_off, int64_t numel) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "activation_backward");
    Activation act = activationFromCode(kind);
    enqueuePointwiseBackward(
        l, x, x_off, dy, dy_off, dx, dx_off, numel,
        [=](Backend &be, DType dt, const void *px, const void *pdy,
            void *pdx) {
          be.activationBackward(dt, act, px, pdy, pdx, numel);
        });
  });
}

/// A replayed step graph's key: the step moved on with the launches.
static const RngKey *liveKey(Launch &l, RngKey key) {
  return l.live<RngKey>([key](const StepValues &v) {
    return RngKey{key.seed, key.step + uint64_t(v.stepsSinceCapture),
                  key.rngId};
  });
}

static int32_t dropoutImpl(const char *fn, const char *op, int64_t ctx,
                           int64_t stream, int32_t dtype, int64_t x,
                           int64_t x_off, int64_t y, int64_t y_off,
                           int64_t numel, double p, int64_t seed, int64_t step,
                           int64_t rng_id) {
  return guarded(fn, [&] {
    Launch l(ctx, stream, dtype, op);
    nonNegative(numel, "numel");
    if (!(p >= 0.0 && p <= 1.0))
      fail(Status::InvalidArgument, "dropout probability ", p,
           " is not in [0, 1]");
    const void *px = l.operand(x, x_off, numel, "input");
    void *py = l.operand(y, y_off, numel, "output");
    Backend &be = l.backend();
    DType dt = l.dtype();
    RngKey key{static_cast<uint64_t>(seed), static_cast<uint64_t>(step),
               static_cast<uint64_t>(rng_id)};
    const RngKey *live = liveKey(l, key);
    l.enqueue([=, &be] { be.dropout(dt, px, py, numel, p, key, live); });
  });
}

int32_t fsdprt_dropout_forward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t y,
                               int64_t y_off, int64_t numel, double p,
                               int64_t seed, int64_t step, int64_t rng_id) {
  return dropoutImpl(__func__, "dropout_forward", ctx, stream, dtype, x, x_off,
                     y, y_off, numel, p, seed, step, rng_id);
}

int32_t fsdprt_dropout_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t dy, int64_t dy_off, int64_t dx,
                                int64_t dx_off, int64_t numel, double p,
                                int64_t seed, int64_t step, int64_t rng_id) {
  return dropoutImpl(__func__, "dropout_backward", ctx, stream, dtype, dy,
                     dy_off, dx, dx_off, numel, p, seed, step, rng_id);
}

int32_t fsdprt_rng_fill(int64_t ctx, int64_t stream, int32_t dtype,
                        int32_t distribution, int64_t dst, int64_t dst_off,
                        int64_t numel, double a, double b, int64_t seed,
                        int64_t step, int64_t rng_id) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "rng_fill");
    if (distribution != FSDPRT_RNG_UNIFORM && distribution != FSDPRT_RNG_NORMAL)
      fail(Status::InvalidArgument, "unknown distribution ", distribution);
    nonNegative(numel, "numel");
    void *pd = l.operand(dst, dst_off, numel, "dst");
    Backend &be = l.backend();
    DType dt = l.dtype();
    auto dist = static_cast<Distribution>(distribution);
    RngKey key{static_cast<uint64_t>(seed), static_cast<uint64_t>(step),
               static_cast<uint64_t>(rng_id)};
    const RngKey *live = liveKey(l, key);
    l.enqueue(
        [=, &be] { be.rngFill(dt, pd, numel, dist, a, b, key, live); });
  });
}

int32_t fsdprt_cast(int64_t ctx, int64_t stream, int32_t src_dtype, int64_t src,
                    int64_t src_off, int32_t dst_dtype, int64_t dst,
                    int64_t dst_off, int64_t numel) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "cast");
    DType st = dtypeFromCode(src_dtype, "src_dtype");
    DType dt = dtypeFromCode(dst_dtype, "dst_dtype");
    nonNegative(numel, "numel");
    const void *ps = l.operand(src, src_off, numel, st, "src");
    void *pd = l.operand(dst, dst_off, numel, dt, "dst");
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.cast(st, ps, dt, pd, numel); });
  });
}

} // extern "C"
