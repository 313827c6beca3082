//===- LoweredStep.cpp - A lowered training step as runners need it -------===//

#include "fsdp/Target/LoweredStep.h"

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/RT/IR/RTOps.h"
#include "fsdp/InitAllDialects.h"
#include "fsdp/rt/StepAbi.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/JSON.h"

namespace mlir {
namespace fsdp {
namespace {

/// The arity of fsdprt_step_fn (the runtime's StepAbi.def, checked against
/// the header at compile time); every handle and scalar is an i64 once
/// lowered to LLVM.
constexpr unsigned kStepArgs = rt::kNumStepArgs;

LogicalResult verifyStepSignature(LLVM::LLVMFuncOp step, StringRef tool) {
  LLVM::LLVMFunctionType type = step.getFunctionType();
  bool ok = type.getNumParams() == kStepArgs && !type.isVarArg() &&
            type.getReturnType().isInteger(32) &&
            llvm::all_of(type.getParams(),
                         [](Type t) { return t.isInteger(64); });
  if (ok)
    return success();
  return step.emitError() << tool << ": the step '" << step.getSymName()
                          << "' has type " << type << ", not the step ABI's i32("
                          << kStepArgs << " x i64)";
}

} // namespace

void registerLoweredStepDialects(DialectRegistry &registry) {
  registerAllFSDPDialects(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
}

FailureOr<LoweredStep> verifyLoweredStep(ModuleOp module, StringRef tool) {
  WalkResult unlowered = module.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == module.getOperation() || isa<LLVM::LLVMDialect>(op->getDialect()))
      return WalkResult::advance();
    op->emitError() << tool << " needs a lowered program, found '"
                    << op->getName()
                    << "'; compile it with fsdp-opt --fsdp-pipeline=\"... "
                       "lower=true\"";
    return WalkResult::interrupt();
  });
  if (unlowered.wasInterrupted())
    return failure();
  auto description = module->getAttrOfType<StringAttr>(kProgramAttr);
  if (!description)
    return module.emitError()
           << tool << ": the module has no fsdp.program description; it was "
           << "not produced by convert-fsdp-to-rt";
  LoweredStep step{description.getValue().str(), ""};
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(step.description);
  if (!json)
    return module.emitError() << tool << ": fsdp.program is not JSON: "
                              << llvm::toString(json.takeError());
  const llvm::json::Object *root = json->getAsObject();
  std::optional<StringRef> entry =
      root ? root->getString("entry") : std::nullopt;
  if (!entry)
    return module.emitError()
           << tool << ": fsdp.program names no entry (the step's symbol)";
  step.entry = entry->str();
  auto func = module.lookupSymbol<LLVM::LLVMFuncOp>(step.entry);
  if (!func || func.isExternal())
    return module.emitError()
           << tool << ": the step '" << step.entry << "' is not in the module";
  if (failed(verifyStepSignature(func, tool)))
    return failure();
  return step;
}

std::unique_ptr<llvm::Module> translateLoweredStep(ModuleOp module,
                                                   llvm::LLVMContext &context) {
  Attribute description = module->removeAttr(kProgramAttr);
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, context, "fsdp-step");
  if (description)
    module->setAttr(kProgramAttr, description);
  return llvmModule;
}

} // namespace fsdp
} // namespace mlir
