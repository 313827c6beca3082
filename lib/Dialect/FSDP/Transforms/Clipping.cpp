//===- Clipping.cpp - gradient clipping and unscaling ----------------------===//

#include "Clipping.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include <cmath>

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

/// Σ|g|^p over the elements of `g` (f32): g·g for p = 2, |g| for p = 1.
static Value sumOfPowers(OpBuilder &builder, Location loc, Value g, double p,
                         function_ref<void(Operation *)> tag) {
  Value terms;
  if (p == 2.0) {
    terms = nn::MulOp::create(builder, loc, g, g);
  } else {
    terms = nn::AbsOp::create(builder, loc, g);
    if (p != 1.0) {
      tag(terms.getDefiningOp());
      terms = nn::PowOp::create(builder, loc, terms,
                                builder.getF64FloatAttr(p));
    }
  }
  tag(terms.getDefiningOp());
  auto rank = cast<RankedTensorType>(g.getType()).getRank();
  Value sum = nn::ReduceSumOp::create(
      builder, loc, terms,
      builder.getDenseI64ArrayAttr(llvm::to_vector(llvm::seq<int64_t>(0, rank))),
      /*keepdim=*/false);
  tag(sum.getDefiningOp());
  return sum;
}

Value fsdp::emitClipGradNorm(OpBuilder &builder, Location loc,
                             MutableArrayRef<Value> grads, FloatAttr maxNorm,
                             FloatAttr normType,
                             function_ref<Value(Value)> combine,
                             function_ref<void(Operation *, int)> tag,
                             ArrayRef<bool> local) {
  Type f32 = builder.getF32Type();
  double p = normType.getValueAsDouble();
  bool inf = std::isinf(p);
  auto isLocal = [&](int i) {
    return !inf && i < int(local.size()) && local[i];
  };
  // The partial total of the gradients whose isLocal is `wantLocal`: null
  // for none (max |g| of no gradient is 0).
  auto partialOf = [&](bool wantLocal) -> Value {
    SmallVector<int> chosen;
    for (int i = 0, e = grads.size(); i < e; ++i)
      if (isLocal(i) == wantLocal)
        chosen.push_back(i);
    if (inf) {
      if (wantLocal)
        return {};
      SmallVector<Value> operands;
      for (int i : chosen)
        operands.push_back(grads[i]);
      Value max = MaxAbsOp::create(builder, loc,
                                   RankedTensorType::get({}, f32), operands);
      tag(max.getDefiningOp(), -1);
      return max;
    }
    Value total;
    for (int i : chosen) {
      auto tagThis = [&](Operation *op) { tag(op, i); };
      Value g = castTo(builder, loc, grads[i], f32, tagThis);
      Value partial = sumOfPowers(builder, loc, g, p, tagThis);
      if (total) {
        total = nn::AddOp::create(builder, loc, total, partial);
        tag(total.getDefiningOp(), -1);
      } else {
        total = partial;
      }
    }
    return total;
  };
  Value combined = partialOf(/*wantLocal=*/false);
  Value own = partialOf(/*wantLocal=*/true);
  Value total = combined ? combine(combined) : own;
  if (combined && own) {
    total = nn::AddOp::create(builder, loc, total, own);
    tag(total.getDefiningOp(), -1);
  }
  auto clip = ClipGradNormOp::create(builder, loc, total, maxNorm, normType);
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
