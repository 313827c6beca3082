//===- Shard.cpp - flat parameters, sharded over the mesh -----------------===//
//
// fsdp-shard: each unit's parameters as flat parameters sharded over the
// mesh, the unsharded train step rewritten to gather them, reduce their
// gradients to the local shard and update the shards. StepSharder::run
// names the phases in order.
//
//===----------------------------------------------------------------------===//

#include "Clipping.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

#include "fsdp/Dialect/FSDP/Analysis/UnitOwnership.h"
#include "fsdp/Dialect/FSDP/Analysis/UnitPrecision.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "fsdp/rt/AdafactorLayout.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/StringMap.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPSHARDPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// One of a unit's flat parameters: its trainable parameters, or its frozen
/// ones, in definition order.
struct FlatParam {
  std::string unit;
  NNModuleOp module;
  SmallVector<ParamOp> params;
  SmallVector<int64_t> offsets;
  int64_t numel = 0;
  int64_t padded = 0;
  int64_t shard = 0;
  Type elementType;
  /// The unit's mixed precision (UnitPrecision.h).
  UnitPrecision precision;
  /// The unit's process group: the step's mesh, or for a rank-local or an
  /// ignored unit a world of one rank (its flat parameter whole and never
  /// reduce-scattered).
  MeshAttr mesh;
  bool rankLocal = false;
  /// FSDP's ignored parameters: whole like a rank-local unit's but starting
  /// identical; all_reduce averages their gradient over every rank.
  IgnoredGradSync ignored = IgnoredGradSync::none;
  /// Parameters the step does not update (requires_grad = false, or all of
  /// an eval step's): sharded and gathered like the trainable ones (FSDP2
  /// shards every parameter), but never reduced nor updated.
  bool frozen = false;

  RankedTensorType fullType() const {
    return RankedTensorType::get({padded}, elementType);
  }
  RankedTensorType shardType() const {
    return RankedTensorType::get({shard}, elementType);
  }
  /// Adafactor's description of the flat parameter (FSDPAdafactorOps.td):
  /// each parameter's flat offset, numel and last two sizes.
  SmallVector<int64_t> adafactorLayout() const {
    std::vector<int64_t> values;
    for (auto [param, offset] : llvm::zip(params, offsets)) {
      RankedTensorType type = ParamOp(param).getTensorType();
      ::fsdp::rt::AdafactorLayout::append(
          ::fsdp::rt::adafactorParamOf(type.getShape().data(), type.getRank(),
                                       offset),
          values);
    }
    return SmallVector<int64_t>(values.begin(), values.end());
  }
};

/// The sizes of a valid Adafactor layout.
static ::fsdp::rt::AdafactorLayout parseLayout(ArrayRef<int64_t> values) {
  ::fsdp::rt::AdafactorLayout layout;
  [[maybe_unused]] std::string error =
      ::fsdp::rt::AdafactorLayout::parse(values.data(), values.size(), layout);
  assert(error.empty() && "static parameter shapes make a valid layout");
  return layout;
}

/// FSDP1's gradient divide factors for a data-parallel world of `n` ranks:
/// the pre-divide factor is the power of two near √n, so that sums stay in
/// range in low precision (torch.distributed.fsdp._init_utils).
std::pair<double, double> divideFactors(int64_t n) {
  int64_t factor = 1;
  while (n % factor == 0 && n / factor > factor)
    factor *= 2;
  return {double(factor), double(n) / double(factor)};
}

/// The gradient an optimizer op applies, before clipping scaled it.
Value unclippedGrad(Value grad) {
  while (auto mul = grad.getDefiningOp<nn::MulOp>()) {
    if (getPhase(mul) != kOptimizer)
      break;
    grad = mul.getLhs();
  }
  return grad;
}

/// The terms of a gradient summed over micro-batches by
/// fsdp-build-train-step, one per micro-batch in order; the gradient itself
/// when it is not such a sum.
SmallVector<Value> microBatchTerms(Value grad) {
  SmallVector<Value> terms;
  while (auto add = grad.getDefiningOp<nn::AddOp>()) {
    if (!add->hasAttr(kGradAccumulationAttr))
      break;
    terms.push_back(add.getRhs());
    grad = add.getLhs();
  }
  terms.push_back(grad);
  std::reverse(terms.begin(), terms.end());
  return terms;
}

/// Rewrites one unsharded train step into its sharded form, phase by phase
/// in the order run() calls them; each phase leaves its results in the
/// members the later ones read.
class StepSharder {
public:
  StepSharder(ModelOp model, func::FuncOp step, MeshAttr mesh,
              ShardingStrategy strategy)
      : model(model), step(step), mesh(mesh), strategy(strategy),
        builder(step) {}

  LogicalResult run();

private:
  /// The optimizer ops of the unsharded step: each parameter's update, its
  /// state names, whether the step clips or scales the loss.
  void collectUpdates();
  LogicalResult computeFlatParams();
  /// Rank-local units cannot be clipped nor loss-scaled.
  LogicalResult checkUnits();
  /// The sharded function with its new signature, and the old arguments it
  /// keeps mapped to its own.
  void createSignature();
  /// Every unit gathered at the start and its parameters viewed.
  void gatherUnits();
  void gather(FlatParam &flat, Value shard);
  /// The forward and backward, unchanged.
  void cloneForwardBackward();
  /// Each unit's gradient reduced to the local shard.
  void reduceGradients();
  Value reduceGradient(const FlatParam &flat);
  /// An ignored unit's whole gradient averaged over every rank, as DDP.
  Value allReduceIgnored(Value grad, function_ref<void(Value)> tag);
  /// Loss scaling and clipping on the shards, then the updates.
  void emitOptimizer();
  /// Flat parameter i's Adafactor update of its shard (and its one state
  /// tensor, Adafactor's factored second moment).
  Value emitAdafactor(int i, Value stepCount);
  /// The type of a flat parameter's optimizer state tensors: its shard's,
  /// or Adafactor's whole factored second moment.
  RankedTensorType stateType(const FlatParam &flat) {
    if (!isa_and_nonnull<AdafactorStepOp>(anyUpdate))
      return flat.shardType();
    return RankedTensorType::get(
        {parseLayout(flat.adafactorLayout()).stateSize},
        Float32Type::get(step.getContext()));
  }
  /// The results, and the unsharded step replaced.
  void emitReturn();

  Value sumOverShardGroup(Value scalar, Location loc,
                          ReduceKind kind = ReduceKind::sum) {
    return reduceScalar(scalar, loc, MeshGroup::shard, kind);
  }
  Value reduceScalar(Value scalar, Location loc, MeshGroup group,
                     ReduceKind kind);
  /// `value` all-reduced over `group` with divide factors `pre` / `post`
  /// (untagged); `value` itself when the group is one rank.
  Value allReduceOver(Value value, Location loc, MeshGroup group,
                      ReduceKind kind, double pre = 1.0, double post = 1.0);
  Value reduceAndClip(SmallVectorImpl<Value> &shardGrads, Location loc);
  Value unscale(SmallVectorImpl<Value> &shardGrads, Location loc);
  /// Tags an optimizer-phase op made for flat parameter i (-1: for all).
  void tagUpdate(Operation *op, int i) {
    tagOp(op, i < 0 ? "" : flats[i].unit, kOptimizer);
  }

  ModelOp model;
  func::FuncOp step;
  MeshAttr mesh;
  ShardingStrategy strategy;
  OpBuilder builder;
  /// The trainable flat parameters, and the frozen ones.
  SmallVector<FlatParam> flats, frozenFlats;
  /// The unsharded step's update of each parameter it trains, by name.
  llvm::StringMap<Operation *> updates;

  // What the unsharded step does (collectUpdates).
  Operation *anyUpdate = nullptr;
  bool clipping = false, lossScaling = false;
  SmallVector<std::string> stateNames;

  // The sharded step (createSignature): its arguments are the trainable
  // flat parameters' shards, the frozen ones' from firstFrozen, the
  // optimizer state from firstState, then the arguments kept.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  unsigned firstFrozen = 0, firstState = 0;
  func::FuncOp sharded;
  Block *body = nullptr;
  IRMapping mapping;

  // The gather (gatherUnits): the old argument of each parameter by name,
  // and the casts to the param dtype the gathered views replace.
  llvm::StringMap<unsigned> oldParamArg;
  llvm::SmallPtrSet<Operation *, 16> replaced;

  /// Each trainable flat parameter's reduced gradient (reduceGradients).
  SmallVector<Value> shardGrads;
  // The optimizer's results (emitOptimizer).
  Value foundInf, gradNorm, next;
  SmallVector<Value> newShards, newStates;
};

LogicalResult StepSharder::computeFlatParams() {
  UnitOwnership ownership(model);
  MeshAttr ownRank = MeshAttr::get(model.getContext(), 0, 1);
  // An eval step's units whose weights stay whole across steps
  // (fsdp-fit-memory-budget): a shard group of one, never gathered, the
  // same on every rank.
  MeshAttr whole = MeshAttr::get(model.getContext(), mesh.getWorldSize(), 1);
  llvm::StringSet<> keptWhole = getKeptWholeUnits(step);
  llvm::StringSet<> units;
  for (NNModuleOp unit : ownership.getUnits())
    units.insert(unit.getQualifiedName());
  for (const auto &name : keptWhole)
    if (!units.contains(name.getKey()))
      return emitStepError(step)
             << "keeps the weights of '" << name.getKey()
             << "' whole, which is not an FSDP unit of the model";
  for (NNModuleOp unit : ownership.getUnits()) {
    // FSDP's wrap policies skip ignored modules: a unit inside one is an
    // explicit conflict.
    if (NNModuleOp outer = unit->getParentOfType<NNModuleOp>())
      if (NNModuleOp ignoredOuter = getIgnoredAncestor(outer))
        return unit.emitOpError("is an FSDP unit inside the ignored unit '")
               << ignoredOuter.getQualifiedName()
               << "': FSDP does not wrap inside ignored modules (unmark one "
                  "of them)";
    // The unit's trainable flat parameter, then its frozen one.
    FlatParam byKind[2];
    for (auto [kind, flat] : llvm::enumerate(byKind)) {
      flat.unit = unit.getQualifiedName();
      flat.module = unit;
      // The root is a unit even when it is not marked as one.
      flat.ignored = getIgnored(unit);
      flat.rankLocal = (unit.isUnit() && unit.getUnitAttr().getRankLocal()) ||
                       flat.ignored != IgnoredGradSync::none;
      flat.mesh = flat.rankLocal                 ? ownRank
                  : keptWhole.contains(flat.unit) ? whole
                                                  : mesh;
      flat.frozen = kind == 1;
      flat.precision = getUnitPrecision(
          unit, step->getAttrOfType<DictionaryAttr>(kMixedPrecisionAttr));
    }
    for (ParamOp param : ownership.getParams(unit)) {
      // Frozen: not updated by the step (requires_grad = false, or every
      // parameter of an eval step).
      FlatParam &flat = byKind[!updates.count(qualifiedName(param))];
      Type element = param.getTensorType().getElementType();
      if (flat.elementType && flat.elementType != element)
        return unit.emitOpError("is an FSDP unit whose ")
               << (flat.frozen ? "frozen" : "trainable") << " parameters mix "
               << flat.elementType << " and " << element
               << "; a flat parameter has one dtype (wrap them separately)";
      flat.elementType = element;
      flat.params.push_back(param);
      flat.offsets.push_back(flat.numel);
      flat.numel += param.getTensorType().getNumElements();
    }
    for (FlatParam &flat : byKind) {
      if (flat.params.empty())
        continue; // A unit without parameters does no collectives.
      int64_t groupSize = flat.mesh.getShard();
      flat.shard = llvm::divideCeil(flat.numel, groupSize);
      flat.padded = flat.shard * groupSize;
      (flat.frozen ? frozenFlats : flats).push_back(std::move(flat));
    }
  }
  return success();
}

Value StepSharder::allReduceOver(Value value, Location loc, MeshGroup group,
                                 ReduceKind kind, double pre, double post) {
  FailureOr<int64_t> size = mesh.getGroupSize(group);
  if (failed(size) || *size == 1)
    return value;
  return AllReduceOp::create(
      builder, loc, value.getType(), value, mesh,
      MeshGroupAttr::get(builder.getContext(), group),
      TypeAttr::get(getElementTypeOrSelf(value.getType())),
      ReduceKindAttr::get(builder.getContext(), kind),
      builder.getF64FloatAttr(pre), builder.getF64FloatAttr(post));
}

/// An f32 scalar summed (or with `kind` max, maximised) over `group`. For
/// the shard group: replicas hold the same shards, so they are not added
/// again (PyTorch all-reduces the norm over the FSDP process group, which
/// is the shard group under hybrid sharding, and not at all for no-shard).
Value StepSharder::reduceScalar(Value scalar, Location loc, MeshGroup group,
                                ReduceKind kind) {
  FailureOr<int64_t> size = mesh.getGroupSize(group);
  if (failed(size) || *size == 1)
    return scalar;
  Type f32 = builder.getF32Type();
  Value vector = nn::ReshapeOp::create(builder, loc,
                                       RankedTensorType::get({1}, f32), scalar);
  Value total = allReduceOver(vector, loc, group, kind);
  Value sum = nn::ReshapeOp::create(builder, loc,
                                    RankedTensorType::get({}, f32), total);
  for (Value v : {vector, total, sum})
    tagOp(v.getDefiningOp(), "", kOptimizer);
  return sum;
}

/// GradScaler's unscale_ on the shards; the found-inf flag, non-zero on
/// every rank when any rank's shard holds an inf or NaN.
Value StepSharder::unscale(SmallVectorImpl<Value> &shardGrads, Location loc) {
  Value found =
      emitUnscaleGrads(builder, loc, shardGrads,
                       [&](Operation *op, int i) { tagUpdate(op, i); });
  found = sumOverShardGroup(found, loc);
  // Ignored parameters' local gradients differ between replicas: every
  // rank counts every rank's, as ShardedGradScaler all-reduces found_inf
  // over the world, so that all skip the step together.
  if (llvm::any_of(flats, [](const FlatParam &flat) {
        return flat.ignored == IgnoredGradSync::local;
      }))
    found = reduceScalar(found, loc, MeshGroup::replicate, ReduceKind::sum);
  return found;
}

Value StepSharder::reduceAndClip(SmallVectorImpl<Value> &shardGrads,
                                 Location loc) {
  auto clip = *step.getBody().getOps<ClipGradNormOp>().begin();
  // The padding is zero, so the shards' Σ|g|^p add up to the full total
  // once summed over the shard group, and their max |g| is the full one.
  bool inf = std::isinf(clip.getNormType().convertToDouble());
  auto overShardGroup = [&](Value total) {
    return sumOverShardGroup(total, loc,
                             inf ? ReduceKind::max : ReduceKind::sum);
  };
  // FSDP1 adds the ignored parameters' local partial after the all-reduce.
  SmallVector<bool> ignored;
  for (const FlatParam &flat : flats)
    ignored.push_back(flat.ignored != IgnoredGradSync::none);
  return emitClipGradNorm(builder, loc, shardGrads, clip.getMaxNormAttr(),
                          clip.getNormTypeAttr(), overShardGroup,
                          [&](Operation *op, int i) { tagUpdate(op, i); },
                          ignored);
}

/// An update's lr scale and weight decay.
static std::pair<double, double> groupOf(Operation *update) {
  if (auto adamw = dyn_cast<AdamWStepOp>(update))
    return {adamw.getLrScale().convertToDouble(),
            adamw.getWeightDecay().convertToDouble()};
  if (auto lion = dyn_cast<LionStepOp>(update))
    return {lion.getLrScale().convertToDouble(),
            lion.getWeightDecay().convertToDouble()};
  if (auto adafactor = dyn_cast<AdafactorStepOp>(update))
    return {adafactor.getLrScale().convertToDouble(),
            adafactor.getWeightDecay().convertToDouble()};
  auto sgd = cast<SGDStepOp>(update);
  return {sgd.getLrScale().convertToDouble(),
          sgd.getWeightDecay().convertToDouble()};
}

/// The update attributes of a flat parameter: its parameters' (which share
/// every hyper-parameter but their group's lr scale and weight decay), with
/// one segment per run of parameters of the same group when they differ.
static NamedAttrList groupAttrs(const FlatParam &flat,
                                const llvm::StringMap<Operation *> &updates) {
  SmallVector<int64_t> starts;
  SmallVector<double> scales, decays;
  for (auto [param, offset] : llvm::zip(flat.params, flat.offsets)) {
    auto [scale, decay] = groupOf(updates.lookup(qualifiedName(param)));
    if (!starts.empty() && scales.back() == scale && decays.back() == decay)
      continue;
    starts.push_back(starts.empty() ? 0 : offset);
    scales.push_back(scale);
    decays.push_back(decay);
  }
  Operation *first = updates.lookup(qualifiedName(flat.params.front()));
  NamedAttrList attrs(first->getAttrs());
  if (starts.size() > 1) {
    Builder b(first->getContext());
    attrs.set("segment_starts", b.getDenseI64ArrayAttr(starts));
    attrs.set("segment_lr_scales", b.getDenseF64ArrayAttr(scales));
    attrs.set("segment_weight_decays", b.getDenseF64ArrayAttr(decays));
  }
  return attrs;
}

/// A flat parameter's update has one of each hyper-parameter but lr scale
/// and weight decay (segments): its parameters' groups must agree on them.
static LogicalResult
checkSharedHyperParams(const FlatParam &flat,
                       const llvm::StringMap<Operation *> &updates) {
  Operation *first = updates.lookup(qualifiedName(flat.params.front()));
  for (ParamOp param : llvm::drop_begin(flat.params)) {
    Operation *update = updates.lookup(qualifiedName(param));
    for (StringRef name : {"beta1", "beta2", "eps", "momentum", "dampening"})
      if (first->getAttr(name) != update->getAttr(name))
        return NNModuleOp(flat.module)
                       .emitOpError("is an FSDP unit whose parameters '")
                   << qualifiedName(flat.params.front()) << "' and '"
                   << qualifiedName(param) << "' have different " << name
                   << " (param-groups): their flat parameter is updated with "
                      "one beta1, beta2, eps, momentum and dampening (only "
                      "lr-scale and weight-decay may differ within it); wrap "
                      "them in separate units",
               failure();
  }
  return success();
}

LogicalResult StepSharder::run() {
  if (step->hasAttr(kMeshAttr))
    return emitStepError(step) << "is already sharded";
  collectUpdates();
  if (failed(computeFlatParams()) || failed(checkUnits()))
    return failure();
  for (const FlatParam &flat : flats)
    if (failed(checkSharedHyperParams(flat, updates)))
      return failure();
  createSignature();
  gatherUnits();
  cloneForwardBackward();
  reduceGradients();
  emitOptimizer();
  emitReturn();
  return success();
}

void StepSharder::collectUpdates() {
  // The optimizer ops of the unsharded step give the hyper-parameters and
  // each parameter's gradient and state.
  for (Operation &op : step.getBody().front())
    if (isOptimizerUpdate(&op)) {
      auto arg = cast<BlockArgument>(op.getOperand(0));
      updates[step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kParamArg)
                  .getValue()] = &op;
      anyUpdate = &op;
    }
  clipping = !step.getBody().getOps<ClipGradNormOp>().empty();
  lossScaling = !step.getBody().getOps<FoundNonfiniteOp>().empty();
  unsigned statesPerParam = anyUpdate ? anyUpdate->getNumResults() - 1 : 0;
  for (unsigned a = 0; a < step.getNumArguments(); ++a)
    if (auto name = step.getArgAttrOfType<StringAttr>(a, kStateArg))
      if (stateNames.size() < statesPerParam)
        stateNames.push_back(name.getValue().rsplit('.').second.str());
}

LogicalResult StepSharder::checkUnits() {
  for (FlatParam &flat : flats) {
    if (flat.ignored != IgnoredGradSync::none)
      continue; // clipped with their local norm, as FSDP1; unscale()
    if (clipping && flat.rankLocal)
      return flat.module.emitOpError(
                 "is a rank-local unit: its gradient "
                 "differs between ranks, so there is no "
                 "single norm for clip-grad-norm to clip to"),
             failure();
    if (lossScaling && flat.rankLocal)
      return flat.module.emitOpError(
                 "is a rank-local unit: loss scaling skips a step on every "
                 "rank together, from the shard group's gradients, which do "
                 "not cover a rank-local unit's"),
             failure();
  }
  return success();
}

void StepSharder::createSignature() {
  // New signature: the local shards of the units' trainable flat
  // parameters, then of their frozen ones, the trainable ones' optimizer
  // state, then the step count, buffers and inputs unchanged.
  SmallVector<int> keptArgs; // old argument index per new argument, or -1
  auto addFlatArg = [&](const FlatParam &flat) {
    SmallVector<Attribute> names;
    for (ParamOp p : flat.params)
      names.push_back(builder.getStringAttr(qualifiedName(p)));
    argTypes.push_back(flat.shardType());
    SmallVector<NamedAttribute> attrs = {
        builder.getNamedAttr(kFlatParamArg, builder.getStringAttr(flat.unit)),
        builder.getNamedAttr(kFlatParamsArg, builder.getArrayAttr(names)),
        builder.getNamedAttr(kFlatOffsetsArg,
                             builder.getDenseI64ArrayAttr(flat.offsets)),
        builder.getNamedAttr(kFlatNumelArg,
                             builder.getI64IntegerAttr(flat.numel))};
    if (flat.rankLocal)
      attrs.push_back(
          builder.getNamedAttr(kRankLocalArg, builder.getUnitAttr()));
    if (flat.frozen)
      attrs.push_back(builder.getNamedAttr(kFrozenArg, builder.getUnitAttr()));
    if (flat.ignored != IgnoredGradSync::none)
      attrs.push_back(builder.getNamedAttr(kIgnoredArg, builder.getUnitAttr()));
    argAttrs.push_back(builder.getDictionaryAttr(attrs));
    keptArgs.push_back(-1);
  };
  for (const FlatParam &flat : flats)
    addFlatArg(flat);
  firstFrozen = argTypes.size();
  for (const FlatParam &flat : frozenFlats)
    addFlatArg(flat);
  firstState = argTypes.size();
  for (const FlatParam &flat : flats)
    for (const std::string &state : stateNames) {
      argTypes.push_back(stateType(flat));
      argAttrs.push_back(builder.getDictionaryAttr(
          {builder.getNamedAttr(kFlatParamArg,
                                builder.getStringAttr(flat.unit)),
           builder.getNamedAttr(kFlatStateArg, builder.getStringAttr(state))}));
      keptArgs.push_back(-1);
    }
  for (unsigned a = 0; a < step.getNumArguments(); ++a) {
    if (step.getArgAttr(a, kParamArg) || step.getArgAttr(a, kStateArg))
      continue;
    argTypes.push_back(step.getArgument(a).getType());
    argAttrs.push_back(step.getArgAttrDict(a));
    keptArgs.push_back(a);
  }

  builder.setInsertionPointAfter(step);
  sharded = func::FuncOp::create(builder, step.getLoc(), step.getName(),
                                 builder.getFunctionType(argTypes, {}));
  sharded.setAllArgAttrs(argAttrs);
  sharded->setDiscardableAttrs(step->getDiscardableAttrDictionary());
  sharded->setAttr(kMeshAttr, mesh);
  sharded->setAttr(kStrategyAttr,
                   ShardingStrategyAttr::get(builder.getContext(), strategy));
  body = sharded.addEntryBlock();
  builder.setInsertionPointToStart(body);

  for (auto [newIndex, oldIndex] : llvm::enumerate(keptArgs))
    if (oldIndex >= 0)
      mapping.map(step.getArgument(oldIndex), body->getArgument(newIndex));
}

void StepSharder::gatherUnits() {
  // Gather every unit at the start and view its parameters (the naive
  // schedule fsdp-insert-collectives refines).
  for (unsigned a = 0; a < step.getNumArguments(); ++a)
    if (auto name = step.getArgAttrOfType<StringAttr>(a, kParamArg))
      oldParamArg[name.getValue()] = a;
  // Mixed precision: a unit whose parameters are only read through casts to
  // its param dtype is cast as a shard and gathered in that dtype (half the
  // bytes for bf16); the casts' results become the views.
  for (auto [i, flat] : llvm::enumerate(flats))
    gather(flat, body->getArgument(i));
  for (auto [i, flat] : llvm::enumerate(frozenFlats))
    gather(flat, body->getArgument(firstFrozen + i));
}

void StepSharder::gather(FlatParam &flat, Value shard) {
  Location loc = step.getLoc();
  MLIRContext *context = step.getContext();
  Type gatherType = flat.elementType;
  SmallVector<SmallVector<nn::CastOp>> casts;
  Type paramDtype = flat.precision.paramDtype;
  bool castOnly = paramDtype && paramDtype != flat.elementType;
  for (ParamOp param : flat.params) {
    casts.emplace_back();
    for (Operation *user :
         step.getArgument(oldParamArg[qualifiedName(param)]).getUsers()) {
      if (getPhase(user) == kOptimizer)
        continue; // The update is rebuilt on the f32 shard.
      auto cast = dyn_cast<nn::CastOp>(user);
      if (cast && cast.getType().getElementType() == paramDtype)
        casts.back().push_back(cast);
      else
        castOnly = false;
    }
  }
  Value full = shard;
  if (castOnly) {
    gatherType = paramDtype;
    full = nn::CastOp::create(builder, loc, flat.shardType().clone(gatherType),
                              full);
    tagOp(full.getDefiningOp(), flat.unit, kForward);
  }
  if (flat.mesh.getShard() > 1) {
    auto unshard = UnshardOp::create(
        builder, loc,
        TokenType::get(context, flat.fullType().clone(gatherType)), full,
        builder.getStringAttr(flat.unit), flat.mesh,
        /*post_forward_group=*/nullptr);
    auto wait = WaitOp::create(builder, loc, unshard);
    tagOp(unshard, flat.unit, kForward);
    tagOp(wait, flat.unit, kForward);
    full = wait;
  }
  for (auto [param, offset, paramCasts] :
       llvm::zip(flat.params, flat.offsets, casts)) {
    auto view = ViewOp::create(
        builder, loc, param.getTensorType().clone(gatherType), full, offset);
    tagOp(view, flat.unit, kForward);
    if (!castOnly) {
      mapping.map(step.getArgument(oldParamArg[qualifiedName(param)]), view);
      continue;
    }
    for (nn::CastOp cast : paramCasts) {
      mapping.map(cast.getResult(), view);
      replaced.insert(cast);
    }
  }
}

void StepSharder::cloneForwardBackward() {
  for (Operation &op : step.getBody().front())
    if (getPhase(&op) != kOptimizer && !isa<func::ReturnOp>(op) &&
        !replaced.contains(&op))
      builder.clone(op, mapping);
}

void StepSharder::reduceGradients() {
  // Each unit's gradient, flattened and reduced to the local shard in the
  // reduce dtype, then in the parameter's dtype for the optimizer. Unless
  // the step is no_sync, each micro-batch's gradient is reduced on its own
  // and the shards summed (PyTorch's default); no_sync reduces the sum once.
  for (const FlatParam &flat : flats)
    shardGrads.push_back(reduceGradient(flat));
}

Value StepSharder::reduceGradient(const FlatParam &flat) {
  Location loc = step.getLoc();
  MLIRContext *context = step.getContext();
  Type reduceDtype = flat.precision.reduceDtype;
  auto policy = step->getAttrOfType<DictionaryAttr>(kMixedPrecisionAttr);
  bool keepLowPrecisionGrads =
      policy && policy.contains(kKeepLowPrecisionGradsKey);
  auto gradSync = step->getAttrOfType<GradSyncAttr>(kGradSyncAttr);
  bool reducePerMicroBatch =
      !gradSync || gradSync.getValue() == GradSync::every_micro_batch;
  Type reduceType = reduceDtype ? reduceDtype : flat.elementType;
  // terms[p][k]: parameter p's gradient from the k-th reduction.
  SmallVector<Value> wholeGrads;
  SmallVector<SmallVector<Value>> terms;
  for (ParamOp param : flat.params) {
    Operation *update = updates.lookup(qualifiedName(param));
    Value grad = unclippedGrad(update->getOperand(1));
    wholeGrads.push_back(grad);
    terms.push_back(reducePerMicroBatch ? microBatchTerms(grad)
                                        : SmallVector<Value>{grad});
  }
  // A parameter no micro-batch reaches has one (zero) term; the unit's
  // gradient is then reduced once.
  if (llvm::any_of(terms,
                   [&](auto &t) { return t.size() != terms.front().size(); }))
    for (auto [grad, paramTerms] : llvm::zip(wholeGrads, terms))
      paramTerms = {grad};
  size_t reductions = terms.front().size();

  Value sum;
  for (size_t k = 0; k < reductions; ++k) {
    auto tag = [&](Value v) {
      tagOp(v.getDefiningOp(), flat.unit, kBackward);
      if (reductions > 1)
        v.getDefiningOp()->setAttr(kMicroBatchAttr,
                                   builder.getI64IntegerAttr(k));
    };
    SmallVector<Value> grads;
    for (SmallVector<Value> &paramTerms : terms) {
      Value grad = paramTerms[k];
      // A gradient cast up from the reduce dtype is reduced before the
      // cast.
      if (auto up = grad.getDefiningOp<nn::CastOp>())
        if (getElementTypeOrSelf(up.getInput().getType()) == reduceType)
          grad = up.getInput();
      Value mapped = mapping.lookup(grad);
      if (getElementTypeOrSelf(mapped.getType()) != reduceType) {
        mapped = nn::CastOp::create(
            builder, loc,
            cast<RankedTensorType>(mapped.getType()).clone(reduceType), mapped);
        tag(mapped);
      }
      grads.push_back(mapped);
    }
    Value reduced = FlattenOp::create(builder, loc,
                                      flat.fullType().clone(reduceType), grads);
    tag(reduced);
    if (flat.ignored == IgnoredGradSync::all_reduce) {
      reduced = allReduceIgnored(reduced, tag);
    } else if (!flat.rankLocal && flat.mesh.getWorldSize() > 1) {
      // A rank-local gradient is not reduced, nor one on a one-rank mesh
      // (the reduction would only copy it).
      auto [pre, post] = divideFactors(flat.mesh.getWorldSize());
      reduced = ReduceGradsOp::create(
          builder, loc, flat.shardType().clone(reduceType), reduced,
          builder.getStringAttr(flat.unit), flat.mesh,
          ReduceKindAttr::get(context, ReduceKind::sum),
          builder.getF64FloatAttr(pre), builder.getF64FloatAttr(post));
      tag(reduced);
    }
    if (reduceType != flat.elementType && !keepLowPrecisionGrads) {
      reduced = nn::CastOp::create(builder, loc, flat.shardType(), reduced);
      tag(reduced);
    }
    if (sum) {
      sum = nn::AddOp::create(builder, loc, sum, reduced);
      tag(sum);
      sum.getDefiningOp()->setAttr(kGradAccumulationAttr,
                                   builder.getUnitAttr());
    } else {
      sum = reduced;
    }
  }
  return sum;
}

Value StepSharder::allReduceIgnored(Value grad,
                                    function_ref<void(Value)> tag) {
  // Over the shard group, then across replicas: together every rank once,
  // with the communicators the step has (no world group on a 2-D mesh).
  // FSDP1's divide factors for the world size, around the first sum.
  auto [pre, post] = divideFactors(mesh.getWorldSize());
  for (MeshGroup group : {MeshGroup::shard, MeshGroup::replicate}) {
    Value reduced = allReduceOver(grad, step.getLoc(), group, ReduceKind::sum,
                                  pre, post);
    if (reduced == grad)
      continue;
    grad = reduced;
    tag(grad);
    pre = post = 1.0;
  }
  return grad;
}

/// A reduced bf16 / f16 gradient that is only cast up to f32 for the
/// update is read by the update as it is: the widening is exact and the
/// update computes in f32 from the loaded value either way, so the bits are
/// the same, without the f32 copy (6 bytes an element written and read
/// back). Unscaling and clipping, which round in place, already read the
/// cast, which then stays.
static Value readInReduceDtype(Value grad) {
  auto up = grad.getDefiningOp<nn::CastOp>();
  if (!up || !up->use_empty() || !getElementTypeOrSelf(grad).isF32())
    return grad;
  Value narrow = up.getInput();
  if (!isa<BFloat16Type, Float16Type>(getElementTypeOrSelf(narrow)))
    return grad;
  up->erase();
  return narrow;
}

void StepSharder::emitOptimizer() {
  Location loc = step.getLoc();
  foundInf = lossScaling ? unscale(shardGrads, loc) : Value();
  gradNorm = clipping ? reduceAndClip(shardGrads, loc) : Value();

  // The optimizer on local shards: the same update, elementwise.
  Value stepCount;
  for (unsigned a = 0; a < sharded.getNumArguments(); ++a)
    if (sharded.getArgAttr(a, kStepCountArg))
      stepCount = body->getArgument(a);
  for (auto [i, flat] : llvm::enumerate(flats)) {
    shardGrads[i] = readInReduceDtype(shardGrads[i]);
    if (isa<AdafactorStepOp>(anyUpdate)) {
      newShards.push_back(emitAdafactor(i, stepCount));
      continue;
    }
    SmallVector<Value> operands = {body->getArgument(i), shardGrads[i]};
    for (unsigned s = 0; s < stateNames.size(); ++s)
      operands.push_back(
          body->getArgument(firstState + i * stateNames.size() + s));
    operands.push_back(stepCount);
    if (foundInf)
      operands.push_back(foundInf);
    SmallVector<Type> types(1 + stateNames.size(), flat.shardType());
    NamedAttrList attrs = groupAttrs(flat, updates);
    if (isa<SGDStepOp>(anyUpdate)) {
      NamedAttribute segments =
          sgdOperandSegments(builder, !stateNames.empty(), bool(foundInf));
      attrs.set(segments.getName(), segments.getValue());
    }
    OperationState state(loc, anyUpdate->getName(), operands, types, attrs);
    Operation *update = builder.create(state);
    tagOp(update, flat.unit, kOptimizer);
    newShards.push_back(update->getResult(0));
    for (unsigned s = 0; s < stateNames.size(); ++s)
      newStates.push_back(update->getResult(1 + s));
  }
  next = stepCount;
  if (stepCount) {
    Value one = arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(cast<RankedTensorType>(stepCount.getType()),
                               builder.getI64IntegerAttr(1)));
    next = arith::AddIOp::create(builder, loc, stepCount, one);
    tagOp(one.getDefiningOp(), "", kOptimizer);
    tagOp(next.getDefiningOp(), "", kOptimizer);
  }
}

Value StepSharder::emitAdafactor(int i, Value stepCount) {
  // Adafactor's statistics are sums over whole parameters, whose elements
  // the shard group's ranks hold between them: each rank sums its part,
  // and two small all-reduces over the shard group (no more: replicas hold
  // the same shards) complete the sums; the state is the same on every rank.
  const FlatParam &flat = flats[i];
  Location loc = step.getLoc();
  Value shard = body->getArgument(i), grad = shardGrads[i];
  Value state = body->getArgument(firstState + i);
  SmallVector<int64_t> values = flat.adafactorLayout();
  ::fsdp::rt::AdafactorLayout layout = parseLayout(values);
  auto vector = [&](int64_t n) {
    return RankedTensorType::get({n}, builder.getF32Type());
  };
  auto tagged = [&](Value v) {
    tagUpdate(v.getDefiningOp(), i);
    return v;
  };
  // A rank-local (or ignored) flat parameter is whole on its rank.
  auto sumOverShards = [&](Value partial) {
    if (flat.rankLocal)
      return partial;
    Value sum = allReduceOver(partial, loc, MeshGroup::shard, ReduceKind::sum);
    return sum == partial ? partial : tagged(sum);
  };
  NamedAttrList attrs = groupAttrs(flat, updates);
  attrs.set("layout", builder.getDenseI64ArrayAttr(values));
  Value stats = sumOverShards(tagged(
      AdafactorStatsOp::create(builder, loc, vector(layout.statsSize()), shard,
                               grad, builder.getDenseI64ArrayAttr(values))));

  SmallVector<Value> operands = {shard, grad, state, stats, stepCount};
  if (foundInf)
    operands.push_back(foundInf);
  NamedAttrList factorAttrs;
  for (StringRef name : {"layout", "beta2_decay", "eps1", "eps2", "d"})
    factorAttrs.set(name, attrs.get(name));
  auto factor = AdafactorFactorOp::create(
      builder, loc,
      TypeRange{state.getType(),
                vector(static_cast<int64_t>(layout.params.size()))},
      operands, factorAttrs);
  tagUpdate(factor, i);
  newStates.push_back(factor.getNewState());
  Value updateSq = sumOverShards(factor.getUpdateSq());

  operands = {shard, grad, factor.getNewState(), stats, updateSq, stepCount};
  if (foundInf)
    operands.push_back(foundInf);
  return tagged(AdafactorApplyOp::create(builder, loc, flat.shardType(),
                                         operands, attrs));
}

void StepSharder::emitReturn() {
  Location loc = step.getLoc();
  // Results: loss, [norm], shards, states, step count, buffers and outputs.
  auto oldReturn = cast<func::ReturnOp>(step.getBody().front().back());
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultAttrs;
  auto add = [&](Value v, DictionaryAttr attrs) {
    results.push_back(v);
    resultAttrs.push_back(attrs);
  };
  add(mapping.lookup(oldReturn.getOperand(0)), step.getResultAttrDict(0));
  if (gradNorm)
    add(gradNorm, builder.getDictionaryAttr(builder.getNamedAttr(
                      kGradNormResult, builder.getUnitAttr())));
  if (foundInf)
    add(foundInf, builder.getDictionaryAttr(builder.getNamedAttr(
                      kFoundInfResult, builder.getUnitAttr())));
  for (auto [i, flat] : llvm::enumerate(flats))
    add(newShards[i], builder.getDictionaryAttr(builder.getNamedAttr(
                          kFlatParamArg, builder.getStringAttr(flat.unit))));
  for (auto [i, value] : llvm::enumerate(newStates))
    add(value, argAttrs[firstState + i]);
  if (next)
    add(next, builder.getDictionaryAttr(
                  builder.getNamedAttr(kStepCountArg, builder.getUnitAttr())));
  for (unsigned r = 0; r < step.getNumResults(); ++r)
    if (step.getResultAttr(r, kBufferArg) ||
        step.getResultAttr(r, kOutputResult))
      add(mapping.lookup(oldReturn.getOperand(r)), step.getResultAttrDict(r));
  func::ReturnOp::create(builder, loc, results);
  sharded.setType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  sharded.setAllResultAttrs(resultAttrs);
  step.erase();
  // Gradients now reduced before their cast up are no longer cast.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

struct ShardPass : public mlir::fsdp::impl::FSDPShardPassBase<ShardPass> {
  using FSDPShardPassBase::FSDPShardPassBase;

  FailureOr<MeshAttr> getMesh(ShardingStrategy kind) {
    Location loc = getOperation().getLoc();
    auto bad = [&]() { return emitError(loc, "fsdp-shard: "); };
    int64_t world = worldSize;
    if (world < 1)
      return bad() << "world-size must be >= 1, got " << world;
    MLIRContext *context = &getContext();
    if (kind == ShardingStrategy::full_shard ||
        kind == ShardingStrategy::shard_grad_op)
      return MeshAttr::get(context, 0, world);
    if (kind == ShardingStrategy::no_shard)
      return MeshAttr::get(context, world, 1);
    int64_t group = shardGroupSize;
    if (group < 1 || world % group != 0)
      return bad() << strategyOptionName(kind)
                 << " needs a shard-group-size that divides world-size "
                   << world << ", got " << group;
    return MeshAttr::get(context, world / group, group);
  }

  void runOnOperation() override {
    std::optional<ShardingStrategy> kind = parseStrategyOption(strategy);
    if (!kind) {
      emitError(getOperation().getLoc(), "fsdp-shard: unknown strategy '")
          << strategy
          << "'; expected full-shard, shard-grad-op, no-shard, hybrid-shard "
             "or hybrid-shard-zero2";
      return signalPassFailure();
    }
    FailureOr<MeshAttr> mesh = getMesh(*kind);
    if (failed(mesh))
      return signalPassFailure();
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      func::FuncOp step = getTrainStep(model);
      if (!step) {
        model.emitOpError("has no train step to shard; run "
                          "fsdp-build-train-step first");
        return signalPassFailure();
      }
      if (step->hasAttr(kKeepWeightsWholeAttr) && !step->hasAttr(kEvalAttr)) {
        emitStepError(step) << "keeps weights whole across steps, which "
                               "only an eval step may (a training step "
                               "shards its gradients and optimizer state "
                               "with them)";
        return signalPassFailure();
      }
      if (failed(StepSharder(model, step, *mesh, *kind).run()))
        return signalPassFailure();
    }
  }
};

} // namespace
