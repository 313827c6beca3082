//===- InitAll.h - Every dialect and pass of fsdp-mlir ----------*- C++ -*-===//
//
// What fsdp-opt and fsdp-compile register: our dialects and passes plus the
// upstream ones the pipeline uses (as upstream's mlir/InitAllPasses.h).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INITALL_H
#define FSDP_INITALL_H

#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/FSDP/Transforms/Pipelines.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"
#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir {
namespace fsdp {

inline void registerAllFSDPDialects(DialectRegistry &registry) {
  registry.insert<nn::NNDialect, FSDPDialect, rt::RTDialect, func::FuncDialect,
                  arith::ArithDialect, LLVM::LLVMDialect>();
  func::registerInlinerExtension(registry);
}

inline void registerAllFSDPPasses() {
  registerCanonicalizerPass();
  registerCSEPass();
  registerInlinerPass();
  registerSymbolDCEPass();
  registerFSDPPasses();
  registerFSDPConversionPasses();
  registerFSDPPipelines();
}

} // namespace fsdp
} // namespace mlir

#endif // FSDP_INITALL_H
