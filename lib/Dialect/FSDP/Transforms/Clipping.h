//===- Clipping.h - gradient clipping and unscaling ------------------------===//

#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_CLIPPING_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_CLIPPING_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::fsdp {

/// Emits torch.nn.utils.clip_grad_norm_(max_norm, norm_type) over `grads`:
/// the partial total in f32, Σ|g|^p over every gradient element (p = 2: the
/// squares) or max |g| (p = inf, fsdp.max_abs); `combine` turns the local
/// total into the global one (an all-reduce: a sum, a max for inf); then
/// `fsdp.clip_grad_norm`, and each gradient scaled by the coefficient in its
/// own dtype; `grads` are replaced by the clipped ones. `tag(op, i)` tags an
/// op made for gradient i (-1: for all of them). Gradients i with `local[i]`
/// (FSDP's ignored parameters) are not combined: their Σ|g|^p is added to
/// the combined total, as FSDP1's clip_grad_norm_ adds the non-sharded
/// parameters' local norm after the all-reduce (for inf it all-reduces the
/// max of both, so they are combined like the others). Returns the total
/// norm.
Value emitClipGradNorm(OpBuilder &builder, Location loc,
                       MutableArrayRef<Value> grads, FloatAttr maxNorm,
                       FloatAttr normType, function_ref<Value(Value)> combine,
                       function_ref<void(Operation *, int)> tag,
                       ArrayRef<bool> local = {});

/// Emits GradScaler's unscale_ over `grads`: each multiplied by the inverse
/// loss scale in its own dtype (replacing `grads`), then the found-inf flag
/// of them all, which it returns. `tag` as for emitClipGradNorm.
Value emitUnscaleGrads(OpBuilder &builder, Location loc,
                       MutableArrayRef<Value> grads,
                       function_ref<void(Operation *, int)> tag);

} // namespace mlir::fsdp

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_CLIPPING_H
