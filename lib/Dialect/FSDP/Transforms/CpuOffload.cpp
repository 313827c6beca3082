//===- CpuOffload.cpp - sharded state in host memory ----------------------===//
//
// Inserts the copies of CPU offload into a scheduled step: host-to-device
// before each device read of an offloaded argument, device-to-host after
// each device value the optimizer reads. Which stream runs what follows
// from the ops (Streams.cpp), where each value lives from isHostArgument
// and fsdp.to_host (StorageAlias.h: livesOnHost).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPCPUOFFLOADPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

/// The op's unit, phase and micro-batch tags.
static void copyTags(Operation *from, Operation *to) {
  for (StringRef name : {StringRef(kUnitAttr), StringRef(kPhaseAttr),
                         StringRef(kMicroBatchAttr)})
    if (Attribute a = from->getAttr(name))
      to->setAttr(name, a);
}

static LogicalResult offload(func::FuncOp step) {
  // Adafactor's update all-reduces between its parts, on the device.
  auto adafactor = step.getBody().getOps<AdafactorStatsOp>();
  if (!adafactor.empty())
    return (*adafactor.begin())
               .emitOpError("fsdp-cpu-offload: Adafactor's update reduces "
                            "its statistics over the shard group between "
                            "its parts, which an optimizer offloaded to "
                            "the host does not do; use another optimizer or "
                            "no offload"),
           failure();
  step->setAttr(kCpuOffloadAttr, mlir::UnitAttr::get(step.getContext()));
  Block &body = step.getBody().front();
  OpBuilder b(step.getContext());
  // Device reads of host arguments: one copy per reading op (an
  // all-gather, a cast), right before it; views of an unsharded flat
  // parameter (one rank, no-shard) share one copy, before the first.
  for (BlockArgument arg : body.getArguments()) {
    if (!isHostArgument(step, arg.getArgNumber()))
      continue;
    Value viewed;
    for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
      Operation *user = use.getOwner();
      if (isOptimizerUpdate(user) || isa<func::ReturnOp>(user))
        continue;
      bool view = isa<ViewOp>(user);
      if (view && viewed) {
        Operation *copy = viewed.getDefiningOp();
        if (user->isBeforeInBlock(copy)) {
          copy->moveBefore(user);
          copyTags(user, copy);
        }
        use.set(viewed);
        continue;
      }
      b.setInsertionPoint(user);
      auto copy = ToDeviceOp::create(b, user->getLoc(), arg);
      copyTags(user, copy);
      use.set(copy);
      if (view)
        viewed = copy;
    }
  }
  // Device values the host optimizer reads: one copy each, right after
  // the value is computed.
  llvm::DenseMap<Value, Value> onHost;
  for (Operation &op : llvm::make_early_inc_range(body)) {
    if (!isOptimizerUpdate(&op))
      continue;
    for (OpOperand &operand : op.getOpOperands()) {
      Value v = operand.get();
      if (livesOnHost(v) || isa<IntegerType>(getElementTypeOrSelf(v)))
        continue; // host state, or the host's step count
      Operation *def = v.getDefiningOp();
      if (!def)
        return op.emitOpError("reads argument #")
               << cast<BlockArgument>(v).getArgNumber()
               << ", which is neither offloaded nor computed by the step";
      Value &copy = onHost[v];
      if (!copy) {
        b.setInsertionPointAfter(def);
        auto toHost = ToHostOp::create(b, def->getLoc(), v);
        copyTags(def, toHost);
        copy = toHost;
      }
      operand.set(copy);
    }
  }
  return success();
}

namespace {
struct FSDPCpuOffloadPass
    : public fsdp::impl::FSDPCpuOffloadPassBase<FSDPCpuOffloadPass> {
  void runOnOperation() override {
    for (auto model : getOperation().getOps<ModelOp>()) {
      func::FuncOp step = getTrainStep(model);
      if (!step || !step->hasAttr(kMeshAttr)) {
        emitError(model.getLoc(), "fsdp-cpu-offload: model '")
            << model.getSymName()
            << "' has no sharded train step; run fsdp-shard and "
               "fsdp-insert-collectives first";
        return signalPassFailure();
      }
      if (!isOffloaded(step) && failed(offload(step)))
        return signalPassFailure();
    }
  }
};
} // namespace
