//===- KeepAttentionStats.cpp - backward reads the forward's statistics ---===//
//
// cuDNN's attention backward needs the forward's output and softmax
// statistics; without them the CUDA backend ran the whole forward again
// inside every backward. Keeping the statistics (f32, one per query row)
// costs little memory, and the output stays alive for the output
// projection's backward anyway.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPKEEPATTENTIONSTATSPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The packed attention computing `grad`'s forward: one reading the same
/// qkv with the same attributes, before `grad` in its block; the last such
/// when there are several (they compute the same values: under activation
/// checkpointing of a unit whose qkv comes from outside it, the forward and
/// its recomputation; the later one keeps the least alive). Null if none.
nn::PackedAttentionOp forwardOf(nn::PackedAttentionGradOp grad) {
  nn::PackedAttentionOp found;
  for (Operation *user : grad.getQkv().getUsers()) {
    auto forward = dyn_cast<nn::PackedAttentionOp>(user);
    if (!forward || forward->getBlock() != grad->getBlock() ||
        !forward->isBeforeInBlock(grad) ||
        forward.getNumHeads() != grad.getNumHeads() ||
        forward.getNumKvHeads() != grad.getNumKvHeads() ||
        forward.getCausal() != grad.getCausal() ||
        forward.getScale() != grad.getScale())
      continue;
    if (!found || found->isBeforeInBlock(forward))
      found = forward;
  }
  return found;
}

struct FSDPKeepAttentionStatsPass
    : public fsdp::impl::FSDPKeepAttentionStatsPassBase<
          FSDPKeepAttentionStatsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<nn::PackedAttentionGradOp> grads;
    getOperation().walk([&](nn::PackedAttentionGradOp grad) {
      if (grad.getSaved().empty())
        grads.push_back(grad);
    });
    for (nn::PackedAttentionGradOp grad : grads) {
      nn::PackedAttentionOp forward = forwardOf(grad);
      if (!forward)
        continue;
      if (!forward.getKeepStats()) {
        OpBuilder b(forward);
        auto kept = nn::PackedAttentionOp::create(
            b, forward.getLoc(), forward.getQkv(), forward.getNumHeadsAttr(),
            forward.getNumKvHeadsAttr(), forward.getCausalAttr(),
            forward.getScaleAttr(), b.getUnitAttr());
        // Its unit, phase and the like, as the op it replaces.
        kept->setDiscardableAttrs(forward->getDiscardableAttrDictionary());
        forward.getResult().replaceAllUsesWith(kept.getResult());
        forward.erase();
        forward = kept;
      }
      grad.getSavedMutable().assign({forward.getResult(), forward.getStats()});
    }
  }
};

} // namespace
