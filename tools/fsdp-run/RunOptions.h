//===- RunOptions.h - fsdp-run's command line -------------------*- C++ -*-===//

#ifndef FSDP_TOOLS_FSDP_RUN_RUNOPTIONS_H
#define FSDP_TOOLS_FSDP_RUN_RUNOPTIONS_H

#include <cstdint>
#include <string>

namespace fsdp {

struct RunOptions {
  std::string input;
  int64_t steps = 10;       // the run ends after this many optimizer steps
  int64_t batchSize = 0;    // global; 0: what the program was compiled for
  int64_t microBatches = 0; // 0: what the program was compiled for
  std::string data = "synthetic";
  uint64_t seed = 0;
  std::string load, save, saveFormat = "full", metrics, trace;
  int64_t saveEvery = 0;
  int64_t traceSteps = 5; // steps recorded in the trace (from the first)
  std::string backend = "cpu";
  int threads = 0; // per rank; 0: cores / local ranks
  bool quiet = false;
};

class JitProgram;

/// Trains as one rank of the job described by the launcher's environment.
/// Returns the process exit status; prints errors naming the rank.
int runRank(const RunOptions &options, JitProgram &jit);

} // namespace fsdp

#endif
