//===- fsdp-run.cpp - train a lowered FSDP program on N ranks -------------===//
//
//   fsdp-run model.lowered.mlir --nproc 2 --steps 100 --data corpus.txt
//   fsdp-run step.so --nproc 2 ...            (a library from fsdp-compile)
//
// With --nproc N it launches N local ranks torchrun-style (RANK, WORLD_SIZE,
// MASTER_ADDR, ...) after printing the pre-launch report; without it, it
// is one rank of a job started by torchrun-style variables, mpirun or srun.
// A .mlir program is JIT-compiled on each rank; everything else is the
// runtime's runner, shared with the LLVM-free fsdprt-run.
//
//===----------------------------------------------------------------------===//

#include "JitProgram.h"

#include "runner/Runner.h"
#include "runner/StepLibrary.h"

#include "llvm/Support/InitLLVM.h"

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  return fsdp::driver::runMain(
      "fsdp-run", argc, argv,
      [](const std::string &path)
          -> std::unique_ptr<fsdp::driver::StepProgram> {
        if (fsdp::driver::isStepLibraryPath(path))
          return fsdp::driver::loadStepLibrary(path);
        return fsdp::JitProgram::load(path);
      });
}
