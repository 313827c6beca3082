//===- ProgramDescription.cpp - the fsdp.program JSON for fsdp-run --------===//

#include "ProgramDescription.h"

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::fsdp;

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
  return llvm::json::Object{{"kind", stringifyInitKind(init.getKind())},
                            {"args", std::move(args)}};
}

/// A tensor the runner initialises, saves and loads whole under `name`.
static llvm::json::Object bufferJson(StringRef name, RankedTensorType type,
                                     int64_t offset, InitAttr init) {
  return llvm::json::Object{{"name", name},
                            {"shape", shapeJson(type.getShape())},
                            {"dtype", typeName(type.getElementType())},
                            {"offset", offset},
                            {"init", initJson(init)}};
}

namespace {
/// The ids an integer input may hold, when a consumer tells it: below an
/// embedding's rows or a cross-entropy's classes, or the cross-entropy's
/// ignore_index (masked-LM labels are mostly -100).
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
      return {cast<RankedTensorType>(embedding.getTable().getType())
                  .getDimSize(0),
              std::nullopt};
    auto classes = [](auto ce) -> IdRange {
      return {ce.getClassCount(), ce.getIgnoreIndex()};
    };
    if (auto ce = dyn_cast<nn::CrossEntropyOp>(user))
      return classes(ce);
    if (auto ce = dyn_cast<nn::CrossEntropyWithGradOp>(user))
      return classes(ce);
  }
  return {};
}

FailureOr<std::string> fsdp::describeProgram(ModelOp model, func::FuncOp step,
                                             const StepLayout &layout,
                                             StringRef report,
                                             const LrScheduleOptions &schedule) {
  llvm::StringMap<ParamOp> params;
  llvm::StringMap<BufferOp> buffers;
  model.walk([&](ParamOp p) { params[qualifiedName(p)] = p; });
  model.walk([&](BufferOp p) { buffers[qualifiedName(p)] = p; });
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttr);
  int64_t shard = mesh.getShard();
  int64_t replicate = mesh.getRank() == 2 ? mesh.getReplicate() : 1;

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
      return emitStepError(step) << "flat parameter argument #"
                 << i << " lacks fsdp.params / fsdp.offsets / fsdp.flat_numel",
             failure();
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t shardNumel = type.getNumElements();
    bool rankLocal = step.getArgAttr(i, kRankLocalArg) != nullptr;
    int64_t padded = shard > 1 && !rankLocal ? shardNumel * shard : shardNumel;
    llvm::json::Array paramList;
    for (auto [name, offset] : llvm::zip(names, offsets.asArrayRef())) {
      StringRef qualified = cast<StringAttr>(name).getValue();
      ParamOp decl = params.lookup(qualified);
      if (!decl)
        return emitStepError(step) << "flat parameter names '"
                   << qualified << "', which the model does not declare",
               failure();
      paramList.push_back(llvm::json::Object{
          {"name", qualified},
          {"shape",
           shapeJson(cast<RankedTensorType>(decl.getType()).getShape())},
          {"flat_offset", offset},
          {"init", initJson(decl.getInit())}});
    }
    // A unit's frozen flat parameter has no optimizer state of its own.
    bool frozen = step.getArgAttr(i, kFrozenArg) != nullptr;
    if (!frozen)
      unitIndex[unit.getValue()] = units.size();
    units.push_back(llvm::json::Object{
        {"name", unit.getValue()},
        {"dtype", typeName(type.getElementType())},
        {"offset", offsetOf(arg)},
        {"flat_numel", flatNumel.getInt()},
        {"padded_numel", padded},
        {"shard_numel", shardNumel},
        {"rank_local", rankLocal},
        {"frozen", frozen},
        {"params", std::move(paramList)},
        {"state", llvm::json::Array()}});
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
      units[it->second].getAsObject()->getArray("state")->push_back(
          llvm::json::Object{{"name", state.getValue()},
                             {"offset", offsetOf(arg)}});
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (auto input = step.getArgAttrOfType<IntegerAttr>(i, kInputArg)) {
      auto micro = step.getArgAttrOfType<IntegerAttr>(i, kMicroBatchAttr);
      IdRange ids = idRangeOf(arg);
      llvm::json::Object description{
          {"index", input.getInt()},
          {"micro_batch", micro ? micro.getInt() : 0},
          {"shape", shapeJson(type.getShape())},
          {"dtype", typeName(type.getElementType())},
          {"offset", offsetOf(arg)},
          {"max_id", ids.max}};
      if (ids.ignore)
        description["ignore_id"] = *ids.ignore;
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
      optimizer = "adamw", lr = adamw.getLr().convertToDouble();
    else if (auto sgd = dyn_cast<SGDStepOp>(op))
      optimizer = "sgd", lr = sgd.getLr().convertToDouble();
  });
  Value loss = returnedValue(step, kLossResult);
  Value gradNorm = returnedValue(step, kGradNormResult);
  auto microBatches = step->getAttrOfType<IntegerAttr>(kMicroBatchesAttr);

  llvm::json::Object program{
      {"version", 1},
      {"model", model.getSymName()},
      {"mode", step->hasAttr(kEvalAttr) ? "eval" : "train"},
      {"entry", step.getSymName()},
      {"world_size", mesh.getWorldSize()},
      {"replicate", replicate},
      {"shard", shard},
      {"strategy", strategyOptionName(getStrategy(step))},
      {"micro_batches", microBatches ? microBatches.getInt() : 1},
      {"optimizer", optimizer},
      {"lr", lr},
      {"lr_schedule",
       llvm::json::Object{{"kind", schedule.kind},
                          {"warmup_steps", schedule.warmupSteps},
                          {"decay_steps", schedule.decaySteps},
                          {"min_lr_ratio", schedule.minLrRatio}}},
      {"persistent_bytes", layout.persistentBytes},
      {"cpu_offload", isOffloaded(step)},
      {"host_bytes", layout.hostBytes},
      {"arena_bytes", layout.arenaBytes},
      {"estimate_bytes", layout.arenaBytes},
      {"report", report},
      {"units", std::move(units)},
      {"buffers", std::move(bufferList)},
      {"inputs", std::move(inputs)},
      {"loss",
       llvm::json::Object{
           {"offset", offsetOf(loss)},
           {"dtype",
            typeName(cast<RankedTensorType>(loss.getType()).getElementType())}}}};
  if (gradNorm)
    program["grad_norm"] = llvm::json::Object{{"offset", offsetOf(gradNorm)}};
  // An eval step's named outputs, per micro-batch (this rank's rows).
  llvm::json::Array outputs;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, value] : llvm::enumerate(ret.getOperands()))
    if (auto name = step.getResultAttrOfType<StringAttr>(i, kOutputResult)) {
      auto type = cast<RankedTensorType>(value.getType());
      outputs.push_back(llvm::json::Object{
          {"name", name.getValue()},
          {"micro_batch",
           step.getResultAttrOfType<IntegerAttr>(i, kMicroBatchAttr).getInt()},
          {"shape", shapeJson(type.getShape())},
          {"dtype", typeName(type.getElementType())},
          {"offset", offsetOf(value)}});
    }
  if (!outputs.empty())
    program["outputs"] = std::move(outputs);
  // GradScaler's settings are the runner's (PyTorch's defaults, or its
  // options): the program only says where the flag is.
  if (Value foundInf = returnedValue(step, kFoundInfResult))
    program["loss_scale"] =
        llvm::json::Object{{"found_inf_offset", offsetOf(foundInf)}};
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::json::Value(std::move(program));
  return text;
}
