//===- ShapeRules.h - shape checks shared by forward and gradient ops ------===//
//
// Private to the nn dialect library. The checks report errors at an optional
// location, prefixed with the op name as emitOpError does, because they run
// both in verifiers and in type inference for builders.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_LIB_DIALECT_NN_IR_SHAPERULES_H
#define FSDP_LIB_DIALECT_NN_IR_SHAPERULES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Value.h"

namespace mlir::nn::rules {

/// Reports an error at `loc` prefixed with the op name, like emitOpError.
template <typename... Args>
LogicalResult fail(std::optional<Location> loc, StringRef opName,
                   Args &&...args) {
  return emitOptionalError(loc, "'", opName, "' op ",
                           std::forward<Args>(args)...);
}

inline RankedTensorType tensorOf(Value value) {
  return value ? dyn_cast<RankedTensorType>(value.getType()) : nullptr;
}

/// Checks that `what` is the 1-D tensor [size] with element type `element`.
LogicalResult checkVector(std::optional<Location> loc, StringRef opName,
                          StringRef what, Value value, int64_t size,
                          Type element);

/// Infers the type of a normalization over the last dimension with optional
/// per-feature vectors (weight, bias): the input's type.
LogicalResult inferLastDimNorm(std::optional<Location> loc, StringRef name,
                               Value input,
                               ArrayRef<std::pair<StringRef, Value>> vectors,
                               SmallVectorImpl<Type> &results);

/// Checks a cross-entropy's `num_classes` (where given) against its
/// logits: at most their last dimension, the rest being padding.
LogicalResult checkNumClasses(std::optional<Location> loc, StringRef opName,
                              Value logits,
                              std::optional<uint64_t> numClasses);

/// nn.packed_attention's result [B, T, H·D] for `qkv` [B, T, (H + 2·Hkv)·D].
/// num_kv_heads defaults to num_heads.
FailureOr<RankedTensorType>
packedAttentionResult(std::optional<Location> loc, StringRef opName,
                      Value qkv, uint64_t numHeads,
                      std::optional<uint64_t> numKvHeads);

/// An attention's softmax statistics for its result `[B, Tq, H·D]`:
/// f32 [B, H, Tq].
RankedTensorType attentionStats(RankedTensorType result, uint64_t numHeads);

/// A backward's `saved` operands: none, or the forward's `result` and its
/// statistics.
LogicalResult checkSavedStats(std::optional<Location> loc, StringRef opName,
                              ValueRange saved, RankedTensorType result,
                              uint64_t numHeads);

} // namespace mlir::nn::rules

#endif // FSDP_LIB_DIALECT_NN_IR_SHAPERULES_H
