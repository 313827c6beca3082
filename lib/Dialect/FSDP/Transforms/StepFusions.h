//===- StepFusions.h - rewrites of a built train step -----------*- C++ -*-===//
//
// Rewrites fsdp-build-train-step applies once the step is built, when the
// whole backward is known: ops whose gradients nothing reads become cheaper
// ones, and a loss fuses with its gradient. Like PackAttention.cpp they
// change the step's ops, not its meaning.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_DIALECT_FSDP_TRANSFORMS_STEPFUSIONS_H
#define FSDP_LIB_DIALECT_FSDP_TRANSFORMS_STEPFUSIONS_H

#include "mlir/IR/Block.h"

namespace mlir::fsdp {

/// A linear layer whose input needs no gradient (data) gets its weight and
/// bias gradients from a GEMM and a column sum: nn.linear_grad would also
/// compute (and hold) the input's.
void splitLinearGradsWithoutInputGrad(Block &body);

/// The cross-entropy of a loss term and its gradient as one op, computed
/// where the loss is: one pass over the logits instead of two (the
/// gradient kernel recomputes each row's softmax). Needs the cotangent
/// there: the backward's own seed, copied before the loss when it reads no
/// forward value.
void fuseCrossEntropyWithGrad(Block &body);

/// A residual nn.add whose sum an nn.layer_norm of the same unit and phase
/// normalises, as one nn.add_layer_norm: each input read once, the sum and
/// the normalised output written once. Other readers of the sum (the next
/// residual add, nn.layer_norm_grad) read the fused op's. Only same-typed
/// operands (no broadcasting).
void fuseAddLayerNorm(Block &body);

/// The backward half of the same residual structure: an nn.add of an
/// nn.layer_norm_grad's input gradient (its only reader) and another
/// gradient of the same type (the residual stream's), of the same unit and
/// phase, as one nn.add_layer_norm_grad that writes the sum instead of the
/// norm's input gradient. Placed at the norm's gradient when the addend is
/// computed before it, else at the add.
void fuseAddLayerNormGrad(Block &body);

/// A linear layer followed by a tanh nn.gelu of its result (same unit and
/// phase) as one nn.linear_gelu (its `pre` read where the linear's result
/// was), and an nn.linear_grad whose input gradient only a tanh
/// nn.gelu_grad reads (through at most one reshape) as one
/// nn.linear_gelu_grad: on CUDA, cuBLASLt's GELU_AUX_BIAS and DGELU
/// epilogues instead of separate GELU kernels.
void fuseBiasGelu(Block &body);

} // namespace mlir::fsdp

#endif // FSDP_LIB_DIALECT_FSDP_TRANSFORMS_STEPFUSIONS_H
