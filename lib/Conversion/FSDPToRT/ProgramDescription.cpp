//===- ProgramDescription.cpp - the fsdp.program JSON for fsdp-run --------===//

#include "ProgramDescription.h"

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "fsdp/rt/ProgramKeys.h"

#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::fsdp;
namespace keys = fsdprt::program_keys;

static std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

static llvm::json::Array shapeJson(ArrayRef<int64_t> shape) {
  llvm::json::Array out;
  for (int64_t d : shape)
    out.push_back(d);
  return out;
}

static llvm::json::Object initJson(InitAttr init) {
  llvm::json::Array args;
  for (double a : init.getArgs().asArrayRef())
    args.push_back(a);
  return llvm::json::Object{
      {keys::init_kind, stringifyInitKind(init.getKind())},
      {keys::init_args, std::move(args)}};
}

/// A tensor the runner initialises, saves and loads whole under `name`.
static llvm::json::Object bufferJson(StringRef name, RankedTensorType type,
                                     int64_t offset, InitAttr init) {
  return llvm::json::Object{
      {keys::buffer_name, name},
      {keys::buffer_shape, shapeJson(type.getShape())},
      {keys::buffer_dtype, typeName(type.getElementType())},
      {keys::buffer_offset, offset},
      {keys::buffer_init, initJson(init)}};
}

namespace {
/// The ids an integer input may hold, when a consumer tells it: below an
/// embedding's rows, a cross-entropy's classes or an nn.id_range's count, or
/// the cross-entropy's (or id_range's) ignore_index (masked-LM labels are
/// mostly -100).
struct IdRange {
  int64_t max = -1;
  std::optional<int64_t> ignore;
};
} // namespace

static IdRange idRangeOf(Value input) {
  for (Operation *user : input.getUsers()) {
    if (isa<nn::ReshapeOp, nn::SliceOp, nn::PadOp>(user))
      if (IdRange range = idRangeOf(user->getResult(0)); range.max >= 0)
        return range;
    if (auto embedding = dyn_cast<nn::EmbeddingOp>(user))
      return {
          cast<RankedTensorType>(embedding.getTable().getType()).getDimSize(0),
          std::nullopt};
    auto classes = [](auto ce) -> IdRange {
      return {ce.getClassCount(), ce.getIgnoreIndex()};
    };
    if (auto ce = dyn_cast<nn::CrossEntropyOp>(user))
      return classes(ce);
    if (auto ce = dyn_cast<nn::CrossEntropyWithGradOp>(user))
      return classes(ce);
    if (auto range = dyn_cast<nn::IdRangeOp>(user)) {
      IntegerAttr ignore = range.getIgnoreAttr();
      return {range.getCountAttr().getInt(),
              ignore ? std::optional(ignore.getInt()) : std::nullopt};
    }
  }
  return {};
}

FailureOr<std::string>
fsdp::describeProgram(ModelOp model, func::FuncOp step,
                      const StepLayout &layout, StringRef report,
                      const LrScheduleOptions &schedule) {
  llvm::StringMap<ParamOp> params;
  llvm::StringMap<BufferOp> buffers;
  model.walk([&](ParamOp p) { params[qualifiedName(p)] = p; });
  model.walk([&](BufferOp p) { buffers[qualifiedName(p)] = p; });
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttr);
  int64_t shard = mesh.getShard();
  int64_t replicate = mesh.getRank() == 2 ? mesh.getReplicate() : 1;
  llvm::StringSet<> keptWhole = getKeptWholeUnits(step);

  Block &body = step.getBody().front();
  llvm::StringMap<size_t> unitIndex;
  llvm::json::Array units, inputs, bufferList;
  // Offsets into the persistent buffer, or into the host buffer for what
  // CPU offload keeps there (flat parameters and their state).
  auto offsetOf = [&](Value v) {
    Value root = storageRoot(v, layout);
    auto host = layout.hostOffset.find(root);
    return host != layout.hostOffset.end()
               ? host->second
               : layout.persistentOffset.lookup(root);
  };
  // Flat parameters first (argument order), then their optimizer state.
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto unit = step.getArgAttrOfType<StringAttr>(i, kFlatParamArg);
    if (!unit || step.getArgAttr(i, kFlatStateArg))
      continue;
    auto names = step.getArgAttrOfType<ArrayAttr>(i, kFlatParamsArg);
    auto offsets = step.getArgAttrOfType<DenseI64ArrayAttr>(i, kFlatOffsetsArg);
    auto flatNumel = step.getArgAttrOfType<IntegerAttr>(i, kFlatNumelArg);
    if (!names || !offsets || !flatNumel)
      return emitStepError(step)
                 << "flat parameter argument #" << i
                 << " lacks fsdp.params / fsdp.offsets / fsdp.flat_numel",
             failure();
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t shardNumel = type.getNumElements();
    bool rankLocal = step.getArgAttr(i, kRankLocalArg) != nullptr;
    // Whole on this rank: a rank-local unit's, or an eval step's unit
    // kept whole across steps (fsdp.keep_weights_whole).
    bool whole = rankLocal || keptWhole.contains(unit.getValue());
    int64_t padded = shard > 1 && !whole ? shardNumel * shard : shardNumel;
    llvm::json::Array paramList;
    for (auto [name, offset] : llvm::zip(names, offsets.asArrayRef())) {
      StringRef qualified = cast<StringAttr>(name).getValue();
      ParamOp decl = params.lookup(qualified);
      if (!decl)
        return emitStepError(step) << "flat parameter names '" << qualified
                                   << "', which the model does not declare",
               failure();
      paramList.push_back(llvm::json::Object{
          {keys::param_name, qualified},
          {keys::param_shape,
           shapeJson(cast<RankedTensorType>(decl.getType()).getShape())},
          {keys::param_flat_offset, offset},
          {keys::param_init, initJson(decl.getInit())}});
    }
    // A unit's frozen flat parameter has no optimizer state of its own.
    bool frozen = step.getArgAttr(i, kFrozenArg) != nullptr;
    bool ignored = step.getArgAttr(i, kIgnoredArg) != nullptr;
    if (!frozen)
      unitIndex[unit.getValue()] = units.size();
    units.push_back(
        llvm::json::Object{{keys::unit_name, unit.getValue()},
                           {keys::unit_dtype, typeName(type.getElementType())},
                           {keys::unit_offset, offsetOf(arg)},
                           {keys::unit_flat_numel, flatNumel.getInt()},
                           {keys::unit_padded_numel, padded},
                           {keys::unit_shard_numel, shardNumel},
                           {keys::unit_rank_local, rankLocal},
                           {keys::unit_frozen, frozen},
                           {keys::unit_ignored, ignored},
                           {keys::unit_params, std::move(paramList)},
                           {keys::unit_state, llvm::json::Array()}});
  }
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto unit = step.getArgAttrOfType<StringAttr>(i, kFlatParamArg);
    auto state = step.getArgAttrOfType<StringAttr>(i, kFlatStateArg);
    if (unit) {
      if (!state)
        continue; // the flat parameter itself, described above
      auto it = unitIndex.find(unit.getValue());
      if (it == unitIndex.end())
        return emitStepError(step) << "optimizer state of unknown unit '"
                                   << unit.getValue() << "'",
               failure();
      llvm::json::Object *unitObject = units[it->second].getAsObject();
      llvm::json::Object stateObject{{keys::state_name, state.getValue()},
                                     {keys::state_offset, offsetOf(arg)}};
      // Adafactor's factored second moment is whole on every rank.
      if (!step.getBody().getOps<AdafactorApplyOp>().empty()) {
        stateObject[keys::state_numel] =
            cast<RankedTensorType>(arg.getType()).getNumElements();
        stateObject[keys::state_whole] = true;
      }
      unitObject->getArray(keys::unit_state)->push_back(std::move(stateObject));
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (auto input = step.getArgAttrOfType<IntegerAttr>(i, kInputArg)) {
      auto micro = step.getArgAttrOfType<IntegerAttr>(i, kMicroBatchAttr);
      IdRange ids = idRangeOf(arg);
      llvm::json::Object description{
          {keys::input_index, input.getInt()},
          {keys::input_micro_batch, micro ? micro.getInt() : 0},
          {keys::input_shape, shapeJson(type.getShape())},
          {keys::input_dtype, typeName(type.getElementType())},
          {keys::input_offset, offsetOf(arg)},
          {keys::input_max_id, ids.max}};
      if (ids.ignore)
        description[keys::input_ignore_id] = *ids.ignore;
      inputs.push_back(std::move(description));
      continue;
    }
    if (auto buffer = step.getArgAttrOfType<StringAttr>(i, kBufferArg)) {
      BufferOp decl = buffers.lookup(buffer.getValue());
      if (!decl)
        return emitError(step.getLoc(), "buffer argument #")
                   << i << " names '" << buffer.getValue()
                   << "', which the model does not declare",
               failure();
      bufferList.push_back(
          bufferJson(buffer.getValue(), type, offsetOf(arg), decl.getInit()));
      continue;
    }
    // fsdp-shard puts every parameter, frozen or not, in a flat parameter.
    if (auto param = step.getArgAttrOfType<StringAttr>(i, kParamArg)) {
      ParamOp decl = params.lookup(param.getValue());
      return emitError(decl ? decl.getLoc() : arg.getLoc(), "parameter '")
                 << param.getValue()
                 << "' is an argument of the train step outside any flat "
                    "parameter; run fsdp-shard before the lowering",
             failure();
    }
    if (!step.getArgAttr(i, kStepCountArg))
      return emitError(step.getLoc(), "argument #")
                 << i << " of the train step has no role the runner knows",
             failure();
  }

  std::string optimizer = "none";
  double lr = 0.0;
  step.walk([&](Operation *op) {
    if (auto adamw = dyn_cast<AdamWStepOp>(op))
      optimizer = adamw.getL2WeightDecay() ? "adam" : "adamw",
      lr = adamw.getLr().convertToDouble();
    else if (auto lion = dyn_cast<LionStepOp>(op))
      optimizer = "lion", lr = lion.getLr().convertToDouble();
    else if (auto adafactor = dyn_cast<AdafactorApplyOp>(op))
      optimizer = "adafactor", lr = adafactor.getLr().convertToDouble();
    else if (auto sgd = dyn_cast<SGDStepOp>(op))
      optimizer = "sgd", lr = sgd.getLr().convertToDouble();
  });
  Value loss = returnedValue(step, kLossResult);
  Value gradNorm = returnedValue(step, kGradNormResult);
  auto microBatches = step->getAttrOfType<IntegerAttr>(kMicroBatchesAttr);

  llvm::json::Object program{
      {keys::program_model, model.getSymName()},
      {keys::program_mode, step->hasAttr(kEvalAttr) ? "eval" : "train"},
      {keys::program_entry, step.getSymName()},
      {keys::program_world_size, mesh.getWorldSize()},
      {keys::program_replicate, replicate},
      {keys::program_shard, shard},
      {keys::program_micro_batches, microBatches ? microBatches.getInt() : 1},
      {keys::program_optimizer, optimizer},
      {keys::program_lr, lr},
      {keys::program_lr_schedule,
       llvm::json::Object{
           {keys::lr_schedule_kind, schedule.kind},
           {keys::lr_schedule_warmup_steps, schedule.warmupSteps},
           {keys::lr_schedule_decay_steps, schedule.decaySteps},
           {keys::lr_schedule_min_lr_ratio, schedule.minLrRatio}}},
      {keys::program_persistent_bytes, layout.persistentBytes},
      {keys::program_cpu_offload, isOffloaded(step)},
      {keys::program_host_bytes, layout.hostBytes},
      {keys::program_arena_bytes, layout.arenaBytes},
      {keys::program_estimate_bytes, layout.arenaBytes},
      {keys::program_report, report},
      {keys::program_units, std::move(units)},
      {keys::program_buffers, std::move(bufferList)},
      {keys::program_inputs, std::move(inputs)},
      {keys::program_loss,
       llvm::json::Object{
           {keys::loss_offset, offsetOf(loss)},
           {keys::loss_dtype,
            typeName(
                cast<RankedTensorType>(loss.getType()).getElementType())}}}};
  if (gradNorm)
    program[keys::program_grad_norm] =
        llvm::json::Object{{keys::grad_norm_offset, offsetOf(gradNorm)}};
  // reshard_after_forward = N: the runner makes the groups of N ranks
  // (fsdp-insert-collectives allows one N per step).
  for (auto unshard : body.getOps<UnshardOp>())
    if (std::optional<int64_t> group = unshard.getPostForwardGroup())
      program[keys::program_post_forward_group] = *group;
  // An eval step's named outputs, per micro-batch (this rank's rows).
  llvm::json::Array outputs;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, value] : llvm::enumerate(ret.getOperands()))
    if (auto name = step.getResultAttrOfType<StringAttr>(i, kOutputResult)) {
      auto type = cast<RankedTensorType>(value.getType());
      outputs.push_back(llvm::json::Object{
          {keys::output_name, name.getValue()},
          {keys::output_micro_batch,
           step.getResultAttrOfType<IntegerAttr>(i, kMicroBatchAttr).getInt()},
          {keys::output_shape, shapeJson(type.getShape())},
          {keys::output_dtype, typeName(type.getElementType())},
          {keys::output_offset, offsetOf(value)}});
    }
  if (!outputs.empty())
    program[keys::program_outputs] = std::move(outputs);
  // GradScaler's settings are the runner's (PyTorch's defaults, or its
  // options): the program only says where the flag is.
  if (Value foundInf = returnedValue(step, kFoundInfResult))
    program[keys::program_loss_scale] = llvm::json::Object{
        {keys::loss_scale_found_inf_offset, offsetOf(foundInf)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(program));
  return text;
}
