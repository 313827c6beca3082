//===- Runner.h - fsdp-run and fsdprt-run around the step ------*- C++ -*-===//
//
// Everything a runner does besides obtaining the step: the command line,
// the pre-launch report, launching local ranks, and one rank's training
// (runtime set-up, initialisation or loading, data, the step loop, metrics,
// checkpoints, traces). fsdp-run (JIT, links LLVM) and fsdprt-run (step
// libraries only, no LLVM) differ only in the loader they pass.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_RUNNER_H
#define FSDP_DRIVER_RUNNER_H

#include "runner/RunOptions.h"
#include "runner/StepProgram.h"

namespace fsdp {
namespace driver {

/// Parses the command line, loads the program with `load`, prints its
/// report, then launches --nproc local ranks (re-executing this program) or
/// trains as one rank of the job its environment describes. Returns the
/// process exit status; errors are printed as "<tool>: [rank R: ]error: ...".
int runMain(const std::string &tool, int argc, char **argv,
            const StepProgramLoader &load);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_RUNNER_H
