//===- KernelCalls.cpp - the runtime call of each compute op -------------===//
//
// One emitter per op kind: which fsdprt_* entry point computes it, with the
// shapes the kernel wants (m/k/n of a GEMM, rows × d of a normalisation,
// ...). The emitters live in one file per kernel family (KernelCalls.h);
// this file gathers them into the one table the lowering dispatches
// through and the completeness test reads.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

using namespace mlir;
using namespace mlir::fsdp;

/// Every family's emitters, gathered once.
static const KernelEmitters &kernelEmitters() {
  static const KernelEmitters table = [] {
    KernelEmitters k;
    addLinearKernels(k);
    addPointwiseKernels(k);
    addNormKernels(k);
    addConvKernels(k);
    addAttentionKernels(k);
    addLayoutKernels(k);
    addLossKernels(k);
    addRoutingKernels(k);
    addCoreKernels(k);
    addOptimizerKernels(k);
    return k;
  }();
  return table;
}

bool fsdp::hasKernelEmitter(OperationName name) {
  return kernelEmitters().lookup(name) != nullptr;
}

LogicalResult fsdp::emitKernel(CallBuilder &calls, Operation *op) {
  if (const KernelEmitter *emit = kernelEmitters().lookup(op->getName()))
    return (*emit)(calls, op);
  return op->emitOpError("has no runtime lowering in convert-fsdp-to-rt yet");
}
