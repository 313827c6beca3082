//===- InsertCollectives.cpp - PyTorch FSDP's collective placement ---------===//

#include "StepAttrs.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/IR/IRMapping.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPINSERTCOLLECTIVESPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// One unit's gather: the unshard, its wait and the parameter views.
struct Gather {
  UnshardOp unshard;
  WaitOp wait;
  SmallVector<ViewOp> views;
};

/// The ops that use any of `views`, in block order.
SmallVector<Operation *> usersInOrder(ArrayRef<ViewOp> views) {
  llvm::SetVector<Operation *> users;
  for (ViewOp view : views)
    for (Operation *user : view->getUsers())
      users.insert(user);
  SmallVector<Operation *> ordered = users.takeVector();
  llvm::sort(ordered, [](Operation *a, Operation *b) {
    return a->isBeforeInBlock(b);
  });
  return ordered;
}

/// Moves the gather to just before `point`.
void moveBefore(Gather &gather, Operation *point) {
  gather.unshard->moveBefore(point);
  gather.wait->moveBefore(point);
  for (ViewOp view : gather.views)
    view->moveBefore(point);
}

/// Gathers the unit again before `point` and redirects the uses in
/// `users` to the new views.
Gather regather(Gather gather, Operation *point,
                ArrayRef<Operation *> users) {
  OpBuilder builder(point);
  IRMapping mapping;
  Gather copy;
  copy.unshard = cast<UnshardOp>(builder.clone(*gather.unshard, mapping));
  copy.wait = cast<WaitOp>(builder.clone(*gather.wait, mapping));
  tagOp(copy.unshard, gather.unshard.getUnit(), kBackward);
  tagOp(copy.wait, gather.unshard.getUnit(), kBackward);
  for (ViewOp view : gather.views) {
    auto newView = cast<ViewOp>(builder.clone(*view, mapping));
    tagOp(newView, gather.unshard.getUnit(), kBackward);
    copy.views.push_back(newView);
    for (Operation *user : users)
      user->replaceUsesOfWith(view, newView);
  }
  return copy;
}

void reshardAfter(Operation *point, Value full, StringRef unit,
                  StringRef phase) {
  OpBuilder builder(point->getContext());
  builder.setInsertionPointAfter(point);
  auto reshard = ReshardOp::create(builder, point->getLoc(), full, unit);
  tagOp(reshard, unit, phase);
}

LogicalResult schedule(func::FuncOp step, bool reshardRoot,
                       const llvm::StringMap<bool> &unitReshards) {
  StringRef strategy =
      step->getAttrOfType<StringAttr>(kStrategyAttr).getValue();
  bool reshardsAfterForward =
      strategy == "full-shard" || strategy == "hybrid-shard";
  Block &body = step.getBody().front();

  // The reductions move to just after the last gradient of their unit.
  for (auto reduce : llvm::to_vector(body.getOps<ReduceGradsOp>())) {
    auto flatten = reduce.getGrad().getDefiningOp<FlattenOp>();
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
      reduce->moveAfter(flatten);
    }
  }

  for (auto unshard : llvm::to_vector(body.getOps<UnshardOp>())) {
    Gather gather{unshard, cast<WaitOp>(*unshard->getUsers().begin()), {}};
    for (Operation *user : gather.wait->getUsers())
      gather.views.push_back(cast<ViewOp>(user));
    StringRef unit = unshard.getUnit();
    SmallVector<Operation *> users = usersInOrder(gather.views);
    if (users.empty()) {
      // A unit whose parameters nothing reads needs no gather.
      for (ViewOp view : gather.views)
        view->erase();
      gather.wait->erase();
      unshard->erase();
      continue;
    }
    auto inForward = [](Operation *op) { return getPhase(op) == kForward; };
    auto firstBackward = llvm::find_if_not(users, inForward);
    SmallVector<Operation *> forwardUsers(users.begin(), firstBackward);
    SmallVector<Operation *> backwardUsers(firstBackward, users.end());
    moveBefore(gather, users.front());

    bool isRoot = unit.empty();
    bool reshards = reshardsAfterForward && (!isRoot || reshardRoot);
    if (auto it = unitReshards.find(unit); it != unitReshards.end())
      reshards = it->second;
    if (!forwardUsers.empty() && !backwardUsers.empty() && reshards) {
      reshardAfter(forwardUsers.back(), gather.wait, unit, kForward);
      gather = regather(gather, backwardUsers.front(), backwardUsers);
    }
    reshardAfter(users.back(), gather.wait, unit,
                 backwardUsers.empty() ? kForward : kBackward);
  }
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
      llvm::StringMap<bool> unitReshards;
      model.walk([&](NNModuleOp module) {
        if (fsdp::UnitAttr unit = module.getUnitAttr())
          if (BoolAttr reshard = unit.getReshardAfterForward())
            unitReshards[module.getQualifiedName()] = reshard.getValue();
      });
      if (failed(schedule(step, reshardRootAfterForward, unitReshards)))
        return signalPassFailure();
    }
  }
};

} // namespace
