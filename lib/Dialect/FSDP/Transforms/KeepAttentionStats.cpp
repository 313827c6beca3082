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

/// Whether `forward` reads what `grad` differentiates (the same operands).
bool sameInputs(nn::PackedAttentionOp forward,
                nn::PackedAttentionGradOp grad) {
  return forward.getQkv() == grad.getQkv();
}
bool sameInputs(nn::AttentionOp forward, nn::AttentionGradOp grad) {
  return forward.getQuery() == grad.getQuery() &&
         forward.getKey() == grad.getKey() &&
         forward.getValue() == grad.getValue() &&
         forward.getBias() == grad.getBias();
}

/// `forward` again, keeping its softmax statistics.
nn::PackedAttentionOp withStats(OpBuilder &b, nn::PackedAttentionOp forward) {
  return nn::PackedAttentionOp::create(
      b, forward.getLoc(), forward.getQkv(), forward.getNumHeadsAttr(),
      forward.getNumKvHeadsAttr(), forward.getCausalAttr(),
      forward.getScaleAttr(), b.getUnitAttr());
}
nn::AttentionOp withStats(OpBuilder &b, nn::AttentionOp forward) {
  return nn::AttentionOp::create(
      b, forward.getLoc(), forward.getQuery(), forward.getKey(),
      forward.getValue(), forward.getBias(), forward.getNumHeadsAttr(),
      forward.getNumKvHeadsAttr(), forward.getCausalAttr(),
      forward.getScaleAttr(), b.getUnitAttr());
}

/// The attention computing `grad`'s forward: one reading the same inputs
/// with the same attributes, before `grad` in its block; the last such
/// when there are several (they compute the same values: under activation
/// checkpointing of a unit whose inputs come from outside it, the forward
/// and its recomputation; the later one keeps the least alive). Null if
/// none.
template <typename Forward, typename Grad>
Forward forwardOf(Grad grad, Value input) {
  Forward found;
  for (Operation *user : input.getUsers()) {
    auto forward = dyn_cast<Forward>(user);
    if (!forward || !sameInputs(forward, grad) ||
        forward->getBlock() != grad->getBlock() ||
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

/// Gives `grad` (without `saved`) its forward's result and statistics,
/// making the forward keep them.
template <typename Forward, typename Grad>
void keepStats(Grad grad, Value input) {
  if (!grad.getSaved().empty())
    return;
  Forward forward = forwardOf<Forward>(grad, input);
  if (!forward)
    return;
  if (!forward.getKeepStats()) {
    OpBuilder b(forward);
    Forward kept = withStats(b, forward);
    // Its unit, phase and the like, as the op it replaces.
    kept->setDiscardableAttrs(forward->getDiscardableAttrDictionary());
    forward.getResult().replaceAllUsesWith(kept.getResult());
    forward.erase();
    forward = kept;
  }
  grad.getSavedMutable().assign({forward.getResult(), forward.getStats()});
}

struct FSDPKeepAttentionStatsPass
    : public fsdp::impl::FSDPKeepAttentionStatsPassBase<
          FSDPKeepAttentionStatsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<Operation *> grads;
    getOperation().walk([&](Operation *op) {
      if (isa<nn::PackedAttentionGradOp, nn::AttentionGradOp>(op))
        grads.push_back(op);
    });
    for (Operation *op : grads) {
      if (auto packed = dyn_cast<nn::PackedAttentionGradOp>(op)) {
        keepStats<nn::PackedAttentionOp>(packed, packed.getQkv());
      } else {
        auto grad = cast<nn::AttentionGradOp>(op);
        keepStats<nn::AttentionOp>(grad, grad.getQuery());
      }
    }
  }
};

} // namespace
