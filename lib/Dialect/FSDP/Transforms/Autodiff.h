//===- Autodiff.h - reverse-mode differentiation of a straight-line trace --===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_AUTODIFF_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_AUTODIFF_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::fsdp {

/// Builds, at `builder`'s insertion point (after the trace), the gradient of
/// `output` with respect to each of `inputs`, given the cotangent `seed` of
/// `output`. `trace` lists the ops computing `output` in execution order;
/// only ops on a path from an input to the output are differentiated, each
/// through its DifferentiableOpInterface, and cotangents of values used
/// several times are summed. `onBackwardOp(forwardOp, backwardOp)` is called
/// for every op created for `forwardOp`'s VJP. Inputs that do not reach the
/// output get no entry in `gradients`.
LogicalResult
differentiate(OpBuilder &builder, ArrayRef<Operation *> trace, Value output,
              Value seed, ArrayRef<Value> inputs,
              llvm::function_ref<void(Operation *, Operation *)> onBackwardOp,
              llvm::DenseMap<Value, Value> &gradients);

} // namespace mlir::fsdp

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_AUTODIFF_H
