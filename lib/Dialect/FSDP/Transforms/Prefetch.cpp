//===- Prefetch.cpp - issue all-gathers early ------------------------------===//

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPREFETCHPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// A gather of one unit: issue, completion and free.
struct Gather {
  UnshardOp unshard;
  WaitOp wait;
  ReshardOp reshard;

  /// Whether the gather is freed in the phase that gathered it; those are
  /// the gathers the rate limiter counts.
  bool freedInPhase() const {
    return reshard && getPhase(reshard) == getPhase(unshard);
  }
};

class Prefetcher {
public:
  Prefetcher(Block &body, int64_t limit) : limit(limit) {
    for (auto unshard : body.getOps<UnshardOp>()) {
      Gather gather{unshard, cast<WaitOp>(*unshard->getUsers().begin()), {}};
      for (Operation *user : gather.wait->getUsers())
        if (auto reshard = dyn_cast<ReshardOp>(user))
          gather.reshard = reshard;
      (getPhase(unshard) == kForward ? forward : backward).push_back(gather);
    }
  }

  /// Issues each gather of `order` (but the first) at the point `target`
  /// gives for its predecessor in the same micro-batch: as PyTorch's
  /// prefetch, within one forward or backward pass (a gather moved into the
  /// previous micro-batch would stay live through this one's forward).
  void prefetch(ArrayRef<Gather> order,
                function_ref<Operation *(Gather)> target) {
    for (size_t i = 1; i < order.size(); ++i) {
      if (getMicroBatch(order[i].unshard) !=
          getMicroBatch(order[i - 1].unshard))
        continue;
      if (Operation *point = target(order[i - 1]))
        issueAt(order[i], point);
    }
  }

  /// Issues, after each gather of `phase` completes, the gathers of the
  /// units its unit lists in `lists` (FSDP2's set_modules_to_*_prefetch),
  /// in list order, from the same micro-batch; a unit gathered earlier, or
  /// not at all in this phase (kept from the forward), needs nothing.
  void prefetchListed(ArrayRef<Gather> phase,
                      const llvm::StringMap<SmallVector<StringRef>> &lists) {
    for (Gather current : phase) {
      auto listed = lists.find(current.unshard.getUnit());
      if (listed == lists.end())
        continue;
      // One point for the whole list: each issue lands just before it.
      Operation *point = current.wait->getNextNode();
      for (StringRef unit : listed->second)
        for (Gather target : phase)
          if (target.unshard.getUnit() == unit &&
              getMicroBatch(target.unshard) == getMicroBatch(current.unshard))
            issueAt(target, point);
    }
  }

  SmallVector<Gather> forward, backward;

private:
  /// Gathers issued before `point` whose free is not yet done there (it is at
  /// or after `point`), among those that count.
  int64_t pendingFrees(Operation *point) const {
    int64_t count = 0;
    for (const SmallVector<Gather> &phase : {forward, backward})
      for (const Gather &g : phase)
        if (g.freedInPhase() && g.unshard->isBeforeInBlock(point) &&
            !g.reshard->isBeforeInBlock(point))
          ++count;
    return count;
  }

  /// Moves `gather`'s issue up to `point`, or to the first later point the
  /// rate limit allows; never past its own wait.
  void issueAt(const Gather &gather, Operation *point) {
    if (!point->isBeforeInBlock(gather.unshard))
      return;
    while (point != gather.unshard && limit > 0 &&
           pendingFrees(point) >= limit)
      point = point->getNextNode();
    gather.unshard->moveBefore(point);
  }

  int64_t limit;
};

/// The op before which the reduction of the gradient `gather` computes
/// starts (its flatten): the unit's reduction in the gather's micro-batch, or
/// its only one when the micro-batches reduce once (no_sync).
Operation *reductionOf(Block &body, Gather gather) {
  ReduceGradsOp only;
  for (auto reduce : body.getOps<ReduceGradsOp>()) {
    if (reduce.getUnit() != gather.unshard.getUnit())
      continue;
    if (getMicroBatch(reduce) == getMicroBatch(gather.unshard))
      return reduce.getGrad().getDefiningOp();
    only = reduce;
  }
  return only ? only.getGrad().getDefiningOp() : nullptr;
}

/// Each unit's forward_prefetch and backward_prefetch lists, keyed by its
/// name; a listed name must be a unit the step gathers.
LogicalResult
collectLists(ModelOp model, Block &body,
             llvm::StringMap<SmallVector<StringRef>> &forwardLists,
             llvm::StringMap<SmallVector<StringRef>> &backwardLists) {
  llvm::StringSet<> gathered;
  for (auto unshard : body.getOps<UnshardOp>())
    gathered.insert(unshard.getUnit());
  WalkResult walk = model.walk([&](NNModuleOp module) {
    fsdp::UnitAttr unit = module.getUnitAttr();
    if (!unit)
      return WalkResult::advance();
    std::string name = module.getQualifiedName();
    for (auto [key, units, lists] :
         {std::tuple{StringRef("forward_prefetch"), unit.getForwardPrefetch(),
                     &forwardLists},
          std::tuple{StringRef("backward_prefetch"),
                     unit.getBackwardPrefetch(), &backwardLists}}) {
      if (!units)
        continue;
      for (auto listed : units.getAsRange<StringAttr>()) {
        if (!gathered.contains(listed.getValue())) {
          module.emitOpError("unit '")
              << name << "': " << key << " names '" << listed.getValue()
              << "', which is not a unit this step gathers";
          return WalkResult::interrupt();
        }
        (*lists)[name].push_back(listed.getValue());
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

struct PrefetchPass : public fsdp::impl::FSDPPrefetchPassBase<PrefetchPass> {
  using FSDPPrefetchPassBase::FSDPPrefetchPassBase;

  void runOnOperation() override {
    if (backwardPrefetch != "none" && backwardPrefetch != "pre" &&
        backwardPrefetch != "post") {
      emitError(getOperation().getLoc(),
                "fsdp-prefetch: backward-prefetch must be none, pre or post, "
                "got '")
          << backwardPrefetch << "'";
      return signalPassFailure();
    }
    if (limitAllGathers < 0) {
      emitError(getOperation().getLoc(),
                "fsdp-prefetch: limit-all-gathers must be >= 0, got ")
          << static_cast<int64_t>(limitAllGathers);
      return signalPassFailure();
    }
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      func::FuncOp step = getTrainStep(model);
      if (!step || !step->hasAttr(kStrategyAttr)) {
        model.emitOpError("has no sharded train step; run fsdp-shard and "
                          "fsdp-insert-collectives first");
        return signalPassFailure();
      }
      Block &body = step.getBody().front();
      llvm::StringMap<SmallVector<StringRef>> forwardLists, backwardLists;
      if (failed(collectLists(model, body, forwardLists, backwardLists)))
        return signalPassFailure();
      Prefetcher prefetcher(body, limitAllGathers);
      if (forwardPrefetch)
        prefetcher.prefetch(prefetcher.forward, [](Gather current) {
          return current.wait->getNextNode();
        });
      if (backwardPrefetch == "pre")
        prefetcher.prefetch(prefetcher.backward, [](Gather current) {
          return current.wait->getNextNode();
        });
      else if (backwardPrefetch == "post")
        prefetcher.prefetch(prefetcher.backward, [&](Gather current) {
          return reductionOf(body, current);
        });
      prefetcher.prefetchListed(prefetcher.forward, forwardLists);
      prefetcher.prefetchListed(prefetcher.backward, backwardLists);
    }
  }
};

} // namespace
