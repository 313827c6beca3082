//===- OptimizerOps.cpp - the optimizer updates, clip_grad_norm ------------===//

#include "OptimizerVerifiers.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

using namespace mlir;
using namespace mlir::fsdp;

/// Every tensor of an update has the parameter's type.
static LogicalResult verifySameAsParam(Operation *op, Type param,
                                       ValueRange values, StringRef what) {
  for (Value value : values)
    if (value.getType() != param)
      return op->emitOpError() << what << " has type " << value.getType()
                               << ", not the parameter's " << param;
  return success();
}

/// The gradient has the parameter's shape; its dtype may be lower
/// (keep_low_precision_grads): the update computes in the parameter's.
static LogicalResult verifyGrad(Operation *op, Value param, Value grad) {
  auto p = cast<RankedTensorType>(param.getType());
  auto g = cast<RankedTensorType>(grad.getType());
  if (p.getShape() != g.getShape())
    return op->emitOpError("gradient has type ")
           << g << ", not the shape of the parameter's " << p;
  return success();
}

/// Adam's and Lion's betas: each in [0, 1).
template <typename OptimizerOp>
static LogicalResult verifyBetas(OptimizerOp op) {
  double beta1 = op.getBeta1().convertToDouble();
  double beta2 = op.getBeta2().convertToDouble();
  if (beta1 < 0.0 || beta1 >= 1.0 || beta2 < 0.0 || beta2 >= 1.0)
    return op.emitOpError("betas must be in [0, 1), got (")
           << beta1 << ", " << beta2 << ")";
  return success();
}

NamedAttribute fsdp::sgdOperandSegments(Builder &b, bool momentum,
                                        bool skip) {
  return b.getNamedAttr(
      SGDStepOp::getOperandSegmentSizesAttrName(
          OperationName(SGDStepOp::getOperationName(), b.getContext())),
      b.getDenseI32ArrayAttr({1, 1, momentum ? 1 : 0, 1, skip ? 1 : 0}));
}

LogicalResult SGDStepOp::verify() {
  if (getLr().convertToDouble() < 0.0)
    return emitOpError("learning rate must be >= 0");
  if (failed(verifyParamGroups(*this)))
    return failure();
  bool hasMomentum = getMomentum().convertToDouble() != 0.0;
  if (hasMomentum != (getMomentumBuffer() != nullptr) ||
      hasMomentum != (getNewMomentumBuffer() != nullptr))
    return emitOpError("takes and returns a momentum buffer exactly when "
                       "momentum is non-zero");
  if (getNesterov() && (!hasMomentum ||
                        getDampening().convertToDouble() != 0.0))
    return emitOpError("nesterov momentum requires a momentum and zero "
                       "dampening");
  if (failed(verifyGrad(*this, getParam(), getGrad())))
    return failure();
  Type param = getParam().getType();
  SmallVector<Value> values = {getNewParam()};
  if (hasMomentum)
    values.append({getMomentumBuffer(), getNewMomentumBuffer()});
  return verifySameAsParam(*this, param, values, "an operand or result");
}

LogicalResult AdamWStepOp::verify() {
  if (getLr().convertToDouble() < 0.0 || getEps().convertToDouble() < 0.0)
    return emitOpError("learning rate and eps must be >= 0");
  if (failed(verifyParamGroups(*this)) || failed(verifyBetas(*this)) ||
      failed(verifyGrad(*this, getParam(), getGrad())))
    return failure();
  return verifySameAsParam(*this, getParam().getType(),
                           {getExpAvg(), getExpAvgSq(),
                            getNewParam(), getNewExpAvg(), getNewExpAvgSq()},
                           "an operand or result");
}

LogicalResult LionStepOp::verify() {
  if (getLr().convertToDouble() < 0.0)
    return emitOpError("learning rate must be >= 0");
  if (failed(verifyParamGroups(*this)) || failed(verifyBetas(*this)) ||
      failed(verifyGrad(*this, getParam(), getGrad())))
    return failure();
  return verifySameAsParam(*this, getParam().getType(),
                           {getExpAvg(), getNewParam(), getNewExpAvg()},
                           "an operand or result");
}

LogicalResult ClipGradNormOp::verify() {
  if (!(getMaxNorm().convertToDouble() > 0.0))
    return emitOpError("max_norm must be positive");
  if (!(getNormType().convertToDouble() > 0.0))
    return emitOpError("norm_type must be > 0 or inf, got ")
           << getNormType().convertToDouble();
  return success();
}
