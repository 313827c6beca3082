//===- FSDPToRT.cpp - scheduled train step to runtime calls ---------------===//
//
// Decides where every tensor of the step lives (the persistent buffer or a
// planned transient offset), describes the program for fsdp-run, and lets
// StepLowering emit the rt ops.
//
//===----------------------------------------------------------------------===//

#include "MemoryPlan.h"
#include "ProgramDescription.h"
#include "StepLowering.h"

#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"
#include "fsdp/Dialect/FSDP/Analysis/StepReport.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_CONVERTFSDPTORTPASS
#include "fsdp/Conversion/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

/// The value returned with result attribute `name` (the loss, the
/// gradient norm), or null.
Value fsdp::returnedValue(func::FuncOp step, StringRef name) {
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    if (step.getResultAttr(i, name))
      return ret.getOperand(i);
  return {};
}

/// Gradients that can be computed straight into their unit's flat gradient:
/// used only by the fsdp.flatten (possibly through single-use reshapes),
/// owned by an op of the step, of the flat gradient's element type. In
/// program order.
using GradientSlots =
    llvm::MapVector<Value, std::pair<Value, int64_t>>;
static GradientSlots flatGradientSlots(Block &body, const StepLayout &layout) {
  GradientSlots slots;
  for (auto flatten : body.getOps<FlattenOp>()) {
    Type element = flatten.getResult().getType().getElementType();
    int64_t offset = 0;
    for (Value input : flatten.getInputs()) {
      int64_t bytes = tensorBytes(input);
      Value owner = input;
      bool single = input.hasOneUse();
      while (Value source = storageAliasOf(owner)) {
        single &= source.hasOneUse();
        owner = source;
      }
      Operation *def = owner.getDefiningOp();
      if (single && def && !isStorageFree(def) &&
          !isa<arith::ConstantOp>(def) && !layout.persistentOffset.count(owner) &&
          !slots.count(owner) &&
          cast<RankedTensorType>(input.getType()).getElementType() == element)
        slots[owner] = {flatten.getResult(), offset};
      offset += bytes;
    }
  }
  return slots;
}

/// The transients' live spans in op indices, by owner: an op result (a
/// gathered unit by its wait, gradients in flat slots by the flat gradient),
/// live from its definition (the unshard, the first gradient) to its last
/// use. The runtime uses of the shared walk (StorageLiveness.h), less what
/// lives in the persistent or the host buffer.
using Spans = StorageSpans;
static Spans transientSpans(Block &body, const StepLayout &layout) {
  Spans spans = storageSpans(body, StorageUses::Runtime, &layout.flatSlots);
  spans.remove_if([&](const auto &entry) {
    Value root = entry.first;
    return isa<BlockArgument>(root) || layout.persistentOffset.count(root) ||
           layout.hostOffset.count(root);
  });
  return spans;
}

/// Places the transients at offsets above the persistent buffers.
static void planTransients(Block &body, StepLayout &layout) {
  Spans spans = transientSpans(body, layout);
  std::vector<Interval> intervals;
  for (auto &[root, span] : spans)
    intervals.push_back(
        {alignToArena(tensorBytes(root)), span.first, span.last});
  Placement plan = placeIntervals(intervals);
  layout.transients.clear();
  for (auto [i, entry] : llvm::enumerate(spans))
    layout.transients[entry.first] = {
        layout.persistentBytes + plan.offsets[i], intervals[i].bytes};
  layout.arenaBytes = layout.persistentBytes + plan.extent;
  layout.livePeakBytes = layout.persistentBytes + plan.livePeak;
}

/// Per unit, whether its gradients go straight into the flat gradient: a
/// slot is reserved from the unit's first gradient on, while copying holds
/// each gradient only from its own definition (plus the flat gradient at
/// the end); which is smaller depends on the unit (late first gradients
/// favour slots). Greedy in program order, a unit's slots are kept when the
/// step's live peak does not rise. The live bytes are updated per unit in
/// O(log ops), so the choice is linear in the step's size: re-planning the
/// arena per unit was quadratic in the depth of the model.
static GradientSlots chooseFlatSlots(Block &body, const StepLayout &copied,
                                     const GradientSlots &all) {
  StepLayout slotted = copied;
  slotted.flatSlots.insert(all.begin(), all.end());
  Spans copiedSpans = transientSpans(body, copied);
  Spans slottedSpans = transientSpans(body, slotted);

  LiveBytes live(std::distance(body.begin(), body.end()));
  auto change = [&](const Spans &spans, Value root, int64_t sign) {
    auto it = spans.find(root);
    if (it != spans.end())
      live.add(it->second.first, it->second.last,
               sign * alignToArena(tensorBytes(root)));
  };
  for (auto &[root, span] : copiedSpans)
    change(copiedSpans, root, +1);

  llvm::MapVector<Value, GradientSlots> byFlatGradient;
  for (auto &[gradient, slot] : all)
    byFlatGradient[slot.first].insert({gradient, slot});
  GradientSlots chosen;
  for (auto &unit : byFlatGradient) {
    Value flat = unit.first;
    const GradientSlots &slots = unit.second;
    int64_t peak = live.peak();
    // In slots, the gradients' own buffers go and the flat gradient lives
    // from the first of them.
    auto apply = [&](int64_t sign) {
      for (auto &entry : slots)
        change(copiedSpans, entry.first, -sign);
      change(copiedSpans, flat, -sign);
      change(slottedSpans, flat, +sign);
    };
    apply(+1);
    if (live.peak() > peak)
      apply(-1);
    else
      for (auto &entry : slots)
        chosen.insert(entry);
  }
  return chosen;
}

FailureOr<StepLayout> fsdp::layOutStep(func::FuncOp step) {
  StepLayout layout;
  Block &body = step.getBody().front();
  auto place = [&](Value v) {
    layout.persistentOffset[v] = layout.persistentBytes;
    layout.persistentBytes += alignToArena(tensorBytes(v));
  };
  // CPU offload: flat parameters, their state and the gradients copied to
  // the host for the optimizer in the host buffer, held for the whole run.
  auto placeOnHost = [&](Value v) {
    layout.hostOffset[v] = layout.hostBytes;
    layout.hostBytes += alignToArena(tensorBytes(v));
  };
  for (BlockArgument arg : body.getArguments()) {
    if (isHostArgument(step, arg.getArgNumber()))
      placeOnHost(arg);
    else if (!step.getArgAttr(arg.getArgNumber(), kStepCountArg))
      place(arg);
  }
  for (Operation &op : body) {
    if (isa<arith::ConstantOp>(op) && !isStorageFree(&op))
      place(op.getResult(0));
    if (isa<ToHostOp>(op))
      placeOnHost(op.getResult(0));
  }
  Value loss = returnedValue(step, kLossResult);
  if (!loss || !loss.getDefiningOp() || isStorageFree(loss.getDefiningOp()))
    return emitError(step.getLoc(), "train step '")
                   << step.getSymName()
                   << "' has no loss computed by the step to return",
           failure();
  // The scalars the runner reads get persistent slots: their storage's,
  // which for a view (the found-inf flag reshaped from the all-reduced one)
  // is its source's.
  Value gradNorm = returnedValue(step, kGradNormResult);
  Value foundInf = returnedValue(step, kFoundInfResult);
  for (Value scalar : {loss, gradNorm, foundInf})
    if (scalar)
      place(storageRoot(scalar, layout));
  // An eval step's named outputs (e.g. logits) too, once each storage.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  llvm::SmallPtrSet<Value, 4> outputs;
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    if (!step.getResultAttr(i, kOutputResult))
      continue;
    Value root = storageRoot(value, layout);
    if (isa<BlockArgument>(root) || !root.getDefiningOp() ||
        isStorageFree(root.getDefiningOp()))
      return ret.emitOpError("result #")
                 << i << " (output '"
                 << step.getResultAttrOfType<StringAttr>(i, kOutputResult)
                        .getValue()
                 << "') is not computed by the step; the runtime cannot "
                    "return it",
             failure();
    if (!layout.persistentOffset.count(root))
      place(root);
    outputs.insert(value);
  }

  // Every returned value must be the loss, the step count, an output or an
  // in-place update of an argument: the runner reads nothing else.
  for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
    Value root = storageRoot(value, layout);
    bool ok = value == loss || value == gradNorm || value == foundInf ||
              outputs.contains(value) || isa<BlockArgument>(root) ||
              (value.getDefiningOp() && isStorageFree(value.getDefiningOp()));
    if (!ok) {
      InFlightDiagnostic diag = ret.emitOpError("result #") << i;
      if (auto buffer = step.getResultAttrOfType<StringAttr>(i, kBufferArg))
        diag << " (buffer '" << buffer.getValue() << "')";
      if (Operation *def = value.getDefiningOp())
        diag << ", computed by " << def->getName() << ",";
      return diag << " is not the loss, the step count or an in-place "
                  << "update of an argument; the runtime cannot return it",
             failure();
    }
  }

  // The arena of the chosen slots, or of every unit or none in slots when
  // either is smaller still (the live peak is a lower bound, not the
  // arena's extent).
  GradientSlots all = flatGradientSlots(body, layout);
  GradientSlots chosen = chooseFlatSlots(body, layout, all), none;
  std::optional<StepLayout> best;
  for (const GradientSlots *slots : {&chosen, &all, &none}) {
    StepLayout candidate = layout;
    candidate.flatSlots.insert(slots->begin(), slots->end());
    planTransients(body, candidate);
    if (!best || candidate.arenaBytes < best->arenaBytes)
      best = std::move(candidate);
  }
  return *best;
}

/// The step's function type at the C ABI (fsdprt_step_fn, the runtime's
/// StepAbi.h).
static func::FuncOp declareLoweredStep(OpBuilder &b, func::FuncOp step) {
  auto out = func::FuncOp::create(
      b, step.getLoc(), step.getSymName(),
      b.getFunctionType(rt::stepArgTypes(b.getContext()), {}));
  out.addEntryBlock();
  for (auto [i, name] : llvm::enumerate(rt::stepArgNames()))
    out.setArgAttr(i, rt::RTDialect::NameAttrHelper::getNameStr(),
                   b.getStringAttr(name));
  return out;
}

static LogicalResult checkSchedule(Location loc,
                                   const LrScheduleOptions &schedule) {
  std::string why = schedule.invalidBecause();
  if (why.empty())
    return success();
  return emitError(loc, "convert-fsdp-to-rt: ") << why;
}

namespace {
struct ConvertFSDPToRTPass
    : public fsdp::impl::ConvertFSDPToRTPassBase<ConvertFSDPToRTPass> {
  using ConvertFSDPToRTPassBase::ConvertFSDPToRTPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<ModelOp> models(module.getOps<ModelOp>());
    if (models.size() != 1) {
      emitError(module.getLoc(), "convert-fsdp-to-rt: expected one fsdp.model "
                                 "with its scheduled train step, found ")
          << models.size() << " models";
      return signalPassFailure();
    }
    ModelOp model = models.front();
    func::FuncOp step = getTrainStep(model);
    if (!step || !step->hasAttr(kMeshAttr)) {
      emitError(model.getLoc(), "model '")
          << model.getSymName()
          << "' has no sharded train step to lower; run fsdp-pipeline (or "
             "fsdp-shard and fsdp-insert-collectives) first";
      return signalPassFailure();
    }
    if (!step.getBody().hasOneBlock()) {
      emitError(step.getLoc(), "train step '")
          << step.getSymName() << "' must be a single block to be lowered";
      return signalPassFailure();
    }

    FailureOr<StepLayout> layout = layOutStep(step);
    if (failed(layout))
      return signalPassFailure();
    FailureOr<MachineProfile> profile =
        namedMachineProfile(machine, module.getLoc(), "convert-fsdp-to-rt");
    if (failed(profile))
      return signalPassFailure();
    FailureOr<StepReport> analysis = analyzeStep(step, *profile);
    if (failed(analysis))
      return signalPassFailure();
    ArenaPlanSummary plan{layout->arenaBytes, layout->persistentBytes,
                          layout->livePeakBytes, layout->hostBytes};
    std::string report;
    llvm::raw_string_ostream os(report);
    printStepReport(os, model, step, *analysis, &plan);
    LrScheduleOptions schedule{lrSchedule, warmupSteps, decaySteps,
                               minLrRatio};
    if (failed(checkSchedule(module.getLoc(), schedule)))
      return signalPassFailure();
    FailureOr<std::string> program =
        describeProgram(model, step, *layout, report, schedule);
    if (failed(program))
      return signalPassFailure();

    OpBuilder b(step);
    func::FuncOp out = declareLoweredStep(b, step);
    out->setAttr(rt::RTDialect::ArenaBytesAttrHelper::getNameStr(),
                 b.getI64IntegerAttr(layout->arenaBytes));
    out->setAttr(rt::RTDialect::PersistentBytesAttrHelper::getNameStr(),
                 b.getI64IntegerAttr(layout->persistentBytes));
    if (layout->hostBytes)
      out->setAttr(rt::RTDialect::HostBytesAttrHelper::getNameStr(),
                   b.getI64IntegerAttr(layout->hostBytes));
    StepLowering lowering(step, *layout, out, fusedOptimizer);
    if (failed(lowering.run())) {
      out.erase();
      return signalPassFailure();
    }
    step.erase();
    model.erase();
    module->setAttr(kProgramAttr, b.getStringAttr(*program));
  }
};
} // namespace
