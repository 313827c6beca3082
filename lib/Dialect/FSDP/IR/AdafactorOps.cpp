//===- AdafactorOps.cpp - Adafactor's update, whole and sharded -----------===//
//
// The verifiers of FSDPAdafactorOps.td: hyper-parameters in torch's ranges,
// and every tensor sized by the flat parameter's layout (AdafactorLayout.h).
//
//===----------------------------------------------------------------------===//

#include "OptimizerVerifiers.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "fsdp/rt/AdafactorLayout.h"

using namespace mlir;
using namespace mlir::fsdp;

/// torch.optim.Adafactor's ranges: beta2_decay <= 0, eps1 and eps2 >= 0,
/// d >= 1.
template <typename AdafactorOp>
static LogicalResult verifyHyperParams(AdafactorOp op) {
  if (op.getBeta2Decay().convertToDouble() > 0.0)
    return op.emitOpError("beta2_decay must be <= 0");
  if (op.getEps1().convertToDouble() < 0.0 ||
      op.getEps2().convertToDouble() < 0.0)
    return op.emitOpError("eps1 and eps2 must be >= 0");
  if (!(op.getD().convertToDouble() >= 1.0))
    return op.emitOpError("d (the update clipping threshold) must be >= 1");
  return success();
}

/// The op's layout, or an error naming what is wrong with it.
static FailureOr<::fsdp::rt::AdafactorLayout>
layoutOf(Operation *op, ArrayRef<int64_t> values) {
  ::fsdp::rt::AdafactorLayout layout;
  std::string error =
      ::fsdp::rt::AdafactorLayout::parse(values.data(), values.size(), layout);
  if (!error.empty())
    return op->emitOpError(error), failure();
  return layout;
}

static LogicalResult expectNumel(Operation *op, Value value, int64_t numel,
                                 StringRef what) {
  int64_t actual = cast<RankedTensorType>(value.getType()).getNumElements();
  if (actual != numel)
    return op->emitOpError() << what << " has " << actual
                             << " elements; the layout needs " << numel;
  return success();
}

/// The state, statistics and update norms of a flat parameter of `layout`.
static LogicalResult verifySizes(Operation *op,
                                 const ::fsdp::rt::AdafactorLayout &layout,
                                 Value state, Value stats, Value updateSq) {
  if (failed(expectNumel(op, state, layout.stateSize, "state")) ||
      failed(expectNumel(op, stats, layout.statsSize(), "stats")))
    return failure();
  return expectNumel(op, updateSq, layout.params.size(), "update_sq");
}

/// The parameter (or its flat shard) and gradient: the same shape, the
/// parameter f32 (the update computes in it; the gradient may be lower,
/// keep_low_precision_grads).
static LogicalResult verifyShard(Operation *op, Value param, Value grad) {
  auto p = cast<RankedTensorType>(param.getType());
  if (!p.getElementType().isF32())
    return op->emitOpError("parameter must be f32, got ") << p;
  if (cast<RankedTensorType>(grad.getType()).getShape() != p.getShape())
    return op->emitOpError("gradient has type ")
           << grad.getType() << ", not the shape of the parameter's " << p;
  return success();
}

LogicalResult AdafactorStepOp::verify() {
  if (getLr().convertToDouble() < 0.0 ||
      getWeightDecay().convertToDouble() < 0.0 ||
      getLrScale().convertToDouble() < 0.0)
    return emitOpError("lr, weight_decay and lr_scale must be >= 0");
  if (failed(verifyHyperParams(*this)))
    return failure();
  auto param = cast<RankedTensorType>(getParam().getType());
  if (failed(verifyShard(*this, getParam(), getGrad())))
    return failure();
  if (getNewParam().getType() != param)
    return emitOpError("new parameter must have the parameter's type");
  if (getState().getType() != getNewState().getType())
    return emitOpError("state and new state must have one type");
  ::fsdp::rt::AdafactorParam p =
      ::fsdp::rt::adafactorParamOf(param.getShape().data(), param.getRank(), 0);
  return expectNumel(*this, getState(), p.stateSize(), "state");
}

LogicalResult AdafactorStatsOp::verify() {
  FailureOr<::fsdp::rt::AdafactorLayout> layout = layoutOf(*this, getLayout());
  if (failed(layout) || failed(verifyShard(*this, getParam(), getGrad())))
    return failure();
  return expectNumel(*this, getStats(), layout->statsSize(), "stats");
}

LogicalResult AdafactorFactorOp::verify() {
  if (failed(verifyHyperParams(*this)))
    return failure();
  FailureOr<::fsdp::rt::AdafactorLayout> layout = layoutOf(*this, getLayout());
  if (failed(layout) || failed(verifyShard(*this, getParam(), getGrad())))
    return failure();
  if (getState().getType() != getNewState().getType())
    return emitOpError("state and new state must have one type");
  return verifySizes(*this, *layout, getState(), getStats(), getUpdateSq());
}

LogicalResult AdafactorApplyOp::verify() {
  if (getLr().convertToDouble() < 0.0)
    return emitOpError("learning rate must be >= 0");
  if (failed(verifyHyperParams(*this)) || failed(verifyParamGroups(*this)))
    return failure();
  FailureOr<::fsdp::rt::AdafactorLayout> layout = layoutOf(*this, getLayout());
  if (failed(layout) || failed(verifyShard(*this, getParam(), getGrad())))
    return failure();
  if (getNewParam().getType() != getParam().getType())
    return emitOpError("new parameter must have the parameter's type");
  return verifySizes(*this, *layout, getState(), getStats(), getUpdateSq());
}
