//===- OptimizerVerifiers.h - checks the updates share ----------*- C++ -*-===//
#ifndef FSDP_LIB_DIALECT_FSDP_IR_OPTIMIZERVERIFIERS_H
#define FSDP_LIB_DIALECT_FSDP_IR_OPTIMIZERVERIFIERS_H

#include "mlir/IR/Operation.h"

namespace mlir::fsdp {

/// lr_scale >= 0; the segments (all three or none) of equal length, starts
/// increasing from 0, scales and decays >= 0, the first segment's equal to
/// the op's lr_scale and weight_decay.
template <typename OptimizerOp>
inline LogicalResult verifyParamGroups(OptimizerOp op) {
  double lrScale = op.getLrScale().convertToDouble();
  double weightDecay = op.getWeightDecay().convertToDouble();
  if (lrScale < 0.0)
    return op.emitOpError("lr_scale must be >= 0");
  auto starts = op.getSegmentStarts();
  auto scales = op.getSegmentLrScales();
  auto decays = op.getSegmentWeightDecays();
  if (!starts && !scales && !decays)
    return success();
  if (!starts || !scales || !decays || starts->size() != scales->size() ||
      starts->size() != decays->size() || starts->empty())
    return op.emitOpError("segment_starts, segment_lr_scales and "
                          "segment_weight_decays go together, one value per "
                          "segment");
  if ((*starts)[0] != 0 || !llvm::is_sorted(*starts) ||
      llvm::adjacent_find(*starts) != starts->end())
    return op.emitOpError("segment_starts must increase from 0");
  if (llvm::any_of(*scales, [](double v) { return v < 0.0; }) ||
      llvm::any_of(*decays, [](double v) { return v < 0.0; }))
    return op.emitOpError("segment lr scales and weight decays must be >= 0");
  if ((*scales)[0] != lrScale || (*decays)[0] != weightDecay)
    return op.emitOpError("lr_scale and weight_decay must be the first "
                          "segment's");
  return success();
}

} // namespace mlir::fsdp

#endif // FSDP_LIB_DIALECT_FSDP_IR_OPTIMIZERVERIFIERS_H
