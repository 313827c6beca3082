//===- Report.cpp - per-rank peak memory and collectives of a step ---------===//

#include "StepTime.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"
#include "fsdp/Dialect/FSDP/Transforms/StepAttrs.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPREPORTPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

int64_t bytesOf(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return 0;
  return tensor.getNumElements() *
         llvm::divideCeil(tensor.getElementTypeBitWidth(), 8);
}

/// What a live value is, for the peak's breakdown.
enum class Category {
  ShardedParams,
  OptimizerState,
  Gradients,
  UnshardedParams,
  Activations,
  Transient,
  InputsAndBuffers
};
constexpr const char *kCategoryNames[] = {
    "sharded parameters", "optimizer state",
    "gradients",          "unsharded parameters",
    "activations for backward", "transient",
    "inputs and buffers"};
constexpr const char *kCategoryKeys[] = {
    "sharded_params", "optimizer_state", "gradients", "unsharded_params",
    "activations",    "transient",       "inputs_and_buffers"};
constexpr size_t kCategories = std::size(kCategoryNames);

/// One allocation: a value's bytes over [start, end] (op indices; -1 is
/// the step's entry).
struct Allocation {
  int64_t bytes;
  int64_t start, end;
  Category category;
};

struct Collective {
  std::string kind, unit, phase, stream;
  Type dtype;
  int64_t elements;
  int64_t bytes;
};

struct StepReport {
  int64_t peakBytes = 0;
  int64_t peakIndex = -1;
  Operation *peakOp = nullptr;
  std::array<int64_t, kCategories> breakdown{};
  std::vector<Collective> collectives;
  MachineProfile profile;
  StepTime time;
};

Category categoryOf(Value value, func::FuncOp step) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (step.getArgAttr(arg.getArgNumber(), kFlatStateArg))
      return Category::OptimizerState;
    if (step.getArgAttr(arg.getArgNumber(), kFlatParamArg))
      return Category::ShardedParams;
    return Category::InputsAndBuffers;
  }
  Operation *def = value.getDefiningOp();
  if (isa<WaitOp>(def))
    return Category::UnshardedParams;
  // A unit's flat gradient, its reduced shard, and the parameter gradients
  // waiting to be flattened into it.
  if (isa<FlattenOp, ReduceGradsOp>(def) ||
      llvm::any_of(value.getUsers(),
                   [](Operation *user) { return isa<FlattenOp>(user); }))
    return Category::Gradients;
  if (getPhase(def) == kForward &&
      llvm::any_of(value.getUsers(),
                   [](Operation *user) { return getPhase(user) == kBackward; }))
    return Category::Activations;
  return Category::Transient;
}

FailureOr<StepReport> analyze(func::FuncOp step,
                              const MachineProfile &profile) {
  StepReport report;
  report.profile = profile;
  report.time = predictStepTime(step, profile);
  Block &body = step.getBody().front();
  llvm::DenseMap<Operation *, int64_t> index;
  for (auto [i, op] : llvm::enumerate(body))
    index[&op] = i;
  int64_t last = int64_t(index.size()) - 1;

  // Collectives in issue order; all of them in the step's own block.
  WalkResult nested = step.walk([&](Operation *op) {
    if (isa<UnshardOp, ReduceGradsOp, AllGatherOp, ReduceScatterOp,
            AllReduceOp, BroadcastOp>(op) &&
        op->getBlock() != &body) {
      op->emitOpError("is inside a region of the step: ranks could issue "
                      "collectives in different orders");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (nested.wasInterrupted())
    return failure();
  auto add = [&](Operation *op, StringRef kind, StringRef stream, Value data) {
    auto unit = op->getAttrOfType<StringAttr>(kUnitAttr);
    auto type = cast<RankedTensorType>(data.getType());
    report.collectives.push_back(
        {kind.str(), unit ? unit.getValue().str() : "", getPhase(op).str(),
         stream.str(), type.getElementType(), type.getNumElements(),
         bytesOf(type)});
  };
  for (Operation &op : body) {
    if (auto unshard = dyn_cast<UnshardOp>(op)) {
      Value full = *unshard->getUsers().begin()->getResults().begin();
      add(&op, "all_gather", "all-gather", full);
    } else if (auto reduce = dyn_cast<ReduceGradsOp>(op)) {
      if (reduce.getMesh().getShard() > 1)
        add(&op, "reduce_scatter", "reduce-scatter", reduce.getGrad());
      if (reduce.getMesh().getRank() == 2 && reduce.getMesh().getReplicate() > 1)
        add(&op, "all_reduce", "all-reduce", reduce.getResult());
    } else if (isa<AllGatherOp>(op)) {
      add(&op, "all_gather", "all-gather", op.getResult(0));
    } else if (isa<ReduceScatterOp>(op)) {
      add(&op, "reduce_scatter", "reduce-scatter", op.getOperand(0));
    } else if (isa<AllReduceOp, BroadcastOp>(op)) {
      add(&op, op.getName().stripDialect().str(), "all-reduce", op.getResult(0));
    }
  }

  // Lifetimes: from definition (an unshard's buffer from its issue) to the
  // last use, extended through aliases; a gathered unit lives until its
  // reshard; arguments and returned values for the whole step.
  llvm::DenseMap<Value, int64_t> end;
  auto extend = [&](Value v, int64_t i) {
    int64_t &e = end[v];
    e = std::max(e, i);
  };
  for (BlockArgument arg : body.getArguments())
    end[arg] = last;
  for (Operation &op : body) {
    for (Value result : op.getResults())
      end.try_emplace(result, index[&op]);
    for (Value operand : op.getOperands())
      extend(operand, index[&op]);
    if (isa<func::ReturnOp>(op))
      for (Value operand : op.getOperands())
        extend(operand, last);
  }
  for (Operation &op : llvm::reverse(body))
    for (OpResult result : op.getResults())
      if (Value source = storageAliasOf(result))
        extend(source, end[result]);

  std::vector<Allocation> allocations;
  for (BlockArgument arg : body.getArguments())
    allocations.push_back({bytesOf(arg.getType()), -1, last,
                           categoryOf(arg, step)});
  for (Operation &op : body) {
    for (OpResult result : op.getResults()) {
      if (storageAliasOf(result) || isa<TokenType>(result.getType()))
        continue;
      int64_t start = index[&op];
      int64_t stop = end[result];
      if (auto wait = dyn_cast<WaitOp>(op)) {
        start = index[wait.getToken().getDefiningOp()];
        for (Operation *user : wait->getUsers())
          if (isa<ReshardOp>(user))
            stop = index[user];
      }
      allocations.push_back(
          {bytesOf(result.getType()), start, stop, categoryOf(result, step)});
    }
  }

  std::vector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);
  for (int64_t point = -1; point <= last; ++point) {
    int64_t live = 0;
    for (const Allocation &a : allocations)
      if (a.start <= point && point <= a.end)
        live += a.bytes;
    if (live > report.peakBytes) {
      report.peakBytes = live;
      report.peakIndex = point;
    }
  }
  report.peakOp = report.peakIndex >= 0 ? ops[report.peakIndex] : nullptr;
  for (const Allocation &a : allocations)
    if (a.start <= report.peakIndex && report.peakIndex <= a.end)
      report.breakdown[size_t(a.category)] += a.bytes;
  return report;
}

std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

std::string describePeak(const StepReport &report) {
  if (!report.peakOp)
    return "the step's entry";
  std::string unit;
  if (auto attr = report.peakOp->getAttrOfType<StringAttr>(kUnitAttr))
    unit = attr.getValue().empty() ? "(root)" : attr.getValue().str();
  return llvm::formatv("op #{0} ({1}, {2}, unit {3})", report.peakIndex,
                       report.peakOp->getName().getStringRef(),
                       getPhase(report.peakOp), unit)
      .str();
}

/// (unit, elements) of the step's rank-local flat parameters.
SmallVector<std::pair<std::string, int64_t>> rankLocalUnits(func::FuncOp step) {
  SmallVector<std::pair<std::string, int64_t>> units;
  for (BlockArgument arg : step.getArguments())
    if (step.getArgAttr(arg.getArgNumber(), kRankLocalArg)) {
      StringRef unit = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                         kFlatParamArg)
                           .getValue();
      units.push_back({unit.empty() ? "(root)" : unit.str(),
                       cast<RankedTensorType>(arg.getType()).getNumElements()});
    }
  return units;
}

void printText(raw_ostream &os, ModelOp model, func::FuncOp step,
               const StepReport &report) {
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttr);
  os << "fsdp-report: model " << model.getSymName() << ", "
     << step->getAttrOfType<StringAttr>(kStrategyAttr).getValue() << " on "
     << mesh << " (" << mesh.getWorldSize()
     << " ranks); every rank runs the same schedule on equal shards\n";
  auto local = rankLocalUnits(step);
  if (!local.empty()) {
    os << "rank-local units (whole on every rank, different on each, never "
          "gathered or reduced):";
    for (auto &[unit, elements] : local)
      os << " " << unit << " (" << elements << " elements)";
    os << "\n";
  }
  os << "peak memory per rank: " << report.peakBytes << " bytes at "
     << describePeak(report) << "\n";
  for (size_t c = 0; c < kCategories; ++c)
    os << "  " << llvm::left_justify(kCategoryNames[c], 26)
       << llvm::right_justify(std::to_string(report.breakdown[c]), 12)
       << "\n";
  std::map<std::string, int64_t> counts;
  int64_t totalBytes = 0;
  for (const Collective &c : report.collectives) {
    ++counts[c.kind + (c.phase.empty() ? "" : " " + c.phase)];
    totalBytes += c.bytes;
  }
  const StepTime &t = report.time;
  os << llvm::formatv("predicted step time: {0:f1} ms = compute {1:f1} ms + "
                      "exposed communication {2:f1} ms (communication "
                      "streams busy {3:f1} ms); model: {4}\n",
                      t.total * 1e3, t.compute * 1e3, t.exposed() * 1e3,
                      t.communication * 1e3, report.profile.describe());
  os << "collectives per step: " << report.collectives.size() << ", "
     << totalBytes << " bytes";
  for (auto &[kind, count] : counts)
    os << "; " << kind << " " << count;
  os << "\n";
  size_t unitWidth = strlen("(root)");
  for (const Collective &c : report.collectives)
    unitWidth = std::max(unitWidth, c.unit.size());
  unitWidth += 2;
  os << "  " << llvm::left_justify("#", 4) << llvm::left_justify("kind", 16)
     << llvm::left_justify("unit", unitWidth) << llvm::left_justify("phase", 11)
     << llvm::left_justify("dtype", 7) << llvm::right_justify("elements", 10)
     << llvm::right_justify("bytes", 12) << "  stream\n";
  for (auto [i, c] : llvm::enumerate(report.collectives))
    os << "  " << llvm::left_justify(std::to_string(i), 4)
       << llvm::left_justify(c.kind, 16)
       << llvm::left_justify(c.unit.empty() ? "(root)" : c.unit, unitWidth)
       << llvm::left_justify(c.phase, 11)
       << llvm::left_justify(typeName(c.dtype), 7)
       << llvm::right_justify(std::to_string(c.elements), 10)
       << llvm::right_justify(std::to_string(c.bytes), 12) << "  "
       << c.stream << "\n";
}

llvm::json::Object toJson(ModelOp model, func::FuncOp step,
                          const StepReport &report) {
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttr);
  llvm::json::Object breakdown;
  for (size_t c = 0; c < kCategories; ++c)
    breakdown[kCategoryKeys[c]] = report.breakdown[c];
  llvm::json::Array collectives;
  for (const Collective &c : report.collectives)
    collectives.push_back(llvm::json::Object{
        {"kind", c.kind}, {"unit", c.unit}, {"phase", c.phase},
        {"dtype", typeName(c.dtype)}, {"elements", c.elements},
        {"bytes", c.bytes}, {"stream", c.stream}});
  llvm::json::Array rankLocal;
  for (auto &[unit, elements] : rankLocalUnits(step))
    rankLocal.push_back(
        llvm::json::Object{{"unit", unit}, {"elements", elements}});
  return llvm::json::Object{
      {"model", model.getSymName()},
      {"strategy", step->getAttrOfType<StringAttr>(kStrategyAttr).getValue()},
      {"world_size", mesh.getWorldSize()},
      {"shard_group_size", mesh.getShard()},
      {"peak_bytes", report.peakBytes},
      {"peak_at", describePeak(report)},
      {"breakdown", std::move(breakdown)},
      {"collectives", std::move(collectives)},
      {"rank_local_units", std::move(rankLocal)},
      {"predicted_step",
       llvm::json::Object{
           {"seconds", report.time.total},
           {"compute_seconds", report.time.compute},
           {"exposed_communication_seconds", report.time.exposed()},
           {"communication_seconds", report.time.communication},
           {"gemm_gflops", report.profile.gemmGflops},
           {"memory_gbps", report.profile.memoryGBps},
           {"link_gbps", report.profile.linkGBps},
           {"link_latency_us", report.profile.linkLatencyUs},
           {"op_overhead_us", report.profile.opOverheadUs}}}};
}

struct ReportPass : public fsdp::impl::FSDPReportPassBase<ReportPass> {
  using FSDPReportPassBase::FSDPReportPassBase;

  void runOnOperation() override {
    MachineProfile profile{gemmGflops, memoryGBps, linkGBps, linkLatencyUs,
                           opOverheadUs};
    std::pair<const char *, double> rates[] = {{"gemm-gflops", gemmGflops},
                                              {"memory-gbps", memoryGBps},
                                              {"link-gbps", linkGBps}};
    std::pair<const char *, double> costs[] = {
        {"link-latency-us", linkLatencyUs}, {"op-overhead-us", opOverheadUs}};
    for (auto [name, value] : rates)
      if (!(value > 0) || !std::isfinite(value)) {
        emitError(getOperation().getLoc(), "fsdp-report: ")
            << name << " must be a positive number, got " << value;
        return signalPassFailure();
      }
    for (auto [name, value] : costs)
      if (!(value >= 0) || !std::isfinite(value)) {
        emitError(getOperation().getLoc(), "fsdp-report: ")
            << name << " must be a non-negative number, got " << value;
        return signalPassFailure();
      }
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(output, &error);
    if (!file) {
      emitError(getOperation().getLoc(), "fsdp-report: ") << error;
      return signalPassFailure();
    }
    llvm::json::Array steps;
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      func::FuncOp step = getTrainStep(model);
      if (!step || !step->hasAttr(kMeshAttr)) {
        model.emitOpError("has no sharded train step to report on; run "
                          "fsdp-shard first");
        return signalPassFailure();
      }
      FailureOr<StepReport> report = analyze(step, profile);
      if (failed(report))
        return signalPassFailure();
      if (json)
        steps.push_back(toJson(model, step, *report));
      else
        printText(file->os(), model, step, *report);
    }
    if (json)
      file->os() << llvm::formatv(
                        "{0:2}", llvm::json::Value(llvm::json::Object{
                                     {"steps", std::move(steps)}}))
                 << "\n";
    file->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace

FailureOr<std::string> fsdp::renderReport(ModelOp model, func::FuncOp step) {
  FailureOr<StepReport> report = analyze(step, MachineProfile());
  if (failed(report))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  printText(os, model, step, *report);
  return text;
}
