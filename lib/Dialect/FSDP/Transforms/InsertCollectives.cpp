//===- InsertCollectives.cpp - PyTorch FSDP's collective placement ---------===//

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPINSERTCOLLECTIVESPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Whether `op` derives a value from a gathered parameter by layout or dtype
/// only: the views, and reshapes, transposes, casts and broadcasts of them.
/// They read the gathered buffer, so they count as uses of the unit and are
/// recomputed with it.
bool isDerivation(Operation *op) {
  return isa<ViewOp, nn::ReshapeOp, nn::TransposeOp, nn::CastOp,
             nn::BroadcastOp>(op);
}

/// One gather of a unit: the unshard, its wait, and the derivations of the
/// gathered parameters in block order.
struct Gather {
  UnshardOp unshard;
  WaitOp wait;
  SmallVector<Operation *> derived;
};

bool inBlockOrder(Operation *a, Operation *b) { return a->isBeforeInBlock(b); }

Gather collect(UnshardOp unshard) {
  Gather gather{unshard, cast<WaitOp>(*unshard->getUsers().begin()), {}};
  llvm::SetVector<Operation *> derived;
  for (Operation *user : gather.wait->getUsers())
    if (isa<ViewOp>(user))
      derived.insert(user);
  for (size_t i = 0; i < derived.size(); ++i)
    for (Operation *user : derived[i]->getUsers())
      if (isDerivation(user) && user->getNumOperands() == 1)
        derived.insert(user);
  gather.derived = derived.takeVector();
  llvm::sort(gather.derived, inBlockOrder);
  return gather;
}

/// The ops that read the gathered parameters (other than derivations), in
/// block order.
SmallVector<Operation *> usersOf(const Gather &gather) {
  llvm::SmallPtrSet<Operation *, 16> derived(gather.derived.begin(),
                                             gather.derived.end());
  llvm::SetVector<Operation *> users;
  for (Operation *op : gather.derived)
    for (Operation *user : op->getUsers())
      if (!derived.contains(user))
        users.insert(user);
  SmallVector<Operation *> ordered = users.takeVector();
  llvm::sort(ordered, inBlockOrder);
  return ordered;
}

/// Moves the gather and its derivations to just before `point`.
void moveBefore(Gather &gather, Operation *point) {
  gather.unshard->moveBefore(point);
  gather.wait->moveBefore(point);
  for (Operation *op : gather.derived)
    op->moveBefore(point);
}

/// Gathers the unit again before `point` (tagged `phase`), derives its
/// parameters again, and redirects `users` to the new values.
Gather regather(const Gather &gather, Operation *point,
                ArrayRef<Operation *> users, Phase phase) {
  OpBuilder builder(point);
  IRMapping mapping;
  Gather copy{cast<UnshardOp>(builder.clone(*gather.unshard, mapping)), {}, {}};
  copy.wait = cast<WaitOp>(builder.clone(*gather.wait, mapping));
  StringRef unit = copy.unshard.getUnit();
  tagOp(copy.unshard, unit, phase);
  tagOp(copy.wait, unit, phase);
  for (Operation *op : gather.derived) {
    Operation *clone = builder.clone(*op, mapping);
    tagOp(clone, unit, phase);
    copy.derived.push_back(clone);
  }
  for (Operation *user : users)
    for (OpOperand &operand : user->getOpOperands())
      if (Value mapped = mapping.lookupOrNull(operand.get()))
        operand.set(mapped);
  return copy;
}

/// Redirects `users`, which read `from`'s values, to the same values of
/// `to`, a copy of the same gather (clones keep the derivations' order).
void redirect(const Gather &from, const Gather &to,
              ArrayRef<Operation *> users) {
  IRMapping mapping;
  mapping.map(from.wait->getResult(0), to.wait->getResult(0));
  for (auto [a, b] : llvm::zip_equal(from.derived, to.derived))
    mapping.map(a->getResults(), b->getResults());
  for (Operation *user : users)
    for (OpOperand &operand : user->getOpOperands())
      if (Value mapped = mapping.lookupOrNull(operand.get()))
        operand.set(mapped);
}

/// Frees the gathered unit after `point`, in `point`'s micro-batch.
void reshardAfter(Operation *point, Value full, StringRef unit,
                  Phase phase) {
  OpBuilder builder(point->getContext());
  builder.setInsertionPointAfter(point);
  auto reshard = ReshardOp::create(builder, point->getLoc(), full, unit);
  tagOp(reshard, unit, phase);
  if (Attribute microBatch = point->getAttr(kMicroBatchAttr))
    reshard->setAttr(kMicroBatchAttr, microBatch);
}

/// Tags a gather with the micro-batch of the op it serves.
void tagMicroBatch(const Gather &gather, Operation *user) {
  Attribute microBatch = user->getAttr(kMicroBatchAttr);
  if (!microBatch)
    return;
  gather.unshard->setAttr(kMicroBatchAttr, microBatch);
  gather.wait->setAttr(kMicroBatchAttr, microBatch);
  for (Operation *op : gather.derived)
    op->setAttr(kMicroBatchAttr, microBatch);
}

/// The phase of an op that uses a gathered unit; an untagged one (hand-written
/// IR) counts as forward.
Phase phaseOf(Operation *op) { return getPhase(op).value_or(kForward); }

/// The only user of `value`, if it is an `OpT`.
template <typename OpT> OpT soleUser(Value value) {
  return value.hasOneUse() ? dyn_cast<OpT>(*value.getUsers().begin()) : OpT();
}

/// A micro-batch's reduced gradient shard (cast up, when reduced in low
/// precision) is added to the earlier micro-batches' sum just before the
/// next micro-batch's backward starts: its reduce-scatter is done by then
/// (a whole forward later), so the add does not make the computation wait,
/// and through that backward, where the step peaks, a unit holds one shard.
void accumulateBeforeNextBackward(Block &body) {
  llvm::DenseMap<int64_t, Operation *> backwardStart;
  for (Operation &op : body)
    if (getPhase(&op) == kBackward)
      backwardStart.try_emplace(getMicroBatch(&op), &op);
  for (auto flatten : llvm::to_vector(body.getOps<FlattenOp>())) {
    Operation *next = backwardStart.lookup(getMicroBatch(flatten) + 1);
    if (!next || !flatten->hasAttr(kMicroBatchAttr))
      continue; // the last micro-batch's, or a single reduction
    Value shard = flatten.getResult();
    if (auto reduce = soleUser<ReduceGradsOp>(shard))
      shard = reduce;
    if (auto up = soleUser<nn::CastOp>(shard)) {
      up->moveBefore(next);
      shard = up;
    }
    // The first micro-batch's shard is the sum's start, not a term.
    auto add = soleUser<nn::AddOp>(shard);
    if (add && add->hasAttr(kGradAccumulationAttr) && add.getRhs() == shard)
      add->moveBefore(next);
  }
}

/// A unit's own reshard_after_forward: whether it frees after the forward,
/// and the ranks it reshards to then (0: all of the shard group).
struct UnitReshard {
  bool reshards;
  int64_t postForwardGroup = 0;
};

/// Keeps this rank's 1/`group` of the unit gathered as `full` after
/// `point`, in `point`'s micro-batch.
PostForwardShardOp keepPostForwardShard(Operation *point, Value full,
                                        StringRef unit, int64_t group) {
  OpBuilder builder(point->getContext());
  builder.setInsertionPointAfter(point);
  auto type = cast<RankedTensorType>(full.getType());
  auto partType = RankedTensorType::get({type.getNumElements() / group},
                                        type.getElementType());
  auto part = PostForwardShardOp::create(builder, point->getLoc(), partType,
                                         full, unit, group);
  tagOp(part, unit, kForward);
  if (Attribute microBatch = point->getAttr(kMicroBatchAttr))
    part->setAttr(kMicroBatchAttr, microBatch);
  return part;
}

LogicalResult schedule(func::FuncOp step, bool reshardRoot,
                       bool reshardAfterBackward,
                       const llvm::StringMap<UnitReshard> &unitReshards) {
  Block &body = step.getBody().front();
  if (!body.getOps<ReshardOp>().empty())
    return emitStepError(step) << "is already scheduled";
  ShardingStrategy strategy = getStrategy(step);
  bool reshardsAfterForward = strategy == ShardingStrategy::full_shard ||
                              strategy == ShardingStrategy::hybrid_shard;

  // Each unit's flat gradient (and its reduction) moves to just after the
  // unit's last gradient, so that the parameter gradients die there (a
  // rank-local unit's has no reduction; an ignored unit's is none or its
  // all-reduces).
  for (auto flatten : llvm::to_vector(body.getOps<FlattenOp>())) {
    SmallVector<Operation *> reductions;
    for (Value v = flatten; v;) {
      Operation *next = nullptr;
      for (Operation *user : v.getUsers())
        if (isa<ReduceGradsOp, AllReduceOp>(user))
          next = user;
      if (next)
        reductions.push_back(next);
      v = next && isa<AllReduceOp>(next) ? next->getResult(0) : Value();
    }
    Operation *last = nullptr;
    for (Value grad : flatten.getInputs()) {
      // A cast to the reduce dtype follows its gradient.
      if (auto cast = grad.getDefiningOp<nn::CastOp>())
        if (Operation *source = cast.getInput().getDefiningOp())
          cast->moveAfter(source);
      if (Operation *def = grad.getDefiningOp())
        if (!last || last->isBeforeInBlock(def))
          last = def;
    }
    if (last) {
      flatten->moveAfter(last);
      Operation *previous = flatten;
      for (Operation *reduction : reductions) {
        reduction->moveAfter(previous);
        previous = reduction;
      }
    }
  }

  accumulateBeforeNextBackward(body);

  for (auto unshard : llvm::to_vector(body.getOps<UnshardOp>())) {
    Gather gather = collect(unshard);
    StringRef unit = unshard.getUnit();
    SmallVector<Operation *> users = usersOf(gather);
    if (users.empty()) {
      // A unit whose parameters nothing reads needs no gather.
      for (Operation *op : llvm::reverse(gather.derived))
        op->erase();
      gather.wait->erase();
      unshard->erase();
      continue;
    }
    bool reshards = reshardsAfterForward && (!unit.empty() || reshardRoot);
    int64_t postForwardGroup = 0;
    if (auto it = unitReshards.find(unit); it != unitReshards.end()) {
      reshards = it->second.reshards;
      postForwardGroup = it->second.postForwardGroup;
    }

    // Each micro-batch gathers the unit for its forward and backward, as
    // PyTorch does for every forward/backward pass. A micro-batch's ops
    // still read the first gather's values, so its gather maps from those;
    // its backward's gather maps from the micro-batch's own. Without
    // reshard-after-backward the previous micro-batch's last gather stays
    // and serves this one (FSDP2's unshard is a no-op on a gathered unit).
    const Gather first = gather;
    bool held = false; // the previous micro-batch left the unit gathered
    for (auto segment = users.begin(); segment != users.end();) {
      int64_t microBatch = getMicroBatch(*segment);
      auto segmentEnd = std::find_if(segment, users.end(), [&](Operation *op) {
        return getMicroBatch(op) != microBatch;
      });
      ArrayRef<Operation *> ops(&*segment, segmentEnd - segment);
      auto firstBackward = llvm::find_if(
          ops, [](Operation *op) { return getPhase(op) != kForward; });
      ArrayRef<Operation *> forward(ops.begin(), firstBackward);
      ArrayRef<Operation *> backward(firstBackward, ops.end());
      if (segment == users.begin()) {
        moveBefore(gather, ops.front());
        tagMicroBatch(gather, ops.front());
      } else if (held) {
        redirect(first, gather, ops);
      } else {
        gather = regather(first, ops.front(), ops, phaseOf(ops.front()));
        tagMicroBatch(gather, ops.front());
      }
      if (!forward.empty() && !backward.empty() && reshards) {
        // Resharding to a smaller group keeps this rank's part of it, which
        // the backward gathers over that group instead of the shard group.
        Operation *freeAfter = forward.back();
        PostForwardShardOp part;
        if (postForwardGroup) {
          part = keepPostForwardShard(freeAfter, gather.wait, unit,
                                      postForwardGroup);
          freeAfter = part;
        }
        reshardAfter(freeAfter, gather.wait, unit, kForward);
        // From this micro-batch's gather, which its backward reads now (a
        // later micro-batch's ops no longer read the first gather's values).
        gather = regather(gather, backward.front(), backward, kBackward);
        tagMicroBatch(gather, backward.front());
        if (part) {
          gather.unshard.getShardMutable().assign(part);
          gather.unshard.setPostForwardGroup(postForwardGroup);
        }
      }
      segment = segmentEnd;
      // The free after a forward that reshards stays (FSDP2 frees there);
      // the one after a backward goes without reshard-after-backward.
      bool afterReshardingForward = reshards && backward.empty();
      held = !reshardAfterBackward && segment != users.end() &&
             !afterReshardingForward;
      if (!held)
        reshardAfter(ops.back(), gather.wait, unit, phaseOf(ops.back()));
    }
  }
  // Derivations whose users moved to a later gather are dead.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isDerivation(&op) && op.use_empty())
      op.erase();
  return success();
}

struct InsertCollectivesPass
    : public fsdp::impl::FSDPInsertCollectivesPassBase<InsertCollectivesPass> {
  using FSDPInsertCollectivesPassBase::FSDPInsertCollectivesPassBase;

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      func::FuncOp step = getTrainStep(model);
      if (!step || !step->hasAttr(kStrategyAttr)) {
        model.emitOpError("has no sharded train step; run fsdp-shard first");
        return signalPassFailure();
      }
      // Per-unit overrides, as FSDP2's reshard_after_forward argument.
      // An integer N reshards to N ranks (N = 1: keep, N = the shard
      // group: free), N dividing the shard group, as FSDP2 requires.
      int64_t shardGroup =
          step->getAttrOfType<MeshAttr>(kMeshAttr).getShard();
      llvm::StringMap<UnitReshard> unitReshards;
      int64_t postForwardGroup = 0;
      std::string postForwardUnit;
      WalkResult walk = model.walk([&](NNModuleOp module) {
        fsdp::UnitAttr unit = module.getUnitAttr();
        Attribute reshard = unit ? unit.getReshardAfterForward() : Attribute();
        if (auto flag = dyn_cast_or_null<BoolAttr>(reshard)) {
          unitReshards[module.getQualifiedName()] = {flag.getValue()};
          return WalkResult::advance();
        }
        auto ways = dyn_cast_or_null<IntegerAttr>(reshard);
        if (!ways)
          return WalkResult::advance();
        int64_t n = ways.getInt();
        if (n < 1 || shardGroup % n != 0) {
          module.emitOpError("unit '")
              << module.getQualifiedName() << "': reshard_after_forward = "
              << n << " must divide the shard group's " << shardGroup
              << " ranks";
          return WalkResult::interrupt();
        }
        int64_t group = n > 1 && n < shardGroup ? n : 0;
        // The runner makes one set of groups per step (StepAbi.def).
        if (group && postForwardGroup && group != postForwardGroup) {
          module.emitOpError("unit '")
              << module.getQualifiedName() << "': reshard_after_forward = "
              << n << " differs from unit '" << postForwardUnit << "''s "
              << postForwardGroup << "; a step reshards to one group size";
          return WalkResult::interrupt();
        }
        if (group) {
          postForwardGroup = group;
          postForwardUnit = module.getQualifiedName();
        }
        unitReshards[module.getQualifiedName()] = {n > 1, group};
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return signalPassFailure();
      if (failed(schedule(step, reshardRootAfterForward, reshardAfterBackward,
                          unitReshards)))
        return signalPassFailure();
    }
  }
};

} // namespace
