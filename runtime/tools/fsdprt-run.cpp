//===- fsdprt-run.cpp - train a step library on N ranks, without LLVM -----===//
//
//   fsdprt-run step.so --nproc 2 --steps 100 --data corpus.txt
//
// The runner for training hosts: it takes the step libraries fsdp-compile
// makes on a build host and behaves exactly as fsdp-run (the same options,
// launcher, data, checkpoints, metrics and traces: runtime/runner/Runner.h),
// but links only the runtime.
//
//===----------------------------------------------------------------------===//

#include "runner/Runner.h"
#include "runner/StepLibrary.h"

#include <stdexcept>

int main(int argc, char **argv) {
  return fsdp::driver::runMain(
      "fsdprt-run", argc, argv, [](const std::string &path) {
        if (!fsdp::driver::isStepLibraryPath(path))
          throw std::runtime_error(
              "'" + path + "' is not a step library (.so): fsdprt-run runs "
              "what fsdp-compile makes; compile it with `fsdp-compile " +
              path + " -o step.so`, or run a .mlir with fsdp-run");
        return fsdp::driver::loadStepLibrary(path);
      });
}
