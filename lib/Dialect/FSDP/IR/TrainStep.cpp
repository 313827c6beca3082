//===- TrainStep.cpp - verifying the train-step contract ------------------===//
//
// The dialect's attribute verifiers: every `fsdp.*` attribute on an op, a
// region argument or a result must be one the dialect declares
// (FSDPBase.td), of its type, where it may appear; a function carrying
// `fsdp.model` (a train step) must give every argument and result exactly
// one role and return exactly one loss.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::fsdp;

std::string mlir::fsdp::strategyOptionName(ShardingStrategy strategy) {
  std::string name = stringifyShardingStrategy(strategy).str();
  llvm::replace(name, '_', '-');
  return name;
}

InFlightDiagnostic mlir::fsdp::emitStepError(Operation *op) {
  return emitError(op->getLoc()) << "'" << op->getName() << "' op ";
}

std::optional<ShardingStrategy>
mlir::fsdp::parseStrategyOption(StringRef option) {
  if (option.contains('_'))
    return std::nullopt; // Only the hyphenated spelling is an option.
  std::string name = option.str();
  llvm::replace(name, '-', '_');
  return symbolizeShardingStrategy(name);
}

namespace {

/// Where an attribute of the contract may appear.
enum Place : unsigned { OnOp = 1, OnArg = 2, OnResult = 4 };

struct AttrRule {
  StringLiteral name;
  unsigned places;
  /// What the value must be, for the diagnostic.
  const char *expected;
  bool (*isValid)(Attribute);
};

template <typename T> bool is(Attribute a) { return isa<T>(a); }
bool isName(Attribute a) {
  auto s = dyn_cast<StringAttr>(a);
  return s && !s.getValue().empty();
}
bool isIndex(Attribute a) {
  auto i = dyn_cast<IntegerAttr>(a);
  return i && i.getType().isInteger(64) && !i.getValue().isNegative();
}
bool isCount(Attribute a) {
  return isIndex(a) && !cast<IntegerAttr>(a).getValue().isZero();
}
bool isNameList(Attribute a) {
  auto list = dyn_cast<ArrayAttr>(a);
  return list && llvm::all_of(list, isName);
}
/// Unit names: the root's is "".
bool isUnitList(Attribute a) {
  auto list = dyn_cast<ArrayAttr>(a);
  return list && llvm::all_of(list, [](Attribute e) {
           return isa<StringAttr>(e);
         });
}

const AttrRule kRules[] = {
    {kUnitAttr, OnOp, "a unit name (string)", is<StringAttr>},
    {kPhaseAttr, OnOp, "#fsdp<phase forward|backward|optimizer>",
     is<PhaseAttr>},
    {kMicroBatchAttr, OnOp | OnArg | OnResult, "a micro-batch index (i64 >= 0)",
     isIndex},
    {kGradAccumulationAttr, OnOp, "a unit attribute", is<mlir::UnitAttr>},
    {kParamArg, OnArg | OnResult, "a parameter name (non-empty string)",
     isName},
    {kStateArg, OnArg | OnResult, "an optimizer state name (non-empty string)",
     isName},
    {kStepCountArg, OnArg | OnResult, "a unit attribute", is<mlir::UnitAttr>},
    {kBufferArg, OnArg | OnResult, "a buffer name (non-empty string)", isName},
    {kInputArg, OnArg, "an input index (i64 >= 0)", isIndex},
    {kLossResult, OnResult, "a unit attribute", is<mlir::UnitAttr>},
    {kGradNormResult, OnResult, "a unit attribute", is<mlir::UnitAttr>},
    {kFoundInfResult, OnResult, "a unit attribute", is<mlir::UnitAttr>},
    {kOutputResult, OnResult, "an output name (non-empty string)", isName},
    {kFlatParamArg, OnArg | OnResult, "a unit name (string)", is<StringAttr>},
    {kFlatStateArg, OnArg | OnResult,
     "an optimizer state name (non-empty string)", isName},
    {kFlatParamsArg, OnArg, "a list of parameter names", isNameList},
    {kFlatOffsetsArg, OnArg, "an array<i64> of offsets", is<DenseI64ArrayAttr>},
    {kFlatNumelArg, OnArg, "an element count (i64 >= 0)", isIndex},
    {kRankLocalArg, OnArg, "a unit attribute", is<mlir::UnitAttr>},
    {kFrozenArg, OnArg, "a unit attribute", is<mlir::UnitAttr>},
    {kIgnoredArg, OnArg, "a unit attribute", is<mlir::UnitAttr>},
    {kModelAttr, OnOp, "a model symbol (@name)", is<FlatSymbolRefAttr>},
    {kMicroBatchesAttr, OnOp, "a micro-batch count (i64 >= 1)", isCount},
    {kEvalAttr, OnOp, "a unit attribute", is<mlir::UnitAttr>},
    {kKeepWeightsWholeAttr, OnOp, "a list of unit names", isUnitList},
    {kUnreachedAttr, OnOp, "a list of parameter names", isNameList},
    {kCpuOffloadAttr, OnOp, "a unit attribute", is<mlir::UnitAttr>},
    {kGradSyncAttr, OnOp, "#fsdp<grad_sync every_micro_batch|last_micro_batch>",
     is<GradSyncAttr>},
    {kMixedPrecisionAttr, OnOp, "a dictionary of dtypes", is<DictionaryAttr>},
    {kMeshAttr, OnOp, "#fsdp.mesh<...>", is<MeshAttr>},
    {kStrategyAttr, OnOp,
     "#fsdp<strategy full_shard|shard_grad_op|no_shard|hybrid_shard|"
     "hybrid_shard_zero2>",
     is<ShardingStrategyAttr>},
    {kProgramAttr, OnOp, "a program description (string)", is<StringAttr>},
};

const char *placeName(Place place) {
  return place == OnOp    ? "an operation"
         : place == OnArg ? "an argument"
                          : "a result";
}

/// Checks one attribute of the contract; `where` prefixes the diagnostic
/// ("argument #2 ").
LogicalResult verifyRule(Operation *op, NamedAttribute attr, Place place,
                         const Twine &where) {
  const AttrRule *rule = llvm::find_if(
      kRules, [&](const AttrRule &r) { return r.name == attr.getName(); });
  if (rule == std::end(kRules))
    return emitStepError(op) << where << "has an unknown fsdp attribute '"
                             << attr.getName().getValue() << "'";
  if (!(rule->places & place))
    return emitStepError(op) << where << "carries '" << rule->name
                             << "', which is not valid on " << placeName(place);
  if (!rule->isValid(attr.getValue()))
    return emitStepError(op)
           << where << "attribute '" << rule->name << "' must be "
           << rule->expected << ", got " << attr.getValue();
  return success();
}

// Roles: every argument and result of a train step has exactly one.
constexpr StringLiteral kArgRoles[] = {kParamArg,  kStateArg, kStepCountArg,
                                       kBufferArg, kInputArg, kFlatParamArg};
constexpr StringLiteral kResultRoles[] = {
    kLossResult, kGradNormResult, kFoundInfResult, kOutputResult, kParamArg,
    kStateArg,   kStepCountArg,   kBufferArg,      kFlatParamArg};

/// One role among `roles` in `attrs`, or an error naming what is wrong.
LogicalResult verifyOneRole(Operation *op, DictionaryAttr attrs,
                            ArrayRef<StringLiteral> roles, const Twine &what) {
  SmallVector<StringRef> present;
  for (StringLiteral role : roles)
    if (attrs && attrs.get(role))
      present.push_back(role);
  if (present.size() == 1)
    return success();
  InFlightDiagnostic diag = emitStepError(op) << what;
  if (present.empty()) {
    diag << " of the train step has no role; expected one of ";
    llvm::interleaveComma(roles, diag);
  } else {
    diag << " of the train step has several roles: ";
    llvm::interleaveComma(present, diag);
  }
  return diag;
}

/// `attr` is only valid beside `required` in one argument's attributes.
LogicalResult verifyRequires(Operation *op, DictionaryAttr attrs,
                             StringLiteral attr, StringLiteral required,
                             const Twine &what) {
  if (!attrs || !attrs.get(attr) || attrs.get(required))
    return success();
  return emitStepError(op) << what << " carries '" << attr << "' without '"
                           << required << "'";
}

/// Every fsdp attribute of one argument's or result's dictionary.
LogicalResult verifyRules(Operation *op, DictionaryAttr attrs, Place place,
                          const Twine &where) {
  if (!attrs)
    return success();
  for (NamedAttribute attr : attrs)
    if (attr.getNameDialect() ==
            op->getContext()->getLoadedDialect<FSDPDialect>() &&
        failed(verifyRule(op, attr, place, where)))
      return failure();
  return success();
}

LogicalResult verifyTrainStep(func::FuncOp step) {
  // The operation's attributes are verified before its arguments' and
  // results' (by the function interface): check those first, so that a
  // mistyped role is reported as such rather than as a missing one.
  for (unsigned i = 0; i < step.getNumArguments(); ++i)
    if (failed(verifyRules(step, step.getArgAttrDict(i), OnArg,
                           "argument #" + std::to_string(i) + " ")))
      return failure();
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    if (failed(verifyRules(step, step.getResultAttrDict(i), OnResult,
                           "result #" + std::to_string(i) + " ")))
      return failure();
  for (unsigned i = 0; i < step.getNumArguments(); ++i) {
    DictionaryAttr attrs = step.getArgAttrDict(i);
    std::string what = "argument #" + std::to_string(i);
    if (failed(verifyOneRole(step, attrs, kArgRoles, what)))
      return failure();
    for (StringLiteral flatOnly :
         {kFlatStateArg, kFlatParamsArg, kFlatOffsetsArg, kFlatNumelArg,
          kRankLocalArg, kFrozenArg, kIgnoredArg})
      if (failed(verifyRequires(step, attrs, flatOnly, kFlatParamArg, what)))
        return failure();
    if (failed(verifyRequires(step, attrs, kIgnoredArg, kRankLocalArg, what)))
      return failure();
    if (failed(verifyRequires(step, attrs, kInputArg, kMicroBatchAttr, what)) ||
        failed(verifyRequires(step, attrs, kMicroBatchAttr, kInputArg, what)))
      return failure();
  }
  for (unsigned i = 0; i < step.getNumResults(); ++i) {
    DictionaryAttr attrs = step.getResultAttrDict(i);
    std::string what = "result #" + std::to_string(i);
    if (failed(verifyOneRole(step, attrs, kResultRoles, what)) ||
        failed(verifyRequires(step, attrs, kOutputResult, kMicroBatchAttr,
                              what)) ||
        failed(verifyRequires(step, attrs, kMicroBatchAttr, kOutputResult,
                              what)))
      return failure();
    if (attrs && attrs.get(kOutputResult) && !step->hasAttr(kEvalAttr))
      return emitStepError(step)
             << what << " is a model output ('" << kOutputResult
             << "'), which only an eval step (mode=eval) returns";
  }
  auto resultsWith = [&](StringLiteral role) {
    unsigned count = 0;
    for (unsigned i = 0; i < step.getNumResults(); ++i)
      count += step.getResultAttr(i, role) != nullptr;
    return count;
  };
  if (unsigned losses = resultsWith(kLossResult); losses != 1)
    return emitStepError(step) << "is a train step and must return one '"
                              << kLossResult << "' result, found " << losses;
  for (StringLiteral role : {kGradNormResult, kFoundInfResult})
    if (unsigned count = resultsWith(role); count > 1)
      return emitStepError(step)
             << "returns " << count << " '" << role << "' results";
  if (step->hasAttr(kMeshAttr) != step->hasAttr(kStrategyAttr))
    return emitStepError(step) << "is a sharded train step only with both '"
                              << kMeshAttr << "' and '" << kStrategyAttr << "'";
  return success();
}

} // namespace

LogicalResult FSDPDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (failed(verifyRule(op, attr, OnOp, "")))
    return failure();
  if (attr.getName() != kModelAttr)
    return success();
  auto step = dyn_cast<func::FuncOp>(op);
  if (!step)
    return emitStepError(op) << "carries '" << kModelAttr
                             << "', which only a train step (func.func) may";
  return verifyTrainStep(step);
}

// A train step's arguments and results were checked with the step
// (verifyTrainStep, which runs first): only other functions' are left.
LogicalResult FSDPDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  if (op->hasAttr(kModelAttr))
    return success();
  return verifyRule(op, attr, OnArg,
                    "argument #" + std::to_string(argIndex) + " ");
}

LogicalResult FSDPDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  if (op->hasAttr(kModelAttr))
    return success();
  return verifyRule(op, attr, OnResult,
                    "result #" + std::to_string(resultIndex) + " ");
}
