//===- CApiLoss.cpp - C ABI: cross-entropy and MSE ------------------------===//
//
// Entry points of the C ABI (fsdprt.h) for cross-entropy and MSE: each
// validates dims and operand extents on the calling thread, then enqueues the
// backend call (CApiSupport.h).
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

LossReduction reductionFromCode(int32_t r) {
  if (r != FSDPRT_LOSS_MEAN && r != FSDPRT_LOSS_SUM)
    fail(Status::InvalidArgument, "unknown loss reduction ", r,
         " (0 = mean, 1 = sum)");
  return static_cast<LossReduction>(r);
}

/// What every cross-entropy call reads, checked: logits [n, width] of the
/// launch's dtype, c <= width of them classes, and targets [n].
struct CrossEntropyInputs {
  CrossEntropyInputs(Launch &l, int32_t targetDtype, int32_t reductionCode,
                     int64_t logitsBuf, int64_t logitsOff, int64_t targetsBuf,
                     int64_t targetsOff, int64_t n, int64_t c, int64_t width)
      : targetType(indexDType(targetDtype, "target_dtype")),
        reduction(reductionFromCode(reductionCode)) {
    nonNegative(n, "n"), requirePositive(c, "c");
    if (width < c)
      fail(Status::InvalidArgument, "logits rows of width ", width,
           " cannot hold c = ", c, " classes");
    logits = l.operand(logitsBuf, logitsOff, mul(n, width), "logits");
    targets = l.operand(targetsBuf, targetsOff, n, targetType, "targets");
  }
  DType targetType;
  LossReduction reduction;
  const void *logits = nullptr, *targets = nullptr;
};

} // namespace

extern "C" {

int32_t fsdprt_cross_entropy_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                     int32_t target_dtype, int64_t logits,
                                     int64_t logits_off, int64_t targets,
                                     int64_t targets_off, int64_t loss,
                                     int64_t loss_off, int64_t n, int64_t c,
                                     int64_t width, int32_t reduction,
                                     int64_t ignore_index) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "cross_entropy_forward");
    CrossEntropyInputs in(l, target_dtype, reduction, logits, logits_off,
                          targets, targets_off, n, c, width);
    void *po = l.operand(loss, loss_off, 1, "loss");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.crossEntropyForward(dt, in.targetType, in.logits, in.targets, po, n,
                             c, width, in.reduction, ignore_index);
    });
  });
}

int32_t fsdprt_cross_entropy_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int32_t target_dtype,
    int64_t logits, int64_t logits_off, int64_t targets, int64_t targets_off,
    int64_t dloss, int64_t dloss_off, int64_t dlogits, int64_t dlogits_off,
    int64_t n, int64_t c, int64_t width, int32_t reduction,
    int64_t ignore_index) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "cross_entropy_backward");
    CrossEntropyInputs in(l, target_dtype, reduction, logits, logits_off,
                          targets, targets_off, n, c, width);
    const void *pdl = l.operand(dloss, dloss_off, 1, "dloss");
    void *pd = l.operand(dlogits, dlogits_off, mul(n, width), "dlogits");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.crossEntropyBackward(dt, in.targetType, in.logits, in.targets, pdl,
                              pd, n, c, width, in.reduction, ignore_index);
    });
  });
}

int32_t fsdprt_cross_entropy_forward_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int32_t target_dtype,
    int64_t logits, int64_t logits_off, int64_t targets, int64_t targets_off,
    int64_t dloss, int64_t dloss_off, int64_t loss, int64_t loss_off,
    int64_t dlogits, int64_t dlogits_off, int64_t n, int64_t c,
    int64_t width, int32_t reduction, int64_t ignore_index) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "cross_entropy_forward_backward");
    CrossEntropyInputs in(l, target_dtype, reduction, logits, logits_off,
                          targets, targets_off, n, c, width);
    const void *pdl = l.operand(dloss, dloss_off, 1, "dloss");
    void *po = l.operand(loss, loss_off, 1, "loss");
    void *pd = l.operand(dlogits, dlogits_off, mul(n, width), "dlogits");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.crossEntropyForwardBackward(dt, in.targetType, in.logits, in.targets,
                                     pdl, po, pd, n, c, width, in.reduction,
                                     ignore_index);
    });
  });
}

int32_t fsdprt_mse_loss_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t a, int64_t a_off, int64_t b,
                                int64_t b_off, int64_t loss, int64_t loss_off,
                                int64_t numel, int32_t reduction) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "mse_loss_forward");
    LossReduction red = reductionFromCode(reduction);
    nonNegative(numel, "numel");
    const void *pa = l.operand(a, a_off, numel, "a");
    const void *pb = l.operand(b, b_off, numel, "b");
    void *po = l.operand(loss, loss_off, 1, "loss");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.mseLossForward(dt, pa, pb, po, numel, red); });
  });
}

int32_t fsdprt_mse_loss_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t a, int64_t a_off, int64_t b,
                                 int64_t b_off, int64_t dloss,
                                 int64_t dloss_off, int64_t da, int64_t da_off,
                                 int64_t db, int64_t db_off, int64_t numel,
                                 int32_t reduction) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "mse_loss_backward");
    LossReduction red = reductionFromCode(reduction);
    nonNegative(numel, "numel");
    const void *pa = l.operand(a, a_off, numel, "a");
    const void *pb = l.operand(b, b_off, numel, "b");
    const void *pdl = l.operand(dloss, dloss_off, 1, "dloss");
    void *pda = l.optional(da, da_off, numel, "da");
    void *pdb = l.optional(db, db_off, numel, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.mseLossBackward(dt, pa, pb, pdl, pda, pdb, numel, red);
    });
  });
}

} // extern "C"
