//===- OptimizerOps.cpp - sgd_step, adamw_step, clip_grad_norm -------------===//

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

LogicalResult SGDStepOp::verify() {
  if (getLr().convertToDouble() < 0.0)
    return emitOpError("learning rate must be >= 0");
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
  double beta1 = getBeta1().convertToDouble();
  double beta2 = getBeta2().convertToDouble();
  if (getLr().convertToDouble() < 0.0 || getEps().convertToDouble() < 0.0)
    return emitOpError("learning rate and eps must be >= 0");
  if (beta1 < 0.0 || beta1 >= 1.0 || beta2 < 0.0 || beta2 >= 1.0)
    return emitOpError("betas must be in [0, 1), got (")
           << beta1 << ", " << beta2 << ")";
  if (failed(verifyGrad(*this, getParam(), getGrad())))
    return failure();
  return verifySameAsParam(*this, getParam().getType(),
                           {getExpAvg(), getExpAvgSq(),
                            getNewParam(), getNewExpAvg(), getNewExpAvgSq()},
                           "an operand or result");
}

LogicalResult ClipGradNormOp::verify() {
  if (!(getMaxNorm().convertToDouble() > 0.0))
    return emitOpError("max_norm must be positive");
  return success();
}
