//===- BuildTrainStep.cpp - forward, reverse-mode backward, optimizer -----===//
//
// fsdp-build-train-step: the step function of a model, its forward inlined
// per micro-batch, differentiated (Autodiff.h), clipped (Clipping.h) and
// updated. The options are validated in OptimizerConfig.cpp; the rewrites
// applied once the step is built are in StepFusions.cpp.
//
//===----------------------------------------------------------------------===//

#include "Autodiff.h"
#include "Clipping.h"
#include "OptimizerConfig.h"
#include "StepFusions.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

#include "fsdp/Dialect/FSDP/Analysis/UnitOwnership.h"
#include "fsdp/Dialect/FSDP/Analysis/UnitPrecision.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPBUILDTRAINSTEPPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Recomputes an inlined op's result types from its (possibly recast)
/// operands: under mixed precision the forward runs in the param dtype.
LogicalResult retype(Operation *op) {
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(
            op->getContext(), op->getLoc(), op->getOperands(),
            op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
            op->getRegions(), types)))
      return failure();
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
  } else if (isa<nn::ReshapeOp, nn::BroadcastOp, nn::SliceOp, nn::PadOp>(op)) {
    auto in = cast<RankedTensorType>(op->getOperand(0).getType());
    auto out = cast<RankedTensorType>(op->getResult(0).getType());
    op->getResult(0).setType(out.clone(in.getElementType()));
  }
  return success();
}

/// Erases the ops whose results nothing reads, users first.
void eraseDeadOps(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

/// Replaces each nn.stop_gradient with its operand and each nn.custom_vjp
/// with its outputs: they have done their work once the step is
/// differentiated, and no kernel runs them.
void dropGradientMarkers(Block &body) {
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (auto stop = dyn_cast<nn::StopGradientOp>(op)) {
      stop.getResult().replaceAllUsesWith(stop.getInput());
      stop.erase();
    } else if (auto custom = dyn_cast<nn::CustomVJPOp>(op)) {
      custom.getResults().replaceAllUsesWith(custom.getOutputs());
      custom.erase();
    }
  }
}

/// Builds the train step of one model.
class TrainStepBuilder {
public:
  TrainStepBuilder(ModelOp model, const OptimizerConfig &config,
                   int64_t microBatches, double clipNorm, bool noSync,
                   bool eval, bool fuseAddNorms, bool fuseBiasGelus)
      : model(model), ownership(model), config(config),
        microBatches(microBatches), clipNorm(clipNorm), noSync(noSync),
        eval(eval), fuseAddNorms(fuseAddNorms), fuseBiasGelus(fuseBiasGelus),
        builder(model) {}

  LogicalResult build();

private:
  /// The step function with its named arguments, and its entry block.
  void createFunction();
  /// The values the forward reads: parameters (cast under mixed precision),
  /// optimizer state, the step count and buffers.
  void bindArguments();
  /// The forward and backward of every micro-batch; returns the mean loss.
  FailureOr<Value> emitMicroBatches();
  /// Records this micro-batch's outputs the root forward names (after the
  /// loss), in the dtypes it declares.
  void collectNamedOutputs(ArrayRef<Value> outputs);
  /// Drops from the trained parameters those the loss does not reach
  /// through differentiable ops, with their optimizer state arguments.
  LogicalResult dropUnreachedParams();
  /// The gradient of every trained parameter, for the update.
  SmallVector<Value> finalGradients();
  /// The optimizer updates and the step's results.
  void emitUpdatesAndReturn(Value loss, Value gradNorm, ArrayRef<Value> grads);
  ArrayRef<Type> inputTypes() {
    return model.getRoot().getForward().getFunctionType().getInputs();
  }
  /// Inlines `forward` (of its module) applied to `args` at the end of the
  /// step, recording the ops in `trace`; returns the forward's results.
  FailureOr<SmallVector<Value>> inlineForward(ForwardOp forward,
                                              ValueRange args);
  /// Whether the step trains `p` (an eval step trains nothing).
  bool trains(ParamOp p) const { return p.getRequiresGrad() && !eval; }
  /// Tags an op of the step with its unit and phase.
  void tag(Operation *op, StringRef unit, Phase phase);
  /// `value` cast to `element` (tagged), or `value` when it has that type.
  Value castTo(Value value, Type element, StringRef unit);
  /// castTo for a value the forward differentiates through: the cast joins
  /// the trace.
  Value castInTrace(Value value, Type element, StringRef unit);
  /// The mixed precision of `unit` (UnitPrecision.h).
  UnitPrecision precisionOf(NNModuleOp unit) {
    return getUnitPrecision(
        unit, model->getAttrOfType<DictionaryAttr>(kMixedPrecisionAttr));
  }
  RankedTensorType storedBufferType(BufferOp b);
  /// Casts the float operands of an nn op to f32 when they mix dtypes
  /// (PyTorch's type promotion: an f32 buffer or constant next to bf16
  /// activations under mixed precision); the casts join the trace.
  void promoteOperands(Operation *op, StringRef unit);
  Value applyOptimizer(ParamOp param, Value value, Value grad, ValueRange state,
                       Value step, SmallVectorImpl<Value> &newState);
  /// The loss cotangent times the loss scale.
  Value scaleSeed(Value seed);

  ModelOp model;
  UnitOwnership ownership;
  const OptimizerConfig &config;
  int64_t microBatches;
  double clipNorm;
  bool noSync;
  /// A forward-only step (model.eval() under torch.no_grad()).
  bool eval;
  /// Residual adds fuse with the layer_norm of their sum, and the norm's
  /// input gradient with the residual gradient (fuseAddLayerNorm).
  bool fuseAddNorms;
  /// Linear layers fuse with a following tanh GELU (fuseBiasGelu).
  bool fuseBiasGelus;
  OpBuilder builder;
  SymbolTableCollection tables;

  // The step under construction.
  SmallVector<ParamOp> params, trainable;
  SmallVector<BufferOp> buffers;
  func::FuncOp func;
  Block *body = nullptr;
  size_t firstInput = 0;
  SmallVector<Value> trainableValues;
  SmallVector<SmallVector<Value>> state;
  Value stepCount;
  /// The loss scaler's found-inf flag (with loss scaling).
  Value foundInf;
  llvm::DenseMap<Value, Value> gradSums;

  int64_t microBatch = 0;
  llvm::MapVector<ParamOp, Value> paramValues;
  llvm::MapVector<BufferOp, Value> bufferValues;
  SmallVector<Operation *> trace;
  /// Mixed precision: the parameter casts every micro-batch differentiates
  /// through.
  SmallVector<Operation *> entryCasts;
  /// Random sites (dropouts, draws) inlined so far: each gets its own key.
  uint64_t randomSites = 0;
  /// An eval step's named outputs of the root forward, per micro-batch.
  struct NamedOutput {
    StringAttr name;
    int64_t microBatch;
    Value value;
  };
  SmallVector<NamedOutput> namedOutputs;
};

void TrainStepBuilder::tag(Operation *op, StringRef unit, Phase phase) {
  tagOp(op, unit, phase);
  if (microBatches > 1)
    op->setAttr(kMicroBatchAttr, builder.getI64IntegerAttr(microBatch));
}

FailureOr<SmallVector<Value>> TrainStepBuilder::inlineForward(ForwardOp forward,
                                                              ValueRange args) {
  auto module = forward->getParentOfType<NNModuleOp>();
  std::string unit = ownership.getEnclosingUnit(module).getQualifiedName();
  // A unit's mixed precision casts its floating-point arguments to its
  // param dtype and its results to its output dtype (FSDP's pre- and
  // post-forward hooks).
  std::optional<UnitPrecision> precision;
  if (ownership.isUnit(module))
    precision = precisionOf(module);
  IRMapping mapping;
  for (auto [arg, value] : llvm::zip(forward.getBody().getArguments(), args))
    mapping.map(arg, precision && precision->castForwardInputs
                         ? castInTrace(value, precision->paramDtype, unit)
                         : value);
  auto lookup = [&](SymbolRefAttr ref) {
    return tables.lookupSymbolIn(module, ref);
  };
  for (Operation &op : forward.getBody().front()) {
    if (auto read = dyn_cast<GetParamOp>(op)) {
      mapping.map(read.getResult(),
                  paramValues.lookup(cast<ParamOp>(lookup(read.getParam()))));
    } else if (auto read = dyn_cast<GetBufferOp>(op)) {
      mapping.map(read.getResult(), bufferValues.lookup(cast<BufferOp>(
                                        lookup(read.getBuffer()))));
    } else if (auto write = dyn_cast<SetBufferOp>(op)) {
      bufferValues[cast<BufferOp>(lookup(write.getBuffer()))] =
          mapping.lookup(write.getValue());
    } else if (auto call = dyn_cast<CallOp>(op)) {
      auto callee = cast<NNModuleOp>(lookup(call.getCallee()));
      SmallVector<Value> operands;
      for (Value operand : call.getOperands())
        operands.push_back(mapping.lookup(operand));
      // The callee's forward for this call's signature (verified).
      FailureOr<SmallVector<Value>> results = inlineForward(
          callee.lookupForward(call.getOperandTypes()), operands);
      if (failed(results))
        return failure();
      mapping.map(call.getResults(), *results);
    } else if (auto ret = dyn_cast<ReturnOp>(op)) {
      SmallVector<Value> results;
      for (Value operand : ret.getOperands())
        results.push_back(
            castInTrace(mapping.lookup(operand),
                        precision ? precision->outputDtype : Type(), unit));
      return results;
    } else if (auto dropout = dyn_cast<nn::DropoutOp>(op); dropout && eval) {
      mapping.map(dropout.getResult(), mapping.lookup(dropout.getInput()));
    } else {
      Operation *clone = builder.clone(op, mapping);
      // model.eval(): BatchNorm normalises with its running statistics and
      // leaves them as they are.
      if (auto norm = dyn_cast<nn::BatchNormOp>(clone); norm && eval)
        norm.setTraining(false);
      tag(clone, unit, kForward);
      // Every inlined random site (each call, each micro-batch) draws its
      // own numbers; a dropout's VJP reuses the clone's id.
      if (auto site = dyn_cast<nn::RandomSiteOpInterface>(clone))
        site.setRngSite(
            int64_t((uint64_t(site.getRngSite()) << 32) | randomSites++));
      promoteOperands(clone, unit);
      trace.push_back(clone);
      if (failed(retype(clone)))
        return failure();
    }
  }
  return forward.emitOpError("has no fsdp.return");
}

/// A buffer as the step holds it: in the mixed-precision policy's
/// buffer_dtype when it has one and the buffer is floating point (FSDP casts
/// buffers to buffer_dtype once and keeps them so), else as declared.
RankedTensorType TrainStepBuilder::storedBufferType(BufferOp b) {
  auto type = cast<RankedTensorType>(b.getType());
  Type dtype = getPolicyDtype(model, kBufferDtypeKey);
  if (!dtype || !isa<FloatType>(type.getElementType()))
    return type;
  return type.clone(dtype);
}

Value TrainStepBuilder::castTo(Value value, Type element, StringRef unit) {
  auto type = cast<RankedTensorType>(value.getType());
  if (!element || type.getElementType() == element ||
      !isa<FloatType>(type.getElementType()))
    return value;
  auto cast =
      nn::CastOp::create(builder, value.getLoc(), type.clone(element), value);
  tag(cast, unit, kForward);
  return cast;
}

Value TrainStepBuilder::castInTrace(Value value, Type element,
                                    StringRef unit) {
  Value cast = castTo(value, element, unit);
  if (cast != value)
    trace.push_back(cast.getDefiningOp());
  return cast;
}

void TrainStepBuilder::promoteOperands(Operation *op, StringRef unit) {
  if (!isa<nn::NNDialect>(op->getDialect()) || isa<nn::CastOp>(op))
    return;
  llvm::SmallPtrSet<Type, 2> floats;
  for (Value operand : op->getOperands())
    if (auto element = dyn_cast<FloatType>(getElementTypeOrSelf(operand)))
      floats.insert(element);
  if (floats.size() < 2)
    return;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(op);
  for (OpOperand &operand : op->getOpOperands()) {
    Value value = operand.get();
    if (!isa<FloatType>(getElementTypeOrSelf(value)))
      continue;
    operand.set(castInTrace(value, builder.getF32Type(), unit));
  }
}

Value TrainStepBuilder::applyOptimizer(ParamOp param, Value value, Value grad,
                                       ValueRange state, Value step,
                                       SmallVectorImpl<Value> &newState) {
  Location loc = param.getLoc();
  Operation *update;
  Value newParam;
  GroupSettings group = config.groups.settingsOf(param, config.defaults());
  auto f64 = [&](StringRef name, double v) {
    return builder.getNamedAttr(name, builder.getF64FloatAttr(v));
  };
  SmallVector<NamedAttribute> attrs = {f64("lr", config.lr),
                                       f64("weight_decay", group.weightDecay)};
  if (group.lrScale != 1.0)
    attrs.push_back(f64("lr_scale", group.lrScale));
  if (config.kind == OptimizerConfig::Kind::Adafactor) {
    attrs.append({f64("beta2_decay", config.beta2Decay),
                  f64("eps1", config.eps1), f64("eps2", config.eps2),
                  f64("d", config.clipThreshold)});
    SmallVector<Value> operands = {value, grad, state[0], step};
    if (foundInf)
      operands.push_back(foundInf);
    auto op = AdafactorStepOp::create(
        builder, loc, TypeRange{value.getType(), state[0].getType()}, operands,
        attrs);
    newState.push_back(op.getNewState());
    update = op;
    newParam = op.getNewParam();
  } else if (config.kind == OptimizerConfig::Kind::Lion) {
    attrs.append({f64("beta1", group.beta1), f64("beta2", group.beta2)});
    SmallVector<Value> operands = {value, grad, state[0], step};
    if (foundInf)
      operands.push_back(foundInf);
    auto op = LionStepOp::create(
        builder, loc, TypeRange{value.getType(), value.getType()}, operands,
        attrs);
    newState.push_back(op.getNewExpAvg());
    update = op;
    newParam = op.getNewParam();
  } else if (config.kind != OptimizerConfig::Kind::SGD) {
    attrs.append({f64("beta1", group.beta1), f64("beta2", group.beta2),
                  f64("eps", group.eps)});
    if (config.kind == OptimizerConfig::Kind::Adam)
      attrs.push_back(
          builder.getNamedAttr("l2_weight_decay", builder.getUnitAttr()));
    SmallVector<Value> operands = {value, grad, state[0], state[1], step};
    if (foundInf)
      operands.push_back(foundInf);
    auto op = AdamWStepOp::create(
        builder, loc,
        TypeRange{value.getType(), value.getType(), value.getType()}, operands,
        attrs);
    newState.append({op.getNewExpAvg(), op.getNewExpAvgSq()});
    update = op;
    newParam = op.getNewParam();
  } else {
    bool hasMomentum = config.momentum != 0.0;
    SmallVector<Value> operands = {value, grad};
    SmallVector<Type> types = {value.getType()};
    if (hasMomentum) {
      operands.push_back(state[0]);
      types.push_back(value.getType());
    }
    operands.push_back(step);
    if (foundInf)
      operands.push_back(foundInf);
    attrs.push_back(sgdOperandSegments(builder, hasMomentum, bool(foundInf)));
    attrs.append(
        {f64("momentum", group.momentum), f64("dampening", group.dampening)});
    if (config.nesterov)
      attrs.push_back(builder.getNamedAttr("nesterov", builder.getUnitAttr()));
    auto op = SGDStepOp::create(builder, loc, types, operands, attrs);
    if (hasMomentum)
      newState.push_back(op.getNewMomentumBuffer());
    update = op;
    newParam = op.getNewParam();
  }
  tag(update, ownership.getOwner(param).getQualifiedName(), kOptimizer);
  return newParam;
}

Value TrainStepBuilder::scaleSeed(Value seed) {
  Location loc = model.getLoc();
  auto type = cast<RankedTensorType>(seed.getType());
  Value scale = LossScaleOp::create(
      builder, loc, RankedTensorType::get({}, builder.getF32Type()));
  tag(scale.getDefiningOp(), "", kBackward);
  if (scale.getType() != type) {
    scale = nn::CastOp::create(builder, loc, type, scale);
    tag(scale.getDefiningOp(), "", kBackward);
  }
  Value scaled = nn::MulOp::create(builder, loc, seed, scale);
  tag(scaled.getDefiningOp(), "", kBackward);
  return scaled;
}

LogicalResult TrainStepBuilder::build() {
  if (getTrainStep(model))
    return model.emitOpError("already has a train step");
  if (eval && (config.lossScaling || clipNorm > 0.0))
    return model.emitOpError("is built for evaluation (mode=eval), which has "
                             "no gradients for loss scaling or clipping");
  createFunction();
  bindArguments();
  FailureOr<Value> loss = emitMicroBatches();
  if (failed(loss))
    return failure();
  if (failed(dropUnreachedParams()))
    return failure();
  SmallVector<Value> grads = finalGradients();
  auto tagUpdate = [&](Operation *op, int i) {
    tag(op, i < 0 ? "" : ownership.getOwner(trainable[i]).getQualifiedName(),
        kOptimizer);
  };
  if (config.lossScaling && !grads.empty())
    foundInf = emitUnscaleGrads(builder, model.getLoc(), grads, tagUpdate);
  Value gradNorm;
  if (clipNorm > 0.0 && !grads.empty())
    gradNorm = emitClipGradNorm(
        builder, model.getLoc(), grads, builder.getF64FloatAttr(clipNorm),
        builder.getF64FloatAttr(config.clipNormType),
        [](Value total) { return total; }, tagUpdate);
  emitUpdatesAndReturn(*loss, gradNorm, grads);
  dropGradientMarkers(*body);

  // VJPs build every operand's cotangent; drop those nothing uses (e.g. the
  // gradient of the data input of the first layer), before fusing live
  // gradients and again after (the seeds the fused losses copied).
  eraseDeadOps(*body);
  splitLinearGradsWithoutInputGrad(*body);
  fuseCrossEntropyWithGrad(*body);
  if (fuseAddNorms) {
    fuseAddLayerNorm(*body);
    fuseAddLayerNormGrad(*body);
  }
  if (fuseBiasGelus)
    fuseBiasGelu(*body);
  eraseDeadOps(*body);
  return success();
}

void TrainStepBuilder::createFunction() {
  // The signature: parameters, optimizer state, step count, buffers, then
  // the inputs of every micro-batch, each named for the runtime.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argDicts;
  auto addArg = [&](Type type, StringRef key, Attribute value) {
    argTypes.push_back(type);
    argDicts.push_back(
        builder.getDictionaryAttr(builder.getNamedAttr(key, value)));
  };
  NNModuleOp root = model.getRoot();
  root.walk([&](ParamOp p) {
    params.push_back(p);
    if (trains(p))
      trainable.push_back(p);
  });
  root.walk([&](BufferOp b) { buffers.push_back(b); });
  for (ParamOp p : params)
    addArg(p.getTensorType(), kParamArg,
           builder.getStringAttr(qualifiedName(p)));
  for (ParamOp p : trainable)
    for (StringRef name : config.stateNames())
      addArg(config.stateType(p.getTensorType()), kStateArg,
             builder.getStringAttr(qualifiedName(p) + "." + name.str()));
  // The step count drives Adam's bias correction, SGD's first momentum step
  // and the dropout masks; every step has one.
  addArg(RankedTensorType::get({}, builder.getI64Type()), kStepCountArg,
         builder.getUnitAttr());
  for (BufferOp b : buffers)
    addArg(storedBufferType(b), kBufferArg,
           builder.getStringAttr(qualifiedName(b)));
  firstInput = argTypes.size();
  for (int64_t k = 0; k < microBatches; ++k)
    for (auto [i, type] : llvm::enumerate(inputTypes())) {
      argTypes.push_back(type);
      argDicts.push_back(builder.getDictionaryAttr(
          {builder.getNamedAttr(kInputArg, builder.getI64IntegerAttr(i)),
           builder.getNamedAttr(kMicroBatchAttr,
                                builder.getI64IntegerAttr(k))}));
    }

  builder.setInsertionPointAfter(model);
  std::string name =
      (model.getSymName() + (eval ? "_eval_step" : "_train_step")).str();
  func = func::FuncOp::create(builder, model.getLoc(), name,
                              builder.getFunctionType(argTypes, {}));
  func.setAllArgAttrs(argDicts);
  func->setAttr(kModelAttr, FlatSymbolRefAttr::get(model.getSymNameAttr()));
  func->setAttr(kMicroBatchesAttr, builder.getI64IntegerAttr(microBatches));
  if (eval)
    func->setAttr(kEvalAttr, builder.getUnitAttr());
  func->setAttr(kGradSyncAttr,
                GradSyncAttr::get(builder.getContext(),
                                  noSync ? GradSync::last_micro_batch
                                         : GradSync::every_micro_batch));
  if (Attribute policy = model->getAttr(kMixedPrecisionAttr))
    func->setAttr(kMixedPrecisionAttr, policy);
  body = func.addEntryBlock();
  builder.setInsertionPointToStart(body);
}

void TrainStepBuilder::bindArguments() {
  // Mixed precision: compute in the owning unit's param dtype, from casts
  // of the f32 parameters that autodiff differentiates through (their VJP
  // casts the gradient back).
  unsigned argIndex = 0;
  for (ParamOp p : params) {
    Value arg = body->getArgument(argIndex++);
    if (trains(p))
      trainableValues.push_back(arg);
    NNModuleOp owner = ownership.getOwner(p);
    paramValues[p] = castTo(arg, precisionOf(owner).paramDtype,
                            owner.getQualifiedName());
    if (paramValues[p] != arg)
      entryCasts.push_back(paramValues[p].getDefiningOp());
  }
  for (size_t i = 0; i < trainable.size(); ++i) {
    state.emplace_back();
    for (size_t s = 0; s < config.stateNames().size(); ++s)
      state.back().push_back(body->getArgument(argIndex++));
  }
  stepCount = body->getArgument(argIndex++);
  for (size_t i = 0; i < buffers.size(); ++i)
    bufferValues[buffers[i]] = body->getArgument(argIndex++);
}

FailureOr<Value> TrainStepBuilder::emitMicroBatches() {
  // Forward and backward of every micro-batch, each loss seeded with 1/k;
  // gradients summed.
  Location loc = model.getLoc();
  ArrayRef<Type> inputs = inputTypes();
  Value lossSum;
  for (microBatch = 0; microBatch < microBatches; ++microBatch) {
    trace.assign(entryCasts.begin(), entryCasts.end());
    FailureOr<SmallVector<Value>> outputs = inlineForward(
        model.getRoot().getForward(), body->getArguments().slice(
                             firstInput + microBatch * inputs.size(),
                             inputs.size()));
    if (failed(outputs))
      return failure();
    Value loss = outputs->front();
    if (eval)
      collectNamedOutputs(*outputs);
    auto lossType = cast<RankedTensorType>(loss.getType());
    Value seed = arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(lossType,
                               builder.getFloatAttr(lossType.getElementType(),
                                                    1.0 / microBatches)));
    tag(seed.getDefiningOp(), "", kBackward);
    if (config.lossScaling)
      seed = scaleSeed(seed);
    llvm::DenseMap<Value, Value> grads;
    if (!trainableValues.empty() &&
        failed(differentiate(
            builder, trace, loss, seed, trainableValues,
            [&](Operation *forwardOp, Operation *backwardOp) {
              tag(backwardOp,
                  cast<StringAttr>(forwardOp->getAttr(kUnitAttr)).getValue(),
                  kBackward);
            },
            grads)))
      return failure();
    for (auto [p, value] : llvm::zip(trainable, trainableValues)) {
      Value grad = grads.lookup(value);
      if (!grad)
        continue;
      Value &sum = gradSums[value];
      if (sum) {
        sum = nn::AddOp::create(builder, loc, sum, grad);
        tag(sum.getDefiningOp(), ownership.getOwner(p).getQualifiedName(),
            kBackward);
        // fsdp-shard reduces each micro-batch's term on its own unless the
        // step is no_sync.
        sum.getDefiningOp()->setAttr(kGradAccumulationAttr,
                                     builder.getUnitAttr());
      } else {
        sum = grad;
      }
    }
    if (lossSum) {
      lossSum = nn::AddOp::create(builder, loc, lossSum, loss);
      tag(lossSum.getDefiningOp(), "", kForward);
    } else {
      lossSum = loss;
    }
  }
  microBatch = 0;
  Value meanLoss = lossSum;
  if (microBatches > 1) {
    meanLoss = nn::ScaleOp::create(builder, loc, lossSum,
                                   builder.getF64FloatAttr(1.0 / microBatches));
    tag(meanLoss.getDefiningOp(), "", kForward);
  }
  // The loss is reported in the dtype the model declares.
  Type declared = getElementTypeOrSelf(
      model.getRoot().getForward().getFunctionType().getResult(0));
  return castTo(meanLoss, declared, "");
}

void TrainStepBuilder::collectNamedOutputs(ArrayRef<Value> outputs) {
  ForwardOp forward = model.getRoot().getForward();
  auto ret = cast<ReturnOp>(forward.getBody().front().getTerminator());
  std::optional<ArrayAttr> names = ret.getNames();
  if (!names)
    return;
  ArrayRef<Type> declared = forward.getFunctionType().getResults();
  for (size_t i = 1; i < outputs.size(); ++i)
    namedOutputs.push_back(
        {cast<StringAttr>((*names)[i]), microBatch,
         castTo(outputs[i], getElementTypeOrSelf(declared[i]), "")});
}

LogicalResult TrainStepBuilder::dropUnreachedParams() {
  // PyTorch leaves the .grad of a parameter the loss does not reach (unused,
  // or read only under detach / no_grad) None, and torch.optim, DDP and
  // FSDP2 skip it: no weight decay, no state. Such a parameter is then what
  // a frozen one is: read where the forward reads it, never reduced nor
  // updated (fsdp-shard puts it in its unit's frozen flat parameter).
  llvm::BitVector droppedArgs(body->getNumArguments());
  SmallVector<Attribute> unreached;
  SmallVector<ParamOp> keptParams;
  SmallVector<Value> keptValues;
  SmallVector<SmallVector<Value>> keptState;
  for (auto [p, value, pState] : llvm::zip(trainable, trainableValues, state)) {
    if (gradSums.count(value)) {
      keptParams.push_back(p);
      keptValues.push_back(value);
      keptState.push_back(pState);
      continue;
    }
    for (Value s : pState)
      droppedArgs.set(cast<BlockArgument>(s).getArgNumber());
    unreached.push_back(builder.getStringAttr(qualifiedName(p)));
  }
  trainable = std::move(keptParams);
  trainableValues = std::move(keptValues);
  state = std::move(keptState);
  if (unreached.empty())
    return success();
  func->setAttr(kUnreachedAttr, builder.getArrayAttr(unreached));
  if (droppedArgs.any() && failed(func.eraseArguments(droppedArgs)))
    return model.emitOpError("could not drop the optimizer state of the "
                             "parameters its loss does not reach");
  return success();
}

SmallVector<Value> TrainStepBuilder::finalGradients() {
  auto policy = model->getAttrOfType<DictionaryAttr>(kMixedPrecisionAttr);
  bool keepLowPrecisionGrads =
      policy && policy.contains(kKeepLowPrecisionGradsKey);
  SmallVector<Value> grads;
  for (Value value : trainableValues) {
    Value grad = gradSums.lookup(value);
    // keep_low_precision_grads: the update takes the gradient before the
    // parameter cast's VJP brings it back up.
    if (auto up = grad.getDefiningOp<nn::CastOp>())
      if (keepLowPrecisionGrads && getPhase(up) == kBackward)
        grad = up.getInput();
    grads.push_back(grad);
  }
  return grads;
}

void TrainStepBuilder::emitUpdatesAndReturn(Value loss, Value gradNorm,
                                            ArrayRef<Value> grads) {
  Location loc = model.getLoc();
  SmallVector<Value> results;
  SmallVector<DictionaryAttr> resultDicts;
  auto addResult = [&](Value value, StringRef key, Attribute name) {
    results.push_back(value);
    resultDicts.push_back(
        builder.getDictionaryAttr(builder.getNamedAttr(key, name)));
  };
  addResult(loss, kLossResult, builder.getUnitAttr());
  if (gradNorm)
    addResult(gradNorm, kGradNormResult, builder.getUnitAttr());
  if (foundInf)
    addResult(foundInf, kFoundInfResult, builder.getUnitAttr());
  for (const NamedOutput &output : namedOutputs) {
    addResult(output.value, kOutputResult, output.name);
    resultDicts.back() = builder.getDictionaryAttr(
        {builder.getNamedAttr(kOutputResult, output.name),
         builder.getNamedAttr(kMicroBatchAttr,
                              builder.getI64IntegerAttr(output.microBatch))});
  }

  // The optimizer update of every trainable parameter; then its state.
  SmallVector<std::pair<Value, std::string>> newStates;
  for (auto [i, p] : llvm::enumerate(trainable)) {
    SmallVector<Value> newState;
    addResult(applyOptimizer(p, trainableValues[i], grads[i], state[i],
                             stepCount, newState),
              kParamArg, builder.getStringAttr(qualifiedName(p)));
    for (auto [value, stateName] : llvm::zip(newState, config.stateNames()))
      newStates.push_back({value, qualifiedName(p) + "." + stateName.str()});
  }
  for (auto &[value, name] : newStates)
    addResult(value, kStateArg, builder.getStringAttr(name));

  Value one = arith::ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(cast<RankedTensorType>(stepCount.getType()),
                             builder.getI64IntegerAttr(1)));
  Value next = arith::AddIOp::create(builder, loc, stepCount, one);
  tag(one.getDefiningOp(), "", kOptimizer);
  tag(next.getDefiningOp(), "", kOptimizer);
  addResult(next, kStepCountArg, builder.getUnitAttr());
  for (auto [b, value] : bufferValues)
    addResult(castTo(value, storedBufferType(b).getElementType(), ""),
              kBufferArg, builder.getStringAttr(qualifiedName(b)));

  func::ReturnOp::create(builder, loc, results);
  func.setType(builder.getFunctionType(func.getArgumentTypes(),
                                       ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultDicts);
}

struct BuildTrainStepPass
    : public fsdp::impl::FSDPBuildTrainStepPassBase<BuildTrainStepPass> {
  using FSDPBuildTrainStepPassBase::FSDPBuildTrainStepPassBase;

  /// The pass's options as the struct OptimizerConfig::parse checks.
  FSDPBuildTrainStepPassOptions options() const {
    FSDPBuildTrainStepPassOptions o;
    o.optimizer = optimizer;
    o.lr = lr;
    o.momentum = momentum;
    o.dampening = dampening;
    o.nesterov = nesterov;
    o.weightDecay = weightDecay;
    o.beta1 = beta1;
    o.beta2 = beta2;
    o.eps = eps;
    o.beta2Decay = beta2Decay;
    o.eps1 = eps1;
    o.eps2 = eps2;
    o.clipThreshold = clipThreshold;
    o.clipGradNorm = clipGradNorm;
    o.clipNormType = clipNormType;
    o.gradAccumSteps = gradAccumSteps;
    o.noSync = noSync;
    o.paramGroups.assign(paramGroups.begin(), paramGroups.end());
    o.noDecay1d = noDecay1d;
    o.lossScale = lossScale;
    o.mode = mode;
    return o;
  }

  void runOnOperation() override {
    FailureOr<OptimizerConfig> config =
        OptimizerConfig::parse(options(), getOperation().getLoc());
    if (failed(config))
      return signalPassFailure();
    for (ModelOp model : llvm::to_vector(getOperation().getOps<ModelOp>())) {
      TrainStepBuilder stepBuilder(model, *config, gradAccumSteps, clipGradNorm,
                                   noSync, mode == "eval", fuseAddLayerNorm,
                                   fuseBiasGelu);
      if (failed(stepBuilder.build()))
        return signalPassFailure();
    }
  }
};

} // namespace
