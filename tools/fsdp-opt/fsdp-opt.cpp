//===- fsdp-opt.cpp - the fsdp-mlir optimizer driver -----------------------===//
//
// mlir-opt with our dialects and passes, plus only the upstream dialects and
// passes the pipeline uses. Every mlir-opt flag works the same way.
//
//===----------------------------------------------------------------------===//

#include "fsdp/InitAllDialects.h"
#include "fsdp/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

/// MLIR 22's parser dereferences a null bit width on `array<index ...>`
/// (llvm/llvm-project#179045, fixed after 22.1). Reject such input with a
/// diagnostic before it reaches the parser, so fsdp-opt never crashes on it.
static LogicalResult rejectKnownParserCrashes(const llvm::MemoryBuffer &input) {
  llvm::Regex indexArray("array[[:space:]]*<[[:space:]]*index([^_[:alnum:]]|$)");
  SmallVector<StringRef> match;
  StringRef text = input.getBuffer();
  if (!indexArray.match(text, &match))
    return success();
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(text, input.getBufferIdentifier()),
      llvm::SMLoc());
  sourceMgr.PrintMessage(llvm::SMLoc::getFromPointer(match.front().data()),
                         llvm::SourceMgr::DK_Error,
                         "dense arrays of 'index' are not supported; use "
                         "array<i64: ...>");
  return failure();
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  fsdp::hideOptionsRegisteredSoFar({"help", "help-list", "version"});
  DialectRegistry registry;
  fsdp::registerAllFSDPDialects(registry);
  fsdp::registerAllFSDPPasses();

  // MlirOptMain(argc, argv, ...) reads the input itself; this is its body
  // with the input screened before parsing.
  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "fsdp-mlir optimizer driver\n", registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(inputFilename, &error);
  if (!input) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (failed(rejectKnownParserCrashes(*input)))
    return 1;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << error << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
