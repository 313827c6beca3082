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

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPKEEPATTENTIONSTATSPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// Whether `read` (an operand of an attention's gradient) holds the values
/// of `forward` (the operand of an attention's forward): the same value,
/// or its recomputation for the backward under activation checkpointing
/// (backward ops repeating the forward's on the same or recomputed
/// operands). Selective checkpointing keeps the attention but recomputes
/// the cheap ops feeding it (a split, RoPE), so its gradient reads those.
bool sameOrRecomputed(Value read, Value forward) {
  if (read == forward)
    return true;
  auto clone = dyn_cast<OpResult>(read);
  auto original = dyn_cast<OpResult>(forward);
  if (!clone || !original || getPhase(clone.getOwner()) != kBackward ||
      clone.getResultNumber() != original.getResultNumber())
    return false;
  return OperationEquivalence::isEquivalentTo(
      clone.getOwner(), original.getOwner(),
      [](Value a, Value b) { return success(sameOrRecomputed(a, b)); },
      /*markEquivalent=*/nullptr,
      OperationEquivalence::IgnoreLocations |
          OperationEquivalence::IgnoreDiscardableAttrs);
}

/// Whether `forward` reads what `grad` differentiates (the same operands).
bool sameInputs(nn::PackedAttentionOp forward,
                nn::PackedAttentionGradOp grad) {
  return sameOrRecomputed(grad.getQkv(), forward.getQkv());
}
bool sameInputs(nn::AttentionOp forward, nn::AttentionGradOp grad) {
  return sameOrRecomputed(grad.getQuery(), forward.getQuery()) &&
         sameOrRecomputed(grad.getKey(), forward.getKey()) &&
         sameOrRecomputed(grad.getValue(), forward.getValue()) &&
         (grad.getBias() ? forward.getBias() &&
                               sameOrRecomputed(grad.getBias(),
                                                forward.getBias())
                         : !forward.getBias());
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
/// (or their recomputation) with the same attributes, before `grad` in its
/// block; the last such when there are several (they compute the same
/// values: under activation checkpointing of a unit whose inputs come from
/// outside it, the forward and its recomputation; the later one keeps the
/// least alive). Null if none.
template <typename Forward, typename Grad>
Forward forwardOf(Grad grad) {
  for (Operation *op = grad->getPrevNode(); op; op = op->getPrevNode()) {
    auto forward = dyn_cast<Forward>(op);
    if (forward && forward.getNumHeads() == grad.getNumHeads() &&
        forward.getNumKvHeads() == grad.getNumKvHeads() &&
        forward.getCausal() == grad.getCausal() &&
        forward.getScale() == grad.getScale() && sameInputs(forward, grad))
      return forward;
  }
  return {};
}

/// Gives `grad` (without `saved`) its forward's result and statistics,
/// making the forward keep them.
template <typename Forward, typename Grad>
void keepStats(Grad grad) {
  if (!grad.getSaved().empty())
    return;
  Forward forward = forwardOf<Forward>(grad);
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
      if (auto packed = dyn_cast<nn::PackedAttentionGradOp>(op))
        keepStats<nn::PackedAttentionOp>(packed);
      else
        keepStats<nn::AttentionOp>(cast<nn::AttentionGradOp>(op));
    }
  }
};

} // namespace
