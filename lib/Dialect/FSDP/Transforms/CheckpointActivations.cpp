//===- CheckpointActivations.cpp - recompute units' forward in backward ---===//

#include "fsdp/Dialect/FSDP/Analysis/UnitOwnership.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCHECKPOINTACTIVATIONSPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// What selective checkpointing keeps from the forward: the FLOP-heavy ops
/// (matrix products, attention with its softmax statistics), as PyTorch's
/// selective checkpointing policies save mm / bmm / SDPA results.
/// Recomputing them would cost about as much as the forward; everything
/// else (norms, activations, element-wise ops, reshapes, dropout) is cheap
/// next to them.
bool keptBySelective(Operation *op) {
  return isa<nn::LinearOp, nn::MatmulOp, nn::AttentionOp,
             nn::PackedAttentionOp>(op);
}

/// Recomputes one unit's forward of one micro-batch (`forward`, in block
/// order) for its backward, all of it or, under `selective`, all but what
/// keptBySelective keeps.
void recompute(ArrayRef<Operation *> forward, CheckpointPolicy policy) {
  llvm::SmallPtrSet<Operation *, 32> inForward(forward.begin(), forward.end());
  auto isBackward = [](Operation *op) { return getPhase(op) == kBackward; };
  // A loss computed with its gradient (nn.cross_entropy_with_grad) hands
  // the backward a gradient, not an activation: recomputing it would run
  // the loss twice.
  auto isKept = [&](Operation *op) {
    return isa<nn::CrossEntropyWithGradOp>(op) ||
           (policy == CheckpointPolicy::selective && keptBySelective(op));
  };
  // The forward ops to recompute whose results the backward reads, and
  // the first backward op that reads one.
  Operation *firstReader = nullptr;
  llvm::SetVector<Operation *> needed;
  for (Operation *op : forward) {
    if (isKept(op))
      continue;
    for (Operation *user : op->getUsers())
      if (isBackward(user)) {
        needed.insert(op);
        if (!firstReader || user->isBeforeInBlock(firstReader))
          firstReader = user;
      }
  }
  if (needed.empty())
    return;
  // What they are computed from within the unit's forward, down to the
  // kept ops, whose results the clones read.
  for (size_t i = 0; i < needed.size(); ++i)
    for (Value operand : needed[i]->getOperands())
      if (Operation *def = operand.getDefiningOp();
          def && inForward.count(def) && !isKept(def))
        needed.insert(def);
  SmallVector<Operation *> ordered = needed.takeVector();
  llvm::sort(ordered, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });

  // The clones read each other (every operand recomputed in the unit's
  // forward is recomputed before its reader) and the kept originals.
  OpBuilder builder(firstReader);
  IRMapping mapping;
  for (Operation *op : ordered)
    tagOp(builder.clone(*op, mapping), getUnit(op), kBackward);
  // Only the backward reads the recomputed values; the forward keeps its own.
  for (Operation *op : ordered)
    for (OpResult result : op->getResults())
      result.replaceUsesWithIf(
          mapping.lookup(Value(result)),
          [&](OpOperand &use) { return isBackward(use.getOwner()); });
}

struct CheckpointActivationsPass
    : public fsdp::impl::FSDPCheckpointActivationsPassBase<
          CheckpointActivationsPass> {
  using FSDPCheckpointActivationsPassBase::FSDPCheckpointActivationsPassBase;

  void runOnOperation() override {
    std::optional<CheckpointPolicy> kindsPolicy =
        symbolizeCheckpointPolicy(policy);
    bool all = llvm::is_contained(kinds, "all");
    llvm::StringSet<> wanted;
    for (const std::string &kind : kinds)
      wanted.insert(kind);
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      if (!kindsPolicy || *kindsPolicy == CheckpointPolicy::none) {
        model.emitOpError("asks for activation checkpointing policy '")
            << policy << "'; expected unit or selective";
        return signalPassFailure();
      }
      // The policy is the kinds' (units marked in the IR carry their own):
      // alone it would silently do nothing.
      if (*kindsPolicy == CheckpointPolicy::selective && kinds.empty()) {
        model.emitOpError("asks for selective activation checkpointing "
                          "without the kinds of the units to checkpoint "
                          "(activation-checkpointing=<kinds>|all)");
        return signalPassFailure();
      }
      UnitOwnership ownership(model);
      // Each checkpointed unit's policy: its own when it sets one, else
      // the one for the kinds.
      llvm::StringMap<CheckpointPolicy> units;
      llvm::StringSet<> kindsFound;
      for (NNModuleOp unit : ownership.getUnits()) {
        kindsFound.insert(unit.getKind());
        fsdp::UnitAttr attr = unit.getUnitAttr();
        if (attr && attr.getActivationCheckpointing() != CheckpointPolicy::none)
          units[unit.getQualifiedName()] = attr.getActivationCheckpointing();
        else if (all || wanted.contains(unit.getKind()))
          units[unit.getQualifiedName()] = *kindsPolicy;
      }
      for (const std::string &kind : kinds)
        if (kind != "all" && !kindsFound.contains(kind)) {
          model.emitOpError("has no FSDP unit of kind '")
              << kind << "' to checkpoint (checkpointing applies to units: "
              << "wrap that kind first)";
          return signalPassFailure();
        }
      // Nothing to recompute without checkpointed units, nor in an
      // evaluation program (no backward) built from a model whose units
      // ask for it; `kinds` asks for a train step.
      func::FuncOp step = getTrainStep(model);
      if (units.empty() || (!step && kinds.empty()))
        continue;
      if (!step || step->hasAttr(kMeshAttr)) {
        model.emitOpError("has no unsharded train step; run "
                          "fsdp-checkpoint-activations between "
                          "fsdp-build-train-step and fsdp-shard");
        return signalPassFailure();
      }
      // Each checkpointed unit's forward ops per micro-batch, in block order.
      llvm::MapVector<std::pair<StringRef, int64_t>, SmallVector<Operation *>>
          forwards;
      for (Operation &op : step.getBody().front())
        if (getPhase(&op) == kForward && units.contains(getUnit(&op)))
          forwards[{getUnit(&op), getMicroBatch(&op)}].push_back(&op);
      for (auto &[key, ops] : forwards)
        recompute(ops, units.lookup(key.first));
    }
  }
};

} // namespace
