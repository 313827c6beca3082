//===- StepReport.cpp - per-rank peak memory and collectives of a step ----===//
//
// The analysis behind StepReport.h (the peak over the shared liveness walk,
// sorted by kind; the collectives) and its text and JSON forms.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/StepReport.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"
#include "fsdp/Dialect/FSDP/Analysis/StorageLiveness.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <map>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr const char *kCategoryNames[] = {
    "sharded parameters",   "optimizer state",          "gradients",
    "unsharded parameters", "activations for backward", "transient",
    "inputs and buffers"};
constexpr const char *kCategoryKeys[] = {
    "sharded_params",    "optimizer_state", "gradients",
    "unsharded_params",  "activations",     "transient",
    "inputs_and_buffers"};
static_assert(std::size(kCategoryNames) == kMemoryCategories &&
              std::size(kCategoryKeys) == kMemoryCategories);

/// One allocation: a value's bytes over [start, end] (op indices; -1 is
/// the step's entry).
struct Allocation {
  int64_t bytes;
  int64_t start, end;
  MemoryCategory category;
};

MemoryCategory categoryOf(Value value, func::FuncOp step) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (step.getArgAttr(arg.getArgNumber(), kFlatStateArg))
      return MemoryCategory::OptimizerState;
    if (step.getArgAttr(arg.getArgNumber(), kFlatParamArg))
      return MemoryCategory::ShardedParams;
    return MemoryCategory::InputsAndBuffers;
  }
  Operation *def = value.getDefiningOp();
  // A gathered unit, and what reshard_after_forward = N keeps of it.
  if (isa<WaitOp, PostForwardShardOp>(def))
    return MemoryCategory::UnshardedParams;
  if (auto toDevice = dyn_cast<ToDeviceOp>(def))
    return categoryOf(toDevice.getInput(), step);
  if (auto toHost = dyn_cast<ToHostOp>(def))
    return categoryOf(toHost.getInput(), step);
  // A unit's flat gradient, its reduced shard, the parameter gradients
  // waiting to be flattened into it, and gradients summed over micro-batches
  // (unsharded under no_sync, else shards) with their terms.
  auto accumulates = [](Operation *op) {
    return isa<FlattenOp>(op) || op->hasAttr(kGradAccumulationAttr);
  };
  if (isa<ReduceGradsOp>(def) || accumulates(def) ||
      llvm::any_of(value.getUsers(), accumulates))
    return MemoryCategory::Gradients;
  if (getPhase(def) == kForward &&
      llvm::any_of(value.getUsers(),
                   [](Operation *user) { return getPhase(user) == kBackward; }))
    return MemoryCategory::Activations;
  return MemoryCategory::Transient;
}

} // namespace

FailureOr<StepReport> fsdp::analyzeStep(func::FuncOp step,
                                        const MachineProfile &profile) {
  StepReport report;
  report.profile = profile;
  report.time = predictStepTime(step, profile);
  Block &body = step.getBody().front();
  std::vector<Operation *> ops;
  llvm::DenseMap<Operation *, int64_t> index;
  for (Operation &op : body) {
    index[&op] = ops.size();
    ops.push_back(&op);
  }
  int64_t last = int64_t(ops.size()) - 1;

  // Collectives in issue order; all of them in the step's own block.
  WalkResult nested = step.walk([&](Operation *op) {
    if (isa<CollectiveOpInterface>(op) && op->getBlock() != &body) {
      op->emitOpError("is inside a region of the step: ranks could issue "
                      "collectives in different orders");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (nested.wasInterrupted())
    return failure();
  for (Operation &op : body) {
    auto collective = dyn_cast<CollectiveOpInterface>(op);
    if (!collective)
      continue;
    auto unshard = dyn_cast<UnshardOp>(op);
    int64_t postForwardGroup =
        unshard ? unshard.getPostForwardGroup().value_or(0) : 0;
    for (const CollectiveStep &c : collective.getCollectiveSteps())
      report.collectives.push_back(
          {collectiveKindName(c.kind).str(), getUnit(&op).str(),
           getPhaseName(&op).str(), streamName(collective.getStream()).str(),
           c.dataType.getElementType(), c.dataType.getNumElements(),
           tensorBytes(c.dataType), postForwardGroup});
  }

  // Lifetimes from the shared walk (StorageLiveness.h), every op counted:
  // a storage from its definition (an unshard's buffer from its issue) to
  // its last use through aliases (the return for what the step returns);
  // arguments for the whole step. A gathered unit is counted until its
  // reshard, even where a view of it is read later (the lowering frees it
  // after that read). Host memory (CPU offload) is held for the whole step,
  // outside the device's peak.
  std::vector<Allocation> allocations;
  auto allocate = [&](Value v, int64_t start, int64_t stop) {
    Allocation a{tensorBytes(v.getType()), start, stop, categoryOf(v, step)};
    if (!livesOnHost(v))
      return allocations.push_back(a);
    report.hostBytes += a.bytes;
    report.hostBreakdown[size_t(a.category)] += a.bytes;
  };
  for (BlockArgument arg : body.getArguments())
    allocate(arg, -1, last);
  for (auto &[root, span] : storageSpans(body, StorageUses::AllOps)) {
    if (isa<BlockArgument>(root))
      continue;
    int64_t stop = span.last;
    if (isa<WaitOp>(root.getDefiningOp()))
      for (Operation *user : root.getUsers())
        if (isa<ReshardOp>(user))
          stop = index[user];
    allocate(root, span.first, stop);
  }

  // Live bytes at each point (-1 .. last) as a running sum of starts and
  // ends: linear in the step's size. The peak is the first point of the
  // maximum.
  std::vector<int64_t> delta(last + 3, 0);
  for (const Allocation &a : allocations) {
    delta[a.start + 1] += a.bytes;
    delta[a.end + 2] -= a.bytes;
  }
  int64_t live = 0;
  for (int64_t point = -1; point <= last; ++point) {
    live += delta[point + 1];
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

namespace {

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
                       getPhaseName(report.peakOp), unit)
      .str();
}

/// (unit, elements) of the step's rank-local flat parameters (not FSDP's
/// ignored ones, which start identical).
SmallVector<std::pair<std::string, int64_t>> rankLocalUnits(func::FuncOp step) {
  SmallVector<std::pair<std::string, int64_t>> units;
  for (BlockArgument arg : step.getArguments())
    if (step.getArgAttr(arg.getArgNumber(), kRankLocalArg) &&
        !step.getArgAttr(arg.getArgNumber(), kIgnoredArg)) {
      StringRef unit =
          step.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kFlatParamArg)
              .getValue();
      units.push_back({unit.empty() ? "(root)" : unit.str(),
                       cast<RankedTensorType>(arg.getType()).getNumElements()});
    }
  return units;
}

/// A flat parameter of FSDP's ignored parameters: whole on every rank,
/// never gathered; its gradient all-reduced over every rank, or not at all.
struct IgnoredFlat {
  std::string unit;
  int64_t elements = 0, bytes = 0;
  bool allReduced = false;
};

SmallVector<IgnoredFlat> ignoredFlats(func::FuncOp step) {
  llvm::StringSet<> allReduced;
  step.walk([&](AllReduceOp op) { allReduced.insert(getUnit(op)); });
  SmallVector<IgnoredFlat> flats;
  for (BlockArgument arg : step.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (!step.getArgAttr(i, kIgnoredArg))
      continue;
    StringRef unit = step.getArgAttrOfType<StringAttr>(i, kFlatParamArg);
    auto type = cast<RankedTensorType>(arg.getType());
    flats.push_back({unit.empty() ? "(root)" : unit.str(),
                     type.getNumElements(), tensorBytes(type),
                     allReduced.contains(unit)});
  }
  return flats;
}

/// What a step's frozen flat parameters do not cost: per rank, the gradient
/// shard and optimizer state a trainable one would hold, and per step the
/// elements its gradient reductions would send.
struct FrozenSavings {
  int64_t flats = 0, elements = 0, shardElements = 0;
  int64_t gradientBytes = 0, stateBytes = 0, reducedElements = 0;
};

FrozenSavings frozenSavings(func::FuncOp step) {
  FrozenSavings saved;
  llvm::StringSet<> stateNames;
  for (BlockArgument arg : step.getArguments())
    if (auto state = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       kFlatStateArg))
      stateNames.insert(state.getValue());
  // A trainable unit's gradient is reduced once per micro-batch, or once.
  int64_t reductionsPerUnit = 1;
  llvm::StringMap<int64_t> reductions;
  step.walk([&](ReduceGradsOp reduce) {
    reductionsPerUnit =
        std::max(reductionsPerUnit, ++reductions[reduce.getUnit()]);
  });
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttr);
  for (BlockArgument arg : step.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (!step.getArgAttr(i, kFrozenArg))
      continue;
    auto type = cast<RankedTensorType>(arg.getType());
    int64_t shard = type.getNumElements();
    bool reduced = !step.getArgAttr(i, kRankLocalArg);
    ++saved.flats;
    saved.elements +=
        step.getArgAttrOfType<IntegerAttr>(i, kFlatNumelArg).getInt();
    saved.shardElements += shard;
    saved.gradientBytes += tensorBytes(type);
    saved.stateBytes += shard * 4 * int64_t(stateNames.size());
    if (reduced)
      saved.reducedElements += shard * mesh.getShard() * reductionsPerUnit;
  }
  return saved;
}

/// The trainable parameters the step's loss does not reach (kUnreachedAttr).
SmallVector<StringRef> unreachedParams(func::FuncOp step) {
  SmallVector<StringRef> names;
  if (auto list = step->getAttrOfType<ArrayAttr>(kUnreachedAttr))
    for (Attribute name : list)
      names.push_back(cast<StringAttr>(name).getValue());
  return names;
}

} // namespace

/// The CPU backend's im2col column matrix for a convolution-family op
/// (runtime/backends/cpu/Conv.cpp's ConvPlan): [C/groups · kernel,
/// output pixels] f32, none for a 1x1 stride-1 unpadded convolution.
template <typename OpTy>
static int64_t convColumnBytes(OpTy op, Value input, Value weight,
                               Value output) {
  ArrayRef<int64_t> x = cast<ShapedType>(input.getType()).getShape();
  ArrayRef<int64_t> w = cast<ShapedType>(weight.getType()).getShape();
  ArrayRef<int64_t> y = cast<ShapedType>(output.getType()).getShape();
  int64_t k = w[1], pixels = 1;
  bool pointwise = true;
  for (size_t d = 2; d < w.size(); ++d) {
    k *= w[d];
    pixels *= y[d];
    pointwise &= w[d] == 1 && y[d] == x[d] && op.getStride()[d - 2] == 1 &&
                 op.getPadLow()[d - 2] == 0;
  }
  return pointwise ? 0 : k * pixels * 4;
}

/// The largest column matrix of the step's convolutions: host scratch of
/// one CPU call, outside the arena plan (the CUDA kernels need none).
static void printConvScratch(raw_ostream &os, func::FuncOp step) {
  int64_t largest = -1;
  step.walk([&](Operation *op) {
    int64_t bytes = -1;
    if (auto c = dyn_cast<nn::ConvOp>(op))
      bytes = convColumnBytes(c, c.getInput(), c.getWeight(), c.getResult());
    else if (auto c = dyn_cast<nn::ConvTransposeOp>(op))
      bytes = convColumnBytes(c, c.getResult(), c.getWeight(), c.getInput());
    else if (auto c = dyn_cast<nn::ConvGradWeightOp>(op))
      bytes = convColumnBytes(c, c.getInput(), c.getResult(), c.getGrad());
    largest = std::max(largest, bytes);
  });
  if (largest >= 0)
    os << "convolution scratch: " << largest
       << " bytes per call at most (the CPU backend's im2col column matrix, "
          "host memory outside the arena plan; the CUDA kernels need none)\n";
}

/// One line for a mixture of experts: its grouped GEMMs and the rows each
/// multiplies (tokens × top-k, static: no token is dropped, whatever the
/// router's split), the figure the step time counts.
static void printGroupedGemms(raw_ostream &os, func::FuncOp step) {
  int64_t forward = 0, weightGrads = 0, rows = 0, groups = 0;
  step.walk([&](Operation *op) {
    if (auto gemm = dyn_cast<nn::GroupedMatmulOp>(op)) {
      ++forward;
      rows = std::max(rows, gemm.getInput().getType().getDimSize(0));
      groups = std::max(groups, gemm.getOffsets().getType().getDimSize(0));
    } else if (isa<nn::GroupedMatmulGradWeightOp>(op)) {
      ++weightGrads;
    }
  });
  if (forward)
    os << llvm::formatv("grouped GEMMs (mixture of experts): {0} forward and "
                        "input-gradient, {1} weight-gradient, each over {2} "
                        "rows (tokens x top-k: static, none dropped) split "
                        "among {3} experts at run time; the step time counts "
                        "every row\n",
                        forward, weightGrads, rows, groups);
}

void fsdp::printStepReport(raw_ostream &os, ModelOp model, func::FuncOp step,
                           const StepReport &report,
                           const ArenaPlanSummary *plan) {
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttr);
  os << "fsdp-report: model " << model.getSymName() << ", "
     << strategyOptionName(getStrategy(step)) << " on " << mesh << " ("
     << mesh.getWorldSize()
     << " ranks); every rank runs the same schedule on equal shards\n";
  // A lowered program's memory is its arena plan, which leads; the liveness
  // of the unlowered step (unaligned, before the lowering's own buffers)
  // stays as the breakdown by kind.
  if (plan)
    os << llvm::formatv(
        "arena plan per rank: {0} bytes = {1} persistent ({4}inputs, "
        "constants, loss) + {2} planned transients; live peak {3} bytes\n",
        plan->arenaBytes, plan->persistentBytes,
        plan->arenaBytes - plan->persistentBytes, plan->livePeakBytes,
        plan->hostBytes ? "" : "shards, optimizer state, ");
  if (plan) {
    bool hybrid = mesh.getReplicate() > 1 && mesh.getShard() > 1;
    // The runner splits the post-forward groups as the shard groups of a
    // [world / N, N] mesh, whose replicate groups it makes too.
    bool postForward =
        !step.getBody().front().getOps<PostForwardShardOp>().empty();
    os << "communicators per rank: " << (hybrid ? 3 : 1) + (postForward ? 2 : 0)
       << (hybrid ? " (world; shard and replicate groups split from it"
                  : " (world")
       << (postForward ? "; post-forward groups of reshard_after_forward = N "
                         "and an unused transpose of them"
                       : "")
       << ")"
       << "; their device memory (NCCL's buffers, on GPUs) is outside this "
          "plan: measured when they are made, reported beside the arena and "
          "counted in the device peak\n";
  }
  if (isOffloaded(step)) {
    os << "cpu offload: host memory per rank "
       << (plan ? plan->hostBytes : report.hostBytes)
       << " bytes (pinned on GPUs; not in the device peak):";
    for (size_t c = 0; c < kMemoryCategories; ++c)
      if (report.hostBreakdown[c])
        os << " " << kCategoryNames[c] << " " << report.hostBreakdown[c]
           << ";";
    os << " the optimizer runs on the host\n";
  }
  auto local = rankLocalUnits(step);
  if (!local.empty()) {
    os << "rank-local units (whole on every rank, different on each, never "
          "gathered or reduced):";
    for (auto &[unit, elements] : local)
      os << " " << unit << " (" << elements << " elements)";
    os << "\n";
  }
  if (auto ignored = ignoredFlats(step); !ignored.empty()) {
    int64_t elements = 0, bytes = 0;
    for (const IgnoredFlat &flat : ignored) {
      elements += flat.elements;
      bytes += flat.bytes;
    }
    os << llvm::formatv("ignored parameters: {0} elements, {1} bytes per "
                        "rank (whole on every rank, never gathered nor "
                        "sharded):",
                        elements, bytes);
    for (const IgnoredFlat &flat : ignored)
      os << " " << flat.unit << " (" << flat.elements << " elements, "
         << (flat.allReduced ? "gradient all-reduced" : "gradient local")
         << ")";
    os << "\n";
  }
  if (step->hasAttr(kEvalAttr)) {
    auto whole = step->getAttrOfType<ArrayAttr>(kKeepWeightsWholeAttr);
    os << "forward only (eval step): parameters gathered for the forward";
    if (whole && !whole.empty())
      os << ", but for " << whole.size()
         << " unit(s) whose weights stay whole across steps";
    os << "; no gradient, reduction or optimizer state\n";
  }
  else if (FrozenSavings frozen = frozenSavings(step); frozen.flats)
    os << llvm::formatv(
        "frozen parameters: {0} elements in {1} flat parameter(s) ({2} per "
        "rank), gathered but never reduced or updated: per rank {3} bytes of "
        "gradient and {4} bytes of optimizer state not held, {5} gradient "
        "elements per step not reduced\n",
        frozen.elements, frozen.flats, frozen.shardElements,
        frozen.gradientBytes, frozen.stateBytes, frozen.reducedElements);
  if (SmallVector<StringRef> unreached = unreachedParams(step);
      !unreached.empty()) {
    // Named, since a parameter the loss was meant to train and does not
    // read is usually a bug in the model (a layer left out of forward).
    constexpr size_t kNamed = 8;
    os << "not reached by the loss, so not trained (torch's .grad None: no "
          "gradient, state or update; with the frozen parameters above): "
       << unreached.size() << " parameter(s): ";
    llvm::interleaveComma(ArrayRef(unreached).take_front(kNamed), os);
    if (unreached.size() > kNamed)
      os << " and " << unreached.size() - kNamed << " more";
    os << "\n";
  }
  os << (plan ? "step tensors at their peak (before lowering): "
              : "peak memory per rank: ")
     << report.peakBytes << " bytes at " << describePeak(report) << "\n";
  for (size_t c = 0; c < kMemoryCategories; ++c)
    os << "  " << llvm::left_justify(kCategoryNames[c], 26)
       << llvm::right_justify(std::to_string(report.breakdown[c]), 12) << "\n";
  // Each unit once (every micro-batch keeps the same part).
  llvm::StringMap<std::pair<int64_t, int64_t>> postForward;
  for (auto part : step.getBody().front().getOps<PostForwardShardOp>())
    postForward[part.getUnit()] = {tensorBytes(part.getType()),
                                   tensorBytes(part.getFull().getType())};
  int64_t keptBytes = 0, gatheredBytes = 0;
  for (const auto &unit : postForward) {
    keptBytes += unit.second.first;
    gatheredBytes += unit.second.second;
  }
  if (keptBytes)
    os << llvm::formatv("post-forward shards (reshard_after_forward = N): "
                        "{0} units keep {1} bytes from forward to backward "
                        "of the {2} they gather\n",
                        postForward.size(), keptBytes, gatheredBytes);
  if (int64_t workspace = report.profile.gemmWorkspaceBytes)
    os << llvm::formatv(
        "on the device beside the arena, each counted once: a {0}-byte GEMM "
        "workspace per stream running GEMMs (the compute stream's), and a "
        "per-call scratch reserve per stream, sized by its largest call at "
        "the first step (fsdp-run prints both; cuDNN chooses its attention "
        "and convolution workspaces then)\n",
        workspace);
  std::map<std::string, int64_t> counts;
  int64_t totalBytes = 0;
  for (const CollectiveRecord &c : report.collectives) {
    ++counts[c.kind + (c.phase.empty() ? "" : " " + c.phase)];
    totalBytes += c.bytes;
  }
  const StepTime &t = report.time;
  os << llvm::formatv("predicted step time: {0:f1} ms = compute {1:f1} ms + "
                      "exposed communication {2:f1} ms (communication "
                      "streams busy {3:f1} ms); model: {4}\n",
                      t.total * 1e3, t.compute * 1e3, t.exposed() * 1e3,
                      t.communication * 1e3, report.profile.describe());
  printConvScratch(os, step);
  printGroupedGemms(os, step);
  os << "collectives per step: " << report.collectives.size() << ", "
     << totalBytes << " bytes";
  for (auto &[kind, count] : counts)
    os << "; " << kind << " " << count;
  os << "\n";
  size_t unitWidth = strlen("(root)");
  for (const CollectiveRecord &c : report.collectives)
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
       << llvm::right_justify(std::to_string(c.bytes), 12) << "  " << c.stream
       << (c.postForwardGroup
               ? " (post-forward group of " +
                     std::to_string(c.postForwardGroup) + " ranks)"
               : "")
       << "\n";
}

llvm::json::Object fsdp::stepReportToJson(ModelOp model, func::FuncOp step,
                                          const StepReport &report) {
  auto mesh = step->getAttrOfType<MeshAttr>(kMeshAttr);
  auto byKind = [](const std::array<int64_t, kMemoryCategories> &bytes) {
    llvm::json::Object kinds;
    for (size_t c = 0; c < kMemoryCategories; ++c)
      kinds[kCategoryKeys[c]] = bytes[c];
    return kinds;
  };
  llvm::json::Array collectives;
  for (const CollectiveRecord &c : report.collectives)
    collectives.push_back(llvm::json::Object{{"kind", c.kind},
                                             {"unit", c.unit},
                                             {"phase", c.phase},
                                             {"dtype", typeName(c.dtype)},
                                             {"elements", c.elements},
                                             {"bytes", c.bytes},
                                             {"stream", c.stream}});
  llvm::json::Array rankLocal;
  for (auto &[unit, elements] : rankLocalUnits(step))
    rankLocal.push_back(
        llvm::json::Object{{"unit", unit}, {"elements", elements}});
  llvm::json::Array ignored;
  for (const IgnoredFlat &flat : ignoredFlats(step))
    ignored.push_back(llvm::json::Object{{"unit", flat.unit},
                                         {"elements", flat.elements},
                                         {"bytes", flat.bytes},
                                         {"all_reduced", flat.allReduced}});
  FrozenSavings frozen = frozenSavings(step);
  return llvm::json::Object{
      {"model", model.getSymName()},
      {"strategy", strategyOptionName(getStrategy(step))},
      {"world_size", mesh.getWorldSize()},
      {"shard_group_size", mesh.getShard()},
      {"peak_bytes", report.peakBytes},
      {"peak_at", describePeak(report)},
      {"breakdown", byKind(report.breakdown)},
      {"cpu_offload", isOffloaded(step)},
      {"host_bytes", report.hostBytes},
      {"host_breakdown", byKind(report.hostBreakdown)},
      // Beside the arena on the machine's device, per stream running GEMMs.
      {"gemm_workspace_bytes", report.profile.gemmWorkspaceBytes},
      {"collectives", std::move(collectives)},
      {"rank_local_units", std::move(rankLocal)},
      {"ignored", std::move(ignored)},
      {"unreached", llvm::json::Array(unreachedParams(step))},
      {"frozen",
       llvm::json::Object{
           {"flat_params", frozen.flats},
           {"elements", frozen.elements},
           {"shard_elements", frozen.shardElements},
           {"gradient_bytes_saved", frozen.gradientBytes},
           {"optimizer_state_bytes_saved", frozen.stateBytes},
           {"reduced_elements_saved", frozen.reducedElements}}},
      {"predicted_step",
       llvm::json::Object{
           {"seconds", report.time.total},
           {"compute_seconds", report.time.compute},
           {"exposed_communication_seconds", report.time.exposed()},
           {"communication_seconds", report.time.communication},
           {"gemm_gflops", report.profile.gemmGflops},
           {"gemm_gflops_16bit", report.profile.gemmGflops16},
           {"memory_gbps", report.profile.memoryGBps},
           {"link_gbps", report.profile.linkGBps},
           {"link_latency_us", report.profile.linkLatencyUs},
           {"op_overhead_us", report.profile.opOverheadUs},
           {"host_link_gbps", report.profile.hostLinkGBps}}}};
}
