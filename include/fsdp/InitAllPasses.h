//===- InitAllPasses.h - Every pass of fsdp-mlir ----------------*- C++ -*-===//
//
// What fsdp-opt and fsdp-compile register: our passes, conversions and
// pipeline plus the upstream passes the pipeline uses (as upstream's
// mlir/InitAllPasses.h), and the command-line hygiene around them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_INITALLPASSES_H
#define FSDP_INITALLPASSES_H

#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Pipelines/Pipelines.h"

#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CommandLine.h"

namespace mlir {
namespace fsdp {

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

#endif // FSDP_INITALLPASSES_H
