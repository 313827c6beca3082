//===- CheckpointActivations.cpp - recompute units' forward in backward ---===//

#include "fsdp/Dialect/FSDP/Analysis/UnitOwnership.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCHECKPOINTACTIVATIONSPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Recomputes one unit's forward of one micro-batch (`forward`, in block
/// order) for its backward.
void recompute(ArrayRef<Operation *> forward) {
  llvm::SmallPtrSet<Operation *, 32> inForward(forward.begin(), forward.end());
  auto isBackward = [](Operation *op) { return getPhase(op) == kBackward; };
  // The forward ops whose results the backward reads, and the first
  // backward op that reads one. A loss computed with its gradient
  // (nn.cross_entropy_with_grad) hands the backward a gradient, not an
  // activation: recomputing it would run the loss twice.
  Operation *firstReader = nullptr;
  llvm::SetVector<Operation *> needed;
  for (Operation *op : forward) {
    if (isa<nn::CrossEntropyWithGradOp>(op))
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
  // What they are computed from within the unit's forward.
  for (size_t i = 0; i < needed.size(); ++i)
    for (Value operand : needed[i]->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && inForward.count(def))
        needed.insert(def);
  SmallVector<Operation *> ordered = needed.takeVector();
  llvm::sort(ordered, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });

  // The clones read each other (every operand computed in the unit's
  // forward is recomputed before its reader), never the originals.
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
    bool all = llvm::is_contained(kinds, "all");
    llvm::StringSet<> wanted;
    for (const std::string &kind : kinds)
      wanted.insert(kind);
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      UnitOwnership ownership(model);
      llvm::StringSet<> units, kindsFound;
      for (NNModuleOp unit : ownership.getUnits()) {
        kindsFound.insert(unit.getKind());
        fsdp::UnitAttr attr = unit.getUnitAttr();
        if (all || wanted.contains(unit.getKind()) ||
            (attr && attr.getActivationCheckpointing()))
          units.insert(unit.getQualifiedName());
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
      for (auto &entry : forwards)
        recompute(entry.second);
    }
  }
};

} // namespace
