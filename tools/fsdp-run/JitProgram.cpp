//===- JitProgram.cpp - a lowered train step, parsed and JIT-compiled -----===//

#include "JitProgram.h"

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"
#include "fsdp/Dialect/RT/IR/RTOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <stdexcept>

using namespace mlir;

namespace fsdp {

struct JitProgram::State {
  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::unique_ptr<ExecutionEngine> engine;
  driver::StepFn step = nullptr;
};

JitProgram::JitProgram() : state_(std::make_unique<State>()) {}
JitProgram::~JitProgram() = default;

std::unique_ptr<JitProgram> JitProgram::load(const std::string &path) {
  std::unique_ptr<JitProgram> jit(new JitProgram());
  MLIRContext &context = jit->state_->context;
  DialectRegistry registry;
  // Every dialect fsdp-opt prints, so that unlowered input parses and gets
  // a precise error instead of "unregistered dialect".
  registry.insert<nn::NNDialect, mlir::fsdp::FSDPDialect, rt::RTDialect,
                  func::FuncDialect, arith::ArithDialect, LLVM::LLVMDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  context.appendDialectRegistry(registry);

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  std::string error;
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(path);
  if (!file) {
    llvm::errs() << "fsdp-run: cannot read '" << path
                 << "': " << file.getError().message() << "\n";
    return nullptr;
  }
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  jit->state_->module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  ModuleOp module = jit->state_->module.get();
  if (!module)
    return nullptr;

  auto description = module->getAttrOfType<StringAttr>("fsdp.program");
  WalkResult unlowered = module.walk([&](Operation *op) {
    if (op == module.getOperation() || isa<LLVM::LLVMDialect>(op->getDialect()))
      return WalkResult::advance();
    op->emitError("fsdp-run needs a lowered program, found '")
        << op->getName()
        << "'; compile it with fsdp-opt --fsdp-pipeline=\"... lower=true\"";
    return WalkResult::interrupt();
  });
  if (unlowered.wasInterrupted())
    return nullptr;
  if (!description) {
    module.emitError("fsdp-run: the module has no fsdp.program description; "
                     "it was not produced by convert-fsdp-to-rt");
    return nullptr;
  }
  try {
    jit->program_ = driver::parseProgram(description.getValue().str());
  } catch (const std::exception &e) {
    module.emitError("fsdp-run: ") << e.what();
    return nullptr;
  }
  if (!module.lookupSymbol<LLVM::LLVMFuncOp>(jit->program_.entry)) {
    module.emitError("fsdp-run: the step '")
        << jit->program_.entry << "' is not in the module";
    return nullptr;
  }
  // Translation to LLVM IR needs nothing but LLVM ops and attributes.
  module->removeAttr("fsdp.program");
  return jit;
}

driver::StepFn JitProgram::compile() {
  if (state_->step)
    return state_->step;
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions options;
  // The step is a straight line of runtime calls: fast code generation
  // matters more than optimisation.
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::None;
  auto engine = ExecutionEngine::create(state_->module.get(), options);
  if (!engine) {
    llvm::errs() << "fsdp-run: JIT compilation failed: "
                 << llvm::toString(engine.takeError()) << "\n";
    return nullptr;
  }
  state_->engine = std::move(*engine);
  auto address = state_->engine->lookup(program_.entry);
  if (!address) {
    llvm::errs() << "fsdp-run: " << llvm::toString(address.takeError())
                 << "\n";
    return nullptr;
  }
  state_->step = reinterpret_cast<driver::StepFn>(*address);
  return state_->step;
}

} // namespace fsdp
