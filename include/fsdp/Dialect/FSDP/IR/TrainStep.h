//===- TrainStep.h - the train-step contract between passes -----*- C++ -*-===//
//
// fsdp-build-train-step tags every op of a step with the FSDP unit, phase
// and micro-batch it belongs to and gives every argument and result a role
// (a parameter, optimizer state, the step count, a buffer, an input, the
// loss, the gradient norm; after fsdp-shard a flat parameter or its state);
// the sharding, scheduling, report and lowering passes read them back. The
// attributes are declared with the dialect (FSDPBase.td: discardableAttrs,
// whose names these constants are) and verified wherever they appear
// (TrainStep.cpp); on a function carrying `fsdp.model` the verifier checks
// the whole contract, so every pass after fsdp-build-train-step can rely on
// it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_TRAINSTEP_H
#define FSDP_DIALECT_FSDP_IR_TRAINSTEP_H

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

#include <optional>

namespace mlir::fsdp {

// Op tags.
constexpr StringLiteral kUnitAttr = FSDPDialect::UnitAttrHelper::getNameStr();
constexpr StringLiteral kPhaseAttr = FSDPDialect::PhaseAttrHelper::getNameStr();
constexpr StringLiteral kMicroBatchAttr =
    FSDPDialect::MicroBatchAttrHelper::getNameStr();
/// On the nn.add that sums a parameter's gradients over micro-batches.
constexpr StringLiteral kGradAccumulationAttr =
    FSDPDialect::GradAccumulationAttrHelper::getNameStr();
constexpr Phase kForward = Phase::forward;
constexpr Phase kBackward = Phase::backward;
constexpr Phase kOptimizer = Phase::optimizer;

// Argument and result roles.
constexpr StringLiteral kParamArg = FSDPDialect::ParamAttrHelper::getNameStr();
constexpr StringLiteral kStateArg = FSDPDialect::StateAttrHelper::getNameStr();
constexpr StringLiteral kStepCountArg =
    FSDPDialect::StepCountAttrHelper::getNameStr();
constexpr StringLiteral kBufferArg =
    FSDPDialect::BufferAttrHelper::getNameStr();
/// On an input argument: its position among the model's inputs (with
/// kMicroBatchAttr: which micro-batch it feeds).
constexpr StringLiteral kInputArg = FSDPDialect::InputAttrHelper::getNameStr();
constexpr StringLiteral kLossResult = FSDPDialect::LossAttrHelper::getNameStr();
constexpr StringLiteral kGradNormResult =
    FSDPDialect::GradNormAttrHelper::getNameStr();
/// The loss scaler's found-inf flag (0 or 1, the same on every rank).
constexpr StringLiteral kFoundInfResult =
    FSDPDialect::FoundInfAttrHelper::getNameStr();
/// An eval step's result: one micro-batch's value of the root forward's
/// output of this name (with kMicroBatchAttr), e.g. "logits".
constexpr StringLiteral kOutputResult =
    FSDPDialect::OutputAttrHelper::getNameStr();
constexpr StringLiteral kFlatParamArg =
    FSDPDialect::FlatParamAttrHelper::getNameStr();
constexpr StringLiteral kFlatStateArg =
    FSDPDialect::FlatStateAttrHelper::getNameStr();
// What a flat parameter argument holds: its parameters' names and offsets,
// and its unpadded element count.
constexpr StringLiteral kFlatParamsArg =
    FSDPDialect::ParamsAttrHelper::getNameStr();
constexpr StringLiteral kFlatOffsetsArg =
    FSDPDialect::OffsetsAttrHelper::getNameStr();
constexpr StringLiteral kFlatNumelArg =
    FSDPDialect::FlatNumelAttrHelper::getNameStr();
/// On a rank-local unit's flat parameter: whole on every rank, never reduced.
constexpr StringLiteral kRankLocalArg =
    FSDPDialect::RankLocalAttrHelper::getNameStr();
/// On a unit's flat parameter of frozen (requires_grad = false) parameters:
/// sharded and gathered as the unit's other flat parameter, but never
/// reduced nor updated, so it has no gradient, state or result.
constexpr StringLiteral kFrozenArg = FSDPDialect::FrozenAttrHelper::getNameStr();
/// With kRankLocalArg, on the flat parameter of an ignored unit (FSDP's
/// ignored_modules): whole on every rank but starting identical.
constexpr StringLiteral kIgnoredArg =
    FSDPDialect::IgnoredAttrHelper::getNameStr();

// Step function attributes.
constexpr StringLiteral kModelAttr = FSDPDialect::ModelAttrHelper::getNameStr();
constexpr StringLiteral kMicroBatchesAttr =
    FSDPDialect::MicroBatchesAttrHelper::getNameStr();
/// On a forward-only (evaluation) step: no gradient, optimizer or state.
constexpr StringLiteral kEvalAttr = FSDPDialect::EvalAttrHelper::getNameStr();
/// On a train step: the trainable parameters (qualified names) its loss
/// does not reach through differentiable ops, which it therefore does not
/// train (torch leaves their .grad None and torch.optim skips them).
constexpr StringLiteral kUnreachedAttr =
    FSDPDialect::UnreachedAttrHelper::getNameStr();
/// On an eval step: the units (qualified names, "" the root) whose weights
/// stay whole on every rank across steps (fsdp-fit-memory-budget's choice
/// for a decode step): fsdp-shard lays their flat parameters out whole
/// (a shard group of one), so no step gathers them.
constexpr StringLiteral kKeepWeightsWholeAttr =
    FSDPDialect::KeepWeightsWholeAttrHelper::getNameStr();
/// On a step whose sharded parameters, optimizer state and reduced
/// gradients live in host memory, with the optimizer on the host
/// (fsdp-cpu-offload).
constexpr StringLiteral kCpuOffloadAttr =
    FSDPDialect::CpuOffloadAttrHelper::getNameStr();
constexpr StringLiteral kGradSyncAttr =
    FSDPDialect::GradSyncAttrHelper::getNameStr();
constexpr StringLiteral kMeshAttr = FSDPDialect::MeshAttrHelper::getNameStr();
constexpr StringLiteral kStrategyAttr =
    FSDPDialect::StrategyAttrHelper::getNameStr();
/// On the lowered module: the program description (JSON) for the runner.
constexpr StringLiteral kProgramAttr =
    FSDPDialect::ProgramAttrHelper::getNameStr();

// Mixed precision: on the model (fsdp-mixed-precision), then on the step.
constexpr StringLiteral kMixedPrecisionAttr =
    FSDPDialect::MixedPrecisionAttrHelper::getNameStr();
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

/// Tags `op` as part of `unit`'s `phase`.
inline void tagOp(Operation *op, StringRef unit, Phase phase) {
  Builder b(op->getContext());
  op->setAttr(kUnitAttr, b.getStringAttr(unit));
  op->setAttr(kPhaseAttr, PhaseAttr::get(op->getContext(), phase));
}

/// The phase an op was tagged with, if any.
inline std::optional<Phase> getPhase(Operation *op) {
  if (auto phase = op->getAttrOfType<PhaseAttr>(kPhaseAttr))
    return phase.getValue();
  return std::nullopt;
}

/// The phase's name ("forward", ...), "" for an untagged op.
inline StringRef getPhaseName(Operation *op) {
  std::optional<Phase> phase = getPhase(op);
  return phase ? stringifyPhase(*phase) : StringRef();
}

/// The micro-batch an op belongs to (0 when untagged: a single one).
inline int64_t getMicroBatch(Operation *op) {
  auto attr = op->getAttrOfType<IntegerAttr>(kMicroBatchAttr);
  return attr ? attr.getInt() : 0;
}

/// The unit an op was tagged with ("" for none and for the root's ops).
inline StringRef getUnit(Operation *op) {
  auto unit = op->getAttrOfType<StringAttr>(kUnitAttr);
  return unit ? unit.getValue() : StringRef();
}

/// Whether `step` offloads to the CPU (fsdp-cpu-offload).
inline bool isOffloaded(func::FuncOp step) {
  return step && step->hasAttr(kCpuOffloadAttr);
}
/// Whether an argument of an offloaded step lives in host memory: its flat
/// parameters and optimizer state.
inline bool isHostArgument(func::FuncOp step, unsigned argNumber) {
  return isOffloaded(step) && (step.getArgAttr(argNumber, kFlatParamArg) ||
                               step.getArgAttr(argNumber, kFlatStateArg));
}
/// The optimizer updates, which an offloaded step runs on the host: one
/// op per parameter or flat shard (Adafactor's whole-parameter op before
/// fsdp-shard, which splits it).
inline bool isOptimizerUpdate(Operation *op) {
  return isa<SGDStepOp, AdamWStepOp, LionStepOp, AdafactorStepOp>(op);
}

/// The units an eval step keeps whole across steps (kKeepWeightsWholeAttr;
/// none without it).
inline llvm::StringSet<> getKeptWholeUnits(func::FuncOp step) {
  llvm::StringSet<> units;
  if (auto names = step->getAttrOfType<ArrayAttr>(kKeepWeightsWholeAttr))
    for (StringRef name : names.getAsValueRange<StringAttr>())
      units.insert(name);
  return units;
}
/// Marks `step` to keep `units` whole across steps.
inline void setKeptWholeUnits(func::FuncOp step,
                              ArrayRef<std::string> units) {
  SmallVector<Attribute> names;
  for (const std::string &name : units)
    names.push_back(StringAttr::get(step.getContext(), name));
  step->setAttr(kKeepWeightsWholeAttr,
                ArrayAttr::get(step.getContext(), names));
}

/// "full-shard" for ShardingStrategy::full_shard: the spelling of the
/// sharding-strategy option, the report and the program description.
std::string strategyOptionName(ShardingStrategy strategy);
/// The strategy an option names ("full-shard", ...), if any.
std::optional<ShardingStrategy> parseStrategyOption(StringRef option);
/// The sharded step's strategy (the verifier guarantees one beside a mesh).
inline ShardingStrategy getStrategy(func::FuncOp step) {
  return step->getAttrOfType<ShardingStrategyAttr>(kStrategyAttr).getValue();
}

/// The fully-qualified name of a parameter or buffer declaration, as
/// named_parameters() spells it.
inline std::string qualifiedName(Operation *decl) {
  std::string module = decl->getParentOfType<NNModuleOp>().getQualifiedName();
  StringRef name = SymbolTable::getSymbolName(decl).getValue();
  return module.empty() ? name.str() : module + "." + name.str();
}

/// An error at `op`'s location, worded as emitOpError's, that does not
/// attach the op: a train step is thousands of lines, which MLIR would
/// print beside the message. Use it for errors about a whole step.
InFlightDiagnostic emitStepError(Operation *op);

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

#endif // FSDP_DIALECT_FSDP_IR_TRAINSTEP_H
