//===- StorageAliases.cpp - fsdp ops whose results reuse operand storage --===//
//
// StorageAliasOpInterface for the fsdp ops that alias: a view is its flat
// parameter's storage, and the optimizer steps update their parameter and
// state in place. The analyses follow them (Analysis/StorageAlias.h).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

using namespace mlir;
using namespace mlir::fsdp;

// A view is its flat parameter's storage at an offset: it runs nothing.
OpOperand *ViewOp::getReusedOperand(unsigned) { return &getFlatMutable(); }
bool ViewOp::isStorageRename() { return true; }

// (param, momentum_buffer) are updated in place.
OpOperand *SGDStepOp::getReusedOperand(unsigned resultIndex) {
  return resultIndex == 0 ? &getParamMutable() : &getMomentumBufferMutable()[0];
}

// (param, exp_avg, exp_avg_sq) are updated in place.
OpOperand *AdamWStepOp::getReusedOperand(unsigned resultIndex) {
  OpOperand *updated[] = {&getParamMutable(), &getExpAvgMutable(),
                          &getExpAvgSqMutable()};
  return updated[resultIndex];
}

// (param, exp_avg) are updated in place.
OpOperand *LionStepOp::getReusedOperand(unsigned resultIndex) {
  return resultIndex == 0 ? &getParamMutable() : &getExpAvgMutable();
}

// (param, state) are updated in place.
OpOperand *AdafactorStepOp::getReusedOperand(unsigned resultIndex) {
  return resultIndex == 0 ? &getParamMutable() : &getStateMutable();
}

// The state is updated in place; update_sq is new.
OpOperand *AdafactorFactorOp::getReusedOperand(unsigned resultIndex) {
  return resultIndex == 0 ? &getStateMutable() : nullptr;
}

OpOperand *AdafactorApplyOp::getReusedOperand(unsigned) {
  return &getParamMutable();
}
