//===- LoweredStep.h - A lowered training step as runners need it -*- C++ -*-===//
//
// The module convert-rt-to-llvm leaves: LLVM dialect only, a step function
// with the C ABI of fsdp/rt/StepAbi.h, and the `fsdp.program` description.
// fsdp-run JIT-compiles it; fsdp-compile turns it into a step library. Both
// check and translate it here, once.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_TARGET_LOWEREDSTEP_H
#define FSDP_TARGET_LOWEREDSTEP_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <memory>
#include <string>

namespace llvm {
class LLVMContext;
class Module;
} // namespace llvm

namespace mlir {
namespace fsdp {

struct LoweredStep {
  std::string description; // the fsdp.program JSON
  std::string entry;       // symbol of the step function
};

/// Every dialect fsdp-opt knows (so that unlowered input parses and gets a
/// precise error instead of "unregistered dialect") and the LLVM IR
/// translations of the lowered step.
void registerLoweredStepDialects(DialectRegistry &registry);

/// Checks that `module` is a lowered step: LLVM dialect ops only, an
/// `fsdp.program` description whose "entry" names an `llvm.func` with the
/// step's C ABI (fsdprt_step_fn). Emits one diagnostic, naming `tool`, on
/// the offending op and fails otherwise.
FailureOr<LoweredStep> verifyLoweredStep(ModuleOp module, StringRef tool);

/// Translates a verified lowered step to LLVM IR, without the description
/// attribute (which is not LLVM); null after a diagnostic.
std::unique_ptr<llvm::Module> translateLoweredStep(ModuleOp module,
                                                   llvm::LLVMContext &context);

} // namespace fsdp
} // namespace mlir

#endif // FSDP_TARGET_LOWEREDSTEP_H
