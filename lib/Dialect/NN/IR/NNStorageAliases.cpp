//===- NNStorageAliases.cpp - nn ops whose results reuse operand storage --===//
//
// StorageAliasOpInterface for the nn ops that alias: a reshape (and a
// stop_gradient, a custom_vjp or an id_range) renames its input, batch norm
// updates its running statistics in place, and the logits' gradient may
// overwrite logits nothing reads afterwards. The analyses follow them (fsdp's
// Analysis/StorageAlias.h).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"

using namespace mlir;
using namespace mlir::nn;

// A reshape is its input's storage under another shape: it runs nothing.
OpOperand *ReshapeOp::getReusedOperand(unsigned) { return &getInputMutable(); }
bool ReshapeOp::isStorageRename() { return true; }

// detach() is its operand's storage, unchanged.
OpOperand *StopGradientOp::getReusedOperand(unsigned) {
  return &getInputMutable();
}
bool StopGradientOp::isStorageRename() { return true; }

// A custom_vjp's results are its outputs, unchanged.
OpOperand *CustomVJPOp::getReusedOperand(unsigned resultIndex) {
  return &getOutputsMutable()[resultIndex];
}
bool CustomVJPOp::isStorageRename() { return true; }

// id_range states the ids' range: its result is its operand, which the
// step checks where the op stands.
OpOperand *IdRangeOp::getReusedOperand(unsigned) { return &getInputMutable(); }
bool IdRangeOp::isStorageRename() { return true; }
bool IdRangeOp::checksRenamedStorage() { return true; }

// The new running statistics are updated in place in training mode (as
// F.batch_norm does) and unchanged in eval mode; the output is its own.
OpOperand *BatchNormOp::getReusedOperand(unsigned resultIndex) {
  if (resultIndex == 1)
    return &getRunningMeanMutable();
  if (resultIndex == 2)
    return &getRunningVarMutable();
  return nullptr;
}

// The logits' gradient overwrites the logits where nothing reads them
// afterwards (a language model's head, whose backward reads its input and
// weight): the kernels read a row before writing it. Saves a logits-sized
// buffer at the step's peak.
OpOperand *CrossEntropyGradOp::getReusedOperand(unsigned) {
  return getResult().getType() == getLogits().getType() ? &getLogitsMutable()
                                                        : nullptr;
}
bool CrossEntropyGradOp::reusesOnlyDeadOperand(unsigned) { return true; }

// The fused loss and gradient: its gradient (result 1), as above.
OpOperand *CrossEntropyWithGradOp::getReusedOperand(unsigned resultIndex) {
  if (resultIndex != 1 || getLogitsGrad().getType() != getLogits().getType())
    return nullptr;
  return &getLogitsMutable();
}
bool CrossEntropyWithGradOp::reusesOnlyDeadOperand(unsigned) { return true; }
