//===- fsdp-compile.cpp - a lowered step → a step library (.so) -----------===//
//
//   fsdp-compile step.mlir -o step.so
//   fsdp-compile model.mlir --fsdp-pipeline="world-size=8 ... lower=true" \
//     -o step.so
//
// Compiles once, on a build host, what fsdp-run would JIT-compile on every
// rank: LLVM code generation in process, then the system's C compiler
// driver links a shared object that exports the step, the program
// description and the ABI stamp (fsdp/rt/StepAbi.h). fsdprt-run, which
// needs no LLVM, trains it on the training hosts. Any fsdp-opt pass or
// pipeline flag may come first, so a model compiles in one command.
//
//===----------------------------------------------------------------------===//

#include "runner/Program.h"
#include "fsdp/InitAllPasses.h"
#include "fsdp/Target/LoweredStep.h"
#include "fsdp/rt/StepAbi.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"

#include <cstdlib>

using namespace mlir;
namespace cl = llvm::cl;

static cl::opt<std::string> inputFilename(cl::Positional, cl::init("-"),
                                          cl::desc("<lowered step or model>"));
static cl::opt<std::string> outputFilename("o", cl::init("step.so"),
                                           cl::value_desc("file"),
                                           cl::desc("Step library to write"));
// The step is a straight line of runtime calls: -O2 buys nothing measurable
// per step and costs compile time (docs/Runtime.md, "Step libraries").
static cl::opt<unsigned> optLevel("O", cl::Prefix, cl::init(0),
                                  cl::desc("LLVM optimisation level (0-3)"));
static cl::opt<std::string> targetTriple(
    "mtriple", cl::desc("Target triple (default: this host)"));
static cl::opt<std::string> linker(
    "linker", cl::desc("C compiler driver that links the shared object "
                       "(default: $CC, else cc, clang or gcc on PATH)"));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "fsdp-compile: error: " << message << "\n";
  return 1;
}

/// The step library's own symbols besides the step (StepAbi.h).
static LogicalResult addLibrarySymbols(llvm::Module &module,
                                       const std::string &description) {
  llvm::LLVMContext &context = module.getContext();
  for (const char *name :
       {FSDPRT_STEP_ABI_STAMP_SYMBOL, FSDPRT_STEP_PROGRAM_SYMBOL})
    if (module.getNamedValue(name))
      return failure();
  uint32_t stamp[] = {FSDPRT_ABI_VERSION, FSDPRT_STEP_ABI_VERSION};
  llvm::Constant *stampInit = llvm::ConstantDataArray::get(context, stamp);
  new llvm::GlobalVariable(module, stampInit->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, stampInit,
                           FSDPRT_STEP_ABI_STAMP_SYMBOL);
  llvm::Constant *text =
      llvm::ConstantDataArray::getString(context, description, true);
  new llvm::GlobalVariable(module, text->getType(), /*isConstant=*/true,
                           llvm::GlobalValue::ExternalLinkage, text,
                           FSDPRT_STEP_PROGRAM_SYMBOL);
  return success();
}

static std::string findLinker() {
  if (!linker.empty())
    return linker;
  std::vector<std::string> candidates;
  if (const char *cc = std::getenv("CC"))
    candidates.push_back(cc);
  candidates.insert(candidates.end(), {"cc", "clang", "gcc"});
  for (const std::string &name : candidates)
    if (auto path = llvm::sys::findProgramByName(name))
      return *path;
  return "";
}

/// Code generation for `module` into an object file at `objectPath`.
static int emitObject(llvm::Module &module, const std::string &objectPath) {
  std::string triple =
      targetTriple.empty() ? llvm::sys::getDefaultTargetTriple() : targetTriple;
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(llvm::Triple(triple), error);
  if (!target)
    return fail("cannot emit code for target '" + triple + "': " + error);
  bool host = targetTriple.empty();
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      llvm::Triple(triple), host ? llvm::sys::getHostCPUName() : "generic", "",
      llvm::TargetOptions(), llvm::Reloc::PIC_, std::nullopt,
      optLevel == 0 ? llvm::CodeGenOptLevel::None
                    : llvm::CodeGenOptLevel::Default));
  if (!machine)
    return fail("cannot create a target machine for '" + triple + "'");
  module.setTargetTriple(llvm::Triple(triple));
  module.setDataLayout(machine->createDataLayout());
  if (optLevel > 0)
    if (llvm::Error err = makeOptimizingTransformer(optLevel, 0,
                                                    machine.get())(&module))
      return fail("optimising the step: " + llvm::toString(std::move(err)));

  std::error_code ec;
  llvm::raw_fd_ostream object(objectPath, ec, llvm::sys::fs::OF_None);
  if (ec)
    return fail("cannot write '" + objectPath + "': " + ec.message());
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, object, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return fail("target '" + triple + "' cannot emit object files");
  codegen.run(module);
  return 0;
}

static int linkSharedObject(const std::string &objectPath) {
  std::string driver = findLinker();
  if (driver.empty())
    return fail("no C compiler driver to link with (cc, clang or gcc on "
                "PATH, $CC or --linker)");
  // The fsdprt_* references stay undefined: they bind at dlopen to the
  // runtime the runner already loaded.
  llvm::SmallVector<llvm::StringRef> args = {
      driver, "-shared", "-o", outputFilename, objectPath,
      "-Wl,-z,noexecstack"};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(driver, args, std::nullopt, {}, 0, 0,
                                         &message);
  if (status != 0)
    return fail("linking '" + outputFilename + "' with " + driver +
                " failed" + (message.empty() ? "" : ": " + message) +
                " (exit status " + llvm::Twine(status) + ")");
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // --help: this tool's options and the passes (registered below), not
  // every LLVM backend's flags.
  mlir::fsdp::hideOptionsRegisteredSoFar(
      {"o", "O", "mtriple", "linker", "help", "help-list", "version"});
  DialectRegistry registry;
  mlir::fsdp::registerLoweredStepDialects(registry);
  mlir::fsdp::registerAllFSDPPasses();
  PassPipelineCLParser passPipeline(
      "", "Passes run before compiling (e.g. --fsdp-pipeline=\"... "
          "lower=true\" for a model)");
  cl::ParseCommandLineOptions(
      argc, argv, "fsdp-compile: a lowered training step -> step library\n");

  MLIRContext context(registry);
  // A diagnostic names the op and its location; printing the op would
  // print a whole model.
  context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(inputFilename);
  if (!file)
    return fail("cannot read '" + inputFilename +
                "': " + file.getError().message());
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return 1;
  if (passPipeline.hasAnyOccurrences()) {
    PassManager pm(&context);
    auto errorHandler = [&](const llvm::Twine &message) {
      return emitError(UnknownLoc::get(&context)) << message;
    };
    if (failed(passPipeline.addToPipeline(pm, errorHandler)) ||
        failed(pm.run(*module)))
      return 1;
  }

  FailureOr<mlir::fsdp::LoweredStep> step =
      mlir::fsdp::verifyLoweredStep(*module, "fsdp-compile");
  if (failed(step))
    return 1;
  try {
    // The runner parses it too; a description it would refuse is refused
    // here, on the build host.
    ::fsdp::driver::parseProgram(step->description);
  } catch (const std::exception &e) {
    module->emitError("fsdp-compile: ") << e.what();
    return 1;
  }

  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule =
      mlir::fsdp::translateLoweredStep(*module, llvmContext);
  if (!llvmModule)
    return 1;
  if (failed(addLibrarySymbols(*llvmModule, step->description)))
    return fail("the module already defines '" FSDPRT_STEP_ABI_STAMP_SYMBOL
                "' or '" FSDPRT_STEP_PROGRAM_SYMBOL "'");

  llvm::SmallString<128> objectPath;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("fsdp-step", "o", objectPath))
    return fail("cannot create a temporary object file: " + ec.message());
  llvm::FileRemover removeObject(objectPath);
  if (int status = emitObject(*llvmModule, objectPath.str().str()))
    return status;
  return linkSharedObject(objectPath.str().str());
}
