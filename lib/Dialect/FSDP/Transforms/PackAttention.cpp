//===- PackAttention.cpp - attention on one packed q / k / v --------------===//
//
// GPT-2's attention splits its c_attn projection [B, T, 3C] into q, k, v
// (three copies) and its backward concatenates their gradients (another);
// on an H100 (2026-11-26) the two took 2.2 ms of a 30.6 ms step.
// nn.packed_attention reads the slices in place and writes one packed
// gradient instead.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPPACKATTENTIONPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

/// The split whose three results are `attention`'s query, key and value,
/// in that order and read by nothing else, cut along the last dimension of
/// its input; null if there is none.
nn::SplitOp packedSplit(nn::AttentionOp attention) {
  if (attention.getBias())
    return {};
  auto split = attention.getQuery().getDefiningOp<nn::SplitOp>();
  if (!split || split.getNumResults() != 3)
    return {};
  int64_t rank = split.getInput().getType().getRank();
  int64_t dim = static_cast<int64_t>(split.getDim());
  if (dim != rank - 1 && dim != -1) // torch.split's dim=-1 too
    return {};
  ValueRange parts = split.getResults();
  if (attention.getQuery() != parts[0] || attention.getKey() != parts[1] ||
      attention.getValue() != parts[2])
    return {};
  for (Value part : parts)
    if (!part.hasOneUse())
      return {};
  return split;
}

struct FSDPPackAttentionPass
    : public fsdp::impl::FSDPPackAttentionPassBase<FSDPPackAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<nn::AttentionOp> attentions;
    getOperation().walk([&](ForwardOp forward) {
      // Unused nn ops (an importer's leftover reshapes of q, k, v) would
      // count as readers of the split. fsdp ops stay: an unused get_param
      // still places its parameter's owner.
      Block &body = forward.getBody().front();
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
        if (isa_and_nonnull<nn::NNDialect>(op.getDialect()) &&
            isOpTriviallyDead(&op))
          op.erase();
      forward.walk([&](nn::AttentionOp op) { attentions.push_back(op); });
    });
    for (nn::AttentionOp attention : attentions) {
      nn::SplitOp split = packedSplit(attention);
      if (!split)
        continue;
      OpBuilder b(attention);
      auto packed = nn::PackedAttentionOp::create(
          b, attention.getLoc(), split.getInput(),
          attention.getNumHeadsAttr(), attention.getNumKvHeadsAttr(),
          attention.getCausalAttr(), attention.getScaleAttr(),
          /*keep_stats=*/nullptr);
      attention.getResult().replaceAllUsesWith(packed.getResult());
      attention.erase();
      split.erase();
    }
  }
};

} // namespace
