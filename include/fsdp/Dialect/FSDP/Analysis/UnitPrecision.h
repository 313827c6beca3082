//===- UnitPrecision.h - the mixed precision of one FSDP unit ---*- C++ -*-===//
//
// A unit's own settings (#fsdp.unit<param_dtype = ..., ...>, FSDP2's
// per-module MixedPrecisionPolicy) override, field by field, the model-wide
// policy fsdp-mixed-precision records (FSDP1's MixedPrecision).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_ANALYSIS_UNITPRECISION_H
#define FSDP_DIALECT_FSDP_ANALYSIS_UNITPRECISION_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

namespace mlir::fsdp {

struct UnitPrecision {
  /// Gather and compute dtype; null: the parameters' own.
  Type paramDtype;
  /// Gradient reduction dtype; null: the gradient's own.
  Type reduceDtype;
  /// The forward's floating-point results are cast to it; null: not cast.
  Type outputDtype;
  /// The forward's floating-point arguments are cast to paramDtype.
  bool castForwardInputs = false;
};

/// The precision of `unit` (a marked unit or the root) under the model-wide
/// `policy` (the model's fsdp.mixed_precision, null for none):
/// - param_dtype: the unit's, else the policy's;
/// - reduce_dtype: the unit's, else the unit's param_dtype when it sets one
///   (PyTorch's reduce_dtype=None in FSDP1), else the policy's;
/// - output_dtype: the unit's (the model-wide policy has none);
/// - cast_forward_inputs: the unit's, else true for the root (FSDP1's
///   cast_root_forward_inputs) and for a unit setting its own param_dtype
///   (FSDP2's default), else false (FSDP1's cast_forward_inputs).
UnitPrecision getUnitPrecision(NNModuleOp unit, DictionaryAttr policy);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_UNITPRECISION_H
