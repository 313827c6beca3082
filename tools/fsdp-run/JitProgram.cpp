//===- JitProgram.cpp - a lowered train step, parsed and JIT-compiled -----===//

#include "JitProgram.h"

#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Target/LoweredStep.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
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
  mlir::fsdp::registerLoweredStepDialects(registry);
  context.appendDialectRegistry(registry);
  // A diagnostic names the op and its location; printing the op would
  // print a whole model.
  context.printOpOnDiagnostic(false);

  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
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
  FailureOr<mlir::fsdp::LoweredStep> step =
      mlir::fsdp::verifyLoweredStep(module, "fsdp-run");
  if (failed(step))
    return nullptr;
  try {
    jit->program_ = driver::parseProgram(step->description);
  } catch (const std::exception &e) {
    module.emitError("fsdp-run: ") << e.what();
    return nullptr;
  }
  // Translation to LLVM IR needs nothing but LLVM ops and attributes.
  module->removeAttr(mlir::fsdp::kProgramAttr);
  return jit;
}

driver::StepFn JitProgram::step() {
  if (state_->step)
    return state_->step;
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  ExecutionEngineOptions options;
  // The step is a straight line of runtime calls: fast code generation
  // matters more than optimisation (as in fsdp-compile's default).
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::None;
  auto engine = ExecutionEngine::create(state_->module.get(), options);
  if (!engine)
    throw std::runtime_error("JIT compilation failed: " +
                             llvm::toString(engine.takeError()));
  state_->engine = std::move(*engine);
  auto address = state_->engine->lookup(program_.entry);
  if (!address)
    throw std::runtime_error("JIT compilation failed: " +
                             llvm::toString(address.takeError()));
  state_->step = reinterpret_cast<driver::StepFn>(*address);
  return state_->step;
}

} // namespace fsdp
