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
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"

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

/// Hides from --help every command-line option registered so far except
/// `keep`: called first thing in main, that is the hundreds of code
/// generation flags LLVM's backends register when libLLVM loads (hexagon,
/// amdgpu, ...), while MLIR's and the passes' options, registered later,
/// stay listed. Hidden options still work.
inline void hideOptionsRegisteredSoFar(const llvm::StringSet<> &keep) {
  for (auto &entry : llvm::cl::getRegisteredOptions())
    if (!keep.contains(entry.first))
      entry.second->setHiddenFlag(llvm::cl::Hidden);
}

} // namespace fsdp
} // namespace mlir

#endif // FSDP_INITALL_H
