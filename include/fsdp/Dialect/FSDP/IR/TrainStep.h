//===- StepAttrs.h - the attributes that describe a train step -------------===//
//
// fsdp-build-train-step tags every op of a step with the FSDP unit and the
// phase it belongs to and names every argument and result; the sharding and
// scheduling passes read them back. One place for their spelling.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_STEPATTRS_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_STEPATTRS_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::fsdp {

// Op tags.
constexpr StringLiteral kUnitAttr = "fsdp.unit";
constexpr StringLiteral kPhaseAttr = "fsdp.phase";
constexpr StringLiteral kMicroBatchAttr = "fsdp.micro_batch";
constexpr StringLiteral kForward = "forward";
constexpr StringLiteral kBackward = "backward";
constexpr StringLiteral kOptimizer = "optimizer";

// Argument and result names.
constexpr StringLiteral kParamArg = "fsdp.param";
constexpr StringLiteral kStateArg = "fsdp.state";
constexpr StringLiteral kStepCountArg = "fsdp.step_count";
constexpr StringLiteral kBufferArg = "fsdp.buffer";
constexpr StringLiteral kLossResult = "fsdp.loss";
constexpr StringLiteral kGradNormResult = "fsdp.grad_norm";
constexpr StringLiteral kFlatParamArg = "fsdp.flat_param";
constexpr StringLiteral kFlatStateArg = "fsdp.flat_state";
/// On a rank-local unit's flat parameter: whole on every rank, never reduced.
constexpr StringLiteral kRankLocalArg = "fsdp.rank_local";

// Mixed precision: on the model (fsdp-mixed-precision), then on the step.
constexpr StringLiteral kMixedPrecisionAttr = "fsdp.mixed_precision";
constexpr StringLiteral kParamDtypeKey = "param_dtype";
constexpr StringLiteral kReduceDtypeKey = "reduce_dtype";
constexpr StringLiteral kBufferDtypeKey = "buffer_dtype";
constexpr StringLiteral kKeepLowPrecisionGradsKey = "keep_low_precision_grads";

/// The dtype `key` of a mixed-precision policy, or null.
inline Type getPolicyDtype(Operation *op, StringRef key) {
  auto policy = op->getAttrOfType<DictionaryAttr>(kMixedPrecisionAttr);
  auto type = policy ? policy.getAs<TypeAttr>(key) : TypeAttr();
  return type ? type.getValue() : Type();
}

// Step function attributes.
constexpr StringLiteral kModelAttr = "fsdp.model";
constexpr StringLiteral kMeshAttr = "fsdp.mesh";
constexpr StringLiteral kStrategyAttr = "fsdp.strategy";

/// Tags `op` as part of `unit`'s `phase`.
inline void tagOp(Operation *op, StringRef unit, StringRef phase) {
  Builder b(op->getContext());
  op->setAttr(kUnitAttr, b.getStringAttr(unit));
  op->setAttr(kPhaseAttr, b.getStringAttr(phase));
}

/// The phase an op was tagged with ("" if none).
inline StringRef getPhase(Operation *op) {
  auto phase = op->getAttrOfType<StringAttr>(kPhaseAttr);
  return phase ? phase.getValue() : StringRef();
}

/// The fully-qualified name of a parameter or buffer declaration, as
/// named_parameters() spells it.
inline std::string qualifiedName(Operation *decl) {
  std::string module = decl->getParentOfType<NNModuleOp>().getQualifiedName();
  StringRef name = SymbolTable::getSymbolName(decl).getValue();
  return module.empty() ? name.str() : module + "." + name.str();
}

/// The train step built for `model`, or null.
inline func::FuncOp getTrainStep(ModelOp model) {
  auto module = model->getParentOfType<ModuleOp>();
  for (auto func : module.getOps<func::FuncOp>())
    if (auto ref = func->getAttrOfType<FlatSymbolRefAttr>(kModelAttr))
      if (ref.getValue() == model.getSymName())
        return func;
  return {};
}

} // namespace mlir::fsdp

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_STEPATTRS_H
