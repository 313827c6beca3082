//===- InitAllDialects.h - Every dialect of fsdp-mlir -----------*- C++ -*-===//
//
// The dialects our tools and runners load: ours plus the upstream ones a
// train step uses at any stage, from the model to the LLVM dialect (as
// upstream's mlir/InitAllDialects.h). A runner that only translates a
// lowered step needs this, not the passes (InitAllPasses.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INITALLDIALECTS_H
#define FSDP_INITALLDIALECTS_H

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"
#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectRegistry.h"

namespace mlir {
namespace fsdp {

inline void registerAllFSDPDialects(DialectRegistry &registry) {
  registry.insert<nn::NNDialect, FSDPDialect, rt::RTDialect, func::FuncDialect,
                  arith::ArithDialect, LLVM::LLVMDialect>();
  func::registerInlinerExtension(registry);
}

} // namespace fsdp
} // namespace mlir

#endif // FSDP_INITALLDIALECTS_H
