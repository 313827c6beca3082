//===- MemoryBudget.cpp - fit the planned peak to a byte budget -----------===//
//
// fsdp-fit-memory-budget: chooses, per unit, what its backward recomputes
// (nothing, the cheap ops, or the whole forward) so that the planned peak
// per rank fits `budget`, with the least predicted recompute time. Each
// candidate choice is judged on a clone of the module, run through the
// rest of the pipeline (`evaluation`) and measured by analyzeStep, the
// function fsdp-report prints; for a lowered program also through the
// lowering (`arena-evaluation`), whose arena plan is then what must fit.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/StepReport.h"
#include "fsdp/Dialect/FSDP/Analysis/UnitOwnership.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPFITMEMORYBUDGETPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

/// "25165824", "24MiB", "1.5GiB", "512KiB": bytes, or nullopt for any other
/// text (a fraction needs a suffix; the result must be positive).
std::optional<int64_t> parseByteSize(StringRef text) {
  text = text.trim();
  static const std::pair<StringRef, double> kSuffixes[] = {
      {"KiB", 1024.0}, {"MiB", kMiB}, {"GiB", kMiB * 1024.0}};
  for (auto [suffix, scale] : kSuffixes) {
    if (!text.consume_back(suffix))
      continue;
    double value;
    if (text.trim().getAsDouble(value) || !std::isfinite(value) || value <= 0 ||
        value * scale >= 9.0e18)
      return std::nullopt;
    return int64_t(std::llround(value * scale));
  }
  int64_t bytes;
  if (text.getAsInteger(10, bytes) || bytes <= 0)
    return std::nullopt;
  return bytes;
}

/// How much a policy recomputes: none < selective < the whole unit.
int strength(CheckpointPolicy policy) {
  switch (policy) {
  case CheckpointPolicy::none:
    return 0;
  case CheckpointPolicy::selective:
    return 1;
  case CheckpointPolicy::unit:
    return 2;
  }
  return 0;
}

StringRef policyName(CheckpointPolicy policy) {
  switch (policy) {
  case CheckpointPolicy::none:
    return "none";
  case CheckpointPolicy::selective:
    return "selective";
  case CheckpointPolicy::unit:
    return "whole unit";
  }
  return "";
}

/// `unit`'s mark with its activation checkpointing set to `policy`, every
/// other setting kept (the root may have no mark yet).
fsdp::UnitAttr withPolicy(NNModuleOp unit, CheckpointPolicy policy) {
  MLIRContext *context = unit.getContext();
  fsdp::UnitAttr a = unit.getUnitAttr();
  if (!a)
    return fsdp::UnitAttr::get(context, {}, false, {}, {}, {}, {},
                               IgnoredGradSync::none, policy, {}, {});
  return fsdp::UnitAttr::get(context, a.getReshardAfterForward(),
                             a.getRankLocal(), a.getParamDtype(),
                             a.getReduceDtype(), a.getOutputDtype(),
                             a.getCastForwardInputs(), a.getIgnored(), policy,
                             a.getForwardPrefetch(), a.getBackwardPrefetch());
}

/// What one choice costs: the planned peak per rank and the compute
/// stream's predicted busy time (recomputation adds to it).
struct Outcome {
  int64_t peak = 0;
  double compute = 0;
};

/// One policy per unit the search may change, in UnitOwnership's order.
using Choice = SmallVector<CheckpointPolicy>;

struct FitMemoryBudgetPass
    : public fsdp::impl::FSDPFitMemoryBudgetPassBase<FitMemoryBudgetPass> {
  using FSDPFitMemoryBudgetPassBase::FSDPFitMemoryBudgetPassBase;

  void runOnOperation() override {
    if (budget.empty())
      return markAllAnalysesPreserved();
    // Errors point at the (first) model: the module itself may have no
    // location of its own.
    auto models = getOperation().getBody()->getOps<ModelOp>();
    Location loc =
        models.empty() ? getOperation().getLoc() : (*models.begin()).getLoc();
    if (!conflictingOptions.empty()) {
      emitError(loc, "memory-budget cannot be combined with ")
          << llvm::join(conflictingOptions, " or ")
          << ": the budget chooses what to recompute (mark units "
             "#fsdp.unit<activation_checkpointing = ...> to fix some "
             "by hand)";
      return signalPassFailure();
    }
    std::optional<int64_t> bytes = parseByteSize(budget);
    if (!bytes) {
      emitError(loc, "memory-budget '")
          << budget
          << "' is not a byte count: expected a positive integer, or a "
             "number with a KiB, MiB or GiB suffix (e.g. 24MiB, 1.5GiB)";
      return signalPassFailure();
    }
    budgetBytes = *bytes;
    FailureOr<MachineProfile> machineProfile =
        namedMachineProfile(machine, loc, "fsdp-fit-memory-budget");
    if (failed(machineProfile))
      return signalPassFailure();
    profile = *machineProfile;
    FailureOr<OpPassManager> parsed = parsePipeline(evaluation, loc);
    if (failed(parsed))
      return signalPassFailure();
    pipeline = std::move(*parsed);
    arenaPipeline.reset();
    if (!arenaEvaluation.empty()) {
      FailureOr<OpPassManager> lowering = parsePipeline(arenaEvaluation, loc);
      if (failed(lowering))
        return signalPassFailure();
      arenaPipeline = std::move(*lowering);
    }
    for (ModelOp model :
         llvm::to_vector(getOperation().getBody()->getOps<ModelOp>()))
      if (failed(fit(model)))
        return signalPassFailure();
  }

private:
  /// `text` as a pipeline anchored on builtin.module.
  FailureOr<OpPassManager> parsePipeline(StringRef text, Location loc) {
    std::string anchored = text.str();
    if (!text.starts_with(ModuleOp::getOperationName()))
      anchored = (ModuleOp::getOperationName() + "(" + text + ")").str();
    std::string errors;
    llvm::raw_string_ostream errorStream(errors);
    FailureOr<OpPassManager> parsed = parsePassPipeline(anchored, errorStream);
    if (failed(parsed))
      return emitError(loc, "fsdp-fit-memory-budget: bad pipeline '")
             << text << "': " << errors;
    return parsed;
  }

  int64_t budgetBytes = 0;
  MachineProfile profile;
  std::optional<OpPassManager> pipeline;
  /// The lowering, for a lowered program: its arena is what must fit.
  std::optional<OpPassManager> arenaPipeline;
  /// The smallest peak of the choices evaluated for the current model.
  int64_t smallestPeak = 0;

  /// Runs the rest of the pipeline on a clone of the module with `units`
  /// (of `model`) set to `choice`, then measures it.
  FailureOr<Outcome> evaluate(ModelOp model, ArrayRef<std::string> units,
                              const Choice &choice,
                              ArrayRef<std::string> keptWhole = {}) {
    // A detached clone, run by a pass manager of its own: nothing of it
    // reaches the module's analyses.
    OwningOpRef<ModuleOp> clone(cast<ModuleOp>(getOperation()->clone()));
    // The pipeline may rebuild the model op: look it up again after.
    auto cloneModel = [&] {
      for (ModelOp m : clone->getOps<ModelOp>())
        if (m.getSymName() == model.getSymName())
          return m;
      return ModelOp();
    };
    llvm::StringMap<CheckpointPolicy> wanted;
    for (auto [name, policy] : llvm::zip_equal(units, choice))
      wanted[name] = policy;
    UnitOwnership ownership(cloneModel());
    for (NNModuleOp unit : ownership.getUnits())
      if (auto it = wanted.find(unit.getQualifiedName()); it != wanted.end())
        unit.setUnitAttr(withPolicy(unit, it->second));
    if (!keptWhole.empty())
      setKeptWholeUnits(getTrainStep(cloneModel()), keptWhole);
    PassManager passes(&getContext(), ModuleOp::getOperationName());
    static_cast<OpPassManager &>(passes) = *pipeline;
    if (failed(passes.run(*clone)))
      return failure();
    ModelOp evaluated = cloneModel();
    func::FuncOp step = evaluated ? getTrainStep(evaluated) : func::FuncOp();
    if (!step || !step->hasAttr(kMeshAttr))
      return model.emitOpError("has no sharded train step after the "
                               "memory budget's evaluation pipeline");
    FailureOr<StepReport> report = analyzeStep(step, profile);
    if (failed(report))
      return failure();
    Outcome outcome{report->peakBytes, report->time.compute};
    if (!arenaPipeline)
      return outcome;
    // The arena the memory plan lays out (aligned, placed by lifetime) is
    // what the runtime allocates; it is at least the planned peak.
    PassManager lowering(&getContext(), ModuleOp::getOperationName());
    static_cast<OpPassManager &>(lowering) = *arenaPipeline;
    if (failed(lowering.run(*clone)))
      return failure();
    for (auto func : clone->getOps<func::FuncOp>())
      if (auto arena = func->getAttrOfType<IntegerAttr>(
              rt::RTDialect::ArenaBytesAttrHelper::getNameStr()))
        outcome.peak = std::max(outcome.peak, arena.getInt());
    return outcome;
  }

  LogicalResult fit(ModelOp model) {
    // An eval step (mode=eval: generation's decode step too) has no
    // backward to recompute; what the budget chooses there is whether the
    // weights stay whole across steps.
    if (func::FuncOp step = getTrainStep(model);
        step && step->hasAttr(kEvalAttr))
      return fitEval(model, step);
    // The units the search may change: not marked by hand, not ignored.
    SmallVector<NNModuleOp> free;
    SmallVector<NNModuleOp> marked;
    UnitOwnership ownership(model);
    for (NNModuleOp unit : ownership.getUnits()) {
      fsdp::UnitAttr attr = unit.getUnitAttr();
      if (attr && attr.getIgnored() != IgnoredGradSync::none)
        continue;
      if (attr && attr.getActivationCheckpointing() != CheckpointPolicy::none)
        marked.push_back(unit);
      else
        free.push_back(unit);
    }
    SmallVector<std::string> names;
    for (NNModuleOp unit : free)
      names.push_back(unit.getQualifiedName());

    std::map<SmallVector<int>, Outcome> memo;
    int evaluations = 0;
    smallestPeak = std::numeric_limits<int64_t>::max();
    auto measure = [&](const Choice &choice) -> FailureOr<Outcome> {
      SmallVector<int> key;
      for (CheckpointPolicy p : choice)
        key.push_back(strength(p));
      if (auto it = memo.find(key); it != memo.end())
        return it->second;
      FailureOr<Outcome> outcome = evaluate(model, names, choice);
      if (failed(outcome))
        return failure();
      ++evaluations;
      smallestPeak = std::min(smallestPeak, outcome->peak);
      memo[key] = *outcome;
      return *outcome;
    };

    Choice current(free.size(), CheckpointPolicy::none);
    FailureOr<Outcome> plain = measure(current);
    if (failed(plain))
      return failure();
    Outcome now = *plain;

    // Lazy greedy: a candidate's score (peak bytes saved per second of
    // recompute) from an earlier round is re-evaluated only when it leads,
    // and taken when it still leads fresh; each round evaluates a
    // candidate at most once. A change that saves nothing may still be
    // needed where two points share the peak, so it ranks below every
    // saving one (the cheapest first); one that raises the peak never
    // runs.
    struct Scored {
      double score = std::numeric_limits<double>::infinity();
      int round = -1;
      Outcome outcome;
      int64_t saved = 0;
    };
    std::map<std::pair<size_t, CheckpointPolicy>, Scored> candidates;
    for (size_t u = 0; u < free.size(); ++u)
      for (CheckpointPolicy p :
           {CheckpointPolicy::selective, CheckpointPolicy::unit})
        candidates[{u, p}] = Scored();
    auto valid = [&](auto it) {
      return strength(it->first.second) > strength(current[it->first.first]);
    };
    // Scores a candidate against the current choice.
    auto rescore = [&](auto it, int round) -> LogicalResult {
      Choice next = current;
      next[it->first.first] = it->first.second;
      FailureOr<Outcome> outcome = measure(next);
      if (failed(outcome))
        return failure();
      Scored &s = it->second;
      s.round = round;
      s.outcome = *outcome;
      s.saved = now.peak - outcome->peak;
      double cost = std::max(outcome->compute - now.compute, 1e-9);
      s.score = s.saved > 0    ? s.saved / cost
                : s.saved == 0 ? -cost
                               : -std::numeric_limits<double>::infinity();
      return success();
    };
    for (int round = 0; now.peak > budgetBytes; ++round) {
      std::pair<size_t, CheckpointPolicy> taken{0, CheckpointPolicy::none};
      while (true) {
        auto best = candidates.end();
        for (auto it = candidates.begin(); it != candidates.end(); ++it)
          if (valid(it) && (best == candidates.end() ||
                            it->second.score > best->second.score))
            best = it;
        if (best == candidates.end() || best->second.saved < 0) {
          // No single change lowers the peak: the cheapest-memory choice,
          // every unit recomputed whole, is the last resort.
          Choice whole(free.size(), CheckpointPolicy::unit);
          FailureOr<Outcome> outcome = measure(whole);
          if (failed(outcome))
            return failure();
          if (outcome->peak > budgetBytes)
            return infeasible(model);
          current = whole;
          now = *outcome;
          break;
        }
        if (best->second.round == round) {
          taken = best->first;
          break;
        }
        if (failed(rescore(best, round)))
          return failure();
      }
      // The last change: the ratio led to one that fits, but a change
      // that saves less may fit too for less recompute; every candidate
      // is scored afresh once and the cheapest that fits is taken.
      if (now.peak > budgetBytes &&
          candidates[taken].outcome.peak <= budgetBytes) {
        for (auto it = candidates.begin(); it != candidates.end(); ++it) {
          if (!valid(it) || it->second.round == round)
            continue;
          if (failed(rescore(it, round)))
            return failure();
        }
        for (auto it = candidates.begin(); it != candidates.end(); ++it)
          if (valid(it) && it->second.round == round &&
              it->second.outcome.peak <= budgetBytes &&
              it->second.outcome.compute < candidates[taken].outcome.compute)
            taken = it->first;
      }
      if (now.peak <= budgetBytes)
        break;
      current[taken.first] = taken.second;
      now = candidates[taken].outcome;
    }

    for (auto [unit, policy] : llvm::zip_equal(free, current))
      if (policy != CheckpointPolicy::none)
        unit.setUnitAttr(withPolicy(unit, policy));
    if (report) {
      llvm::outs() << llvm::formatv(
          "memory budget: {0} bytes ({1:f2} MiB) per rank for model {2}: "
          "{9} {3} bytes ({4:f2} MiB), {5} bytes ({6:f2} MiB) "
          "before its choice; predicted recompute of the choice {7:f2} ms "
          "per step; {8} choices evaluated\n",
          budgetBytes, budgetBytes / kMiB, model.getSymName(), now.peak,
          now.peak / kMiB, plain->peak, plain->peak / kMiB,
          (now.compute - plain->compute) * 1e3, evaluations,
          arenaPipeline ? "arena plan" : "planned peak");
      auto printUnit = [](NNModuleOp unit, StringRef policy) {
        std::string name = unit.getQualifiedName();
        llvm::outs() << "  recompute " << (name.empty() ? "(root)" : name)
                     << ": " << policy << "\n";
      };
      for (auto [unit, policy] : llvm::zip_equal(free, current))
        printUnit(unit, policyName(policy));
      for (NNModuleOp unit : marked)
        printUnit(unit,
                  (policyName(unit.getUnitAttr().getActivationCheckpointing()) +
                   " (marked by hand)")
                      .str());
    }
    return success();
  }

  /// An eval step's units whose weights stay whole on every rank across
  /// steps: a decode step gathers the others at every step (every token),
  /// these once per request (the runner copies the training shards in
  /// with one all-gather per unit, or loads the checkpoint whole). Every
  /// unit whole when that fits; else, largest first, each unit whose
  /// whole weights still fit beside the ones already kept (the gathers
  /// saved per step are the bytes kept whole, so the largest save most).
  LogicalResult fitEval(ModelOp model, func::FuncOp step) {
    UnitOwnership ownership(model);
    SmallVector<std::pair<int64_t, std::string>> units; // bytes, name
    for (NNModuleOp unit : ownership.getUnits()) {
      fsdp::UnitAttr attr = unit.getUnitAttr();
      if (attr && (attr.getRankLocal() ||
                   attr.getIgnored() != IgnoredGradSync::none))
        continue; // whole already
      int64_t bytes = 0;
      for (ParamOp param : ownership.getParams(unit)) {
        RankedTensorType type = param.getTensorType();
        bytes += type.getNumElements() *
                 llvm::divideCeil(type.getElementTypeBitWidth(), 8);
      }
      if (bytes)
        units.push_back({bytes, unit.getQualifiedName()});
    }
    llvm::stable_sort(units, [](auto &a, auto &b) { return a.first > b.first; });
    auto measure = [&](ArrayRef<std::string> whole) {
      return evaluate(model, {}, {}, whole);
    };
    SmallVector<std::string> all;
    for (auto &unit : units)
      all.push_back(unit.second);
    FailureOr<Outcome> allWhole = measure(all);
    if (failed(allWhole))
      return failure();
    SmallVector<std::string> kept = all;
    Outcome now = *allWhole;
    if (now.peak > budgetBytes) {
      FailureOr<Outcome> none = measure({});
      if (failed(none))
        return failure();
      smallestPeak = std::min(none->peak, allWhole->peak);
      if (none->peak > budgetBytes)
        return infeasible(model, "with its weights whole or gathered");
      kept.clear();
      now = *none;
      for (auto &unit : units) {
        SmallVector<std::string> next = kept;
        next.push_back(unit.second);
        FailureOr<Outcome> outcome = measure(next);
        if (failed(outcome))
          return failure();
        if (outcome->peak <= budgetBytes) {
          kept = std::move(next);
          now = *outcome;
        }
      }
    }
    setKeptWholeUnits(step, kept);
    if (report) {
      int64_t keptBytes = 0;
      for (auto &unit : units)
        if (llvm::is_contained(kept, unit.second))
          keptBytes += unit.first;
      llvm::outs() << llvm::formatv(
          "memory budget: {0} bytes ({1:f2} MiB) per rank for model {2} "
          "(eval): {3} of {4} units' weights kept whole across steps "
          "({5} bytes, gathered once per request), the rest gathered at "
          "every step; {6} {7} bytes ({8:f2} MiB)",
          budgetBytes, budgetBytes / kMiB, model.getSymName(), kept.size(),
          units.size(), keptBytes, arenaPipeline ? "arena plan" : "planned peak",
          now.peak, now.peak / kMiB);
      if (kept.size() < units.size())
        llvm::outs() << llvm::formatv(
            ", {0} bytes ({1:f2} MiB) with every unit whole", allWhole->peak,
            allWhole->peak / kMiB);
      llvm::outs() << "\n";
      for (auto &unit : units)
        llvm::outs() << "  weights of "
                     << (unit.second.empty() ? "(root)" : unit.second) << ": "
                     << (llvm::is_contained(kept, unit.second)
                             ? "kept whole"
                             : "gathered at every step")
                     << " (" << unit.first << " bytes)\n";
    }
    return success();
  }

  LogicalResult infeasible(ModelOp model,
                           StringRef how = "activation checkpointing reaches") {
    return emitError(model.getLoc(), "model ")
           << model.getSymName() << " does not fit memory-budget "
           << budgetBytes << " bytes ("
           << llvm::formatv("{0:f2}", budgetBytes / kMiB)
           << " MiB) per rank: the smallest "
           << (arenaPipeline ? "arena plan" : "planned peak") << " " << how
           << " is " << smallestPeak << " bytes ("
           << llvm::formatv("{0:f2}", smallestPeak / kMiB) << " MiB)";
  }
};

} // namespace
