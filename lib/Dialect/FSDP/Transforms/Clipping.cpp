//===- Clipping.cpp - gradient clipping and unscaling ----------------------===//

#include "Clipping.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

using namespace mlir;
using namespace mlir::fsdp;

/// `value` cast to `element` when it has another element type.
static Value castTo(OpBuilder &builder, Location loc, Value value,
                    Type element, function_ref<void(Operation *)> tag) {
  auto type = cast<RankedTensorType>(value.getType());
  if (type.getElementType() == element)
    return value;
  auto cast = nn::CastOp::create(builder, loc, type.clone(element), value);
  tag(cast);
  return cast;
}

Value fsdp::emitClipGradNorm(OpBuilder &builder, Location loc,
                             MutableArrayRef<Value> grads, FloatAttr maxNorm,
                             function_ref<Value(Value)> combine,
                             function_ref<void(Operation *, int)> tag) {
  Type f32 = builder.getF32Type();
  Value sumSq;
  for (int i = 0, e = grads.size(); i < e; ++i) {
    auto tagThis = [&](Operation *op) { tag(op, i); };
    Value g = castTo(builder, loc, grads[i], f32, tagThis);
    Value sq = nn::MulOp::create(builder, loc, g, g);
    auto rank = cast<RankedTensorType>(g.getType()).getRank();
    Value partial = nn::ReduceSumOp::create(
        builder, loc, sq,
        builder.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, rank))),
        /*keepdim=*/false);
    tagThis(sq.getDefiningOp());
    tagThis(partial.getDefiningOp());
    if (sumSq) {
      sumSq = nn::AddOp::create(builder, loc, sumSq, partial);
      tag(sumSq.getDefiningOp(), -1);
    } else {
      sumSq = partial;
    }
  }
  auto clip = ClipGradNormOp::create(builder, loc, combine(sumSq), maxNorm);
  tag(clip, -1);
  for (int i = 0, e = grads.size(); i < e; ++i) {
    auto tagThis = [&](Operation *op) { tag(op, i); };
    Value coefficient =
        castTo(builder, loc, clip.getCoefficient(),
               getElementTypeOrSelf(grads[i].getType()), tagThis);
    grads[i] = nn::MulOp::create(builder, loc, grads[i], coefficient);
    tagThis(grads[i].getDefiningOp());
  }
  return clip.getNorm();
}

Value fsdp::emitUnscaleGrads(OpBuilder &builder, Location loc,
                             MutableArrayRef<Value> grads,
                             function_ref<void(Operation *, int)> tag) {
  auto f32 = RankedTensorType::get({}, builder.getF32Type());
  Value inverse = LossScaleOp::create(builder, loc, f32, /*inverse=*/true);
  tag(inverse.getDefiningOp(), -1);
  for (int i = 0, e = grads.size(); i < e; ++i) {
    auto tagThis = [&](Operation *op) { tag(op, i); };
    Value factor = castTo(builder, loc, inverse,
                          getElementTypeOrSelf(grads[i].getType()), tagThis);
    grads[i] = nn::MulOp::create(builder, loc, grads[i], factor);
    tagThis(grads[i].getDefiningOp());
  }
  auto found = FoundNonfiniteOp::create(builder, loc, f32, grads);
  tag(found, -1);
  return found;
}
