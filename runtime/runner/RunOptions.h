//===- RunOptions.h - The command line of fsdp-run and fsdprt-run -*- C++ -*-===//
//
// Both runners take the same options, parsed here without LLVM so that the
// runner on a training host (fsdprt-run) and the JIT runner (fsdp-run) can
// never drift apart.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_RUNOPTIONS_H
#define FSDP_DRIVER_RUNOPTIONS_H

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

struct RunOptions {
  std::string input;        // lowered .mlir (fsdp-run) or step library .so
  int nproc = 0;            // launch this many local ranks; 0: be one rank
  int64_t steps = 10;       // the run ends after this many optimizer steps
  int64_t batchSize = 0;    // global; 0: what the program was compiled for
  int64_t microBatches = 0; // 0: what the program was compiled for
  std::string data = "synthetic";
  uint64_t seed = 0;
  std::string load, save, saveFormat = "full", metrics, trace;
  std::string resume; // "latest": the newest checkpoint in `save`, if any
  int64_t saveEvery = 0;
  int64_t traceSteps = 5; // steps recorded in the trace
  int64_t traceSkip = 0;  // steps run before the trace starts
  std::string backend = "cpu";
  int threads = 0;        // per rank; 0: cores / local ranks
  bool cudaGraphs = true; // capture the training step once, replay it
  bool allowTf32 = false; // f32 GEMMs may round their inputs to TF32
  // The learning-rate schedule's fields that replace the program's.
  std::optional<std::string> lrSchedule;
  std::optional<int64_t> warmupSteps, decaySteps;
  std::optional<double> minLrRatio;
  // GradScaler settings that replace the program's.
  std::optional<double> lossScaleInit;
  std::optional<int64_t> lossScaleGrowthInterval;
  // Evaluation beside training: an eval program of the same model and mesh
  // run on --eval-batches batches of --eval-data every --eval-every steps.
  std::string evalProgram, evalData;
  int64_t evalEvery = 0, evalBatches = 10;
  // Generation (an eval program with "logits"): new tokens, prompt, sampler.
  int64_t generate = 0;
  std::optional<std::string> prompt, promptIds;
  double temperature = 1.0;
  int64_t topK = 0;
  int64_t numSamples = 1;
  bool quiet = false;
  bool help = false;
};

/// A command line that cannot be used; the message names the option.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses `--name value`, `--name=value` (one dash works too) and the
/// positional input; throws UsageError for unknown options, missing or
/// malformed values, and a missing or repeated input (unless --help).
RunOptions parseRunOptions(const std::vector<std::string> &args);

/// The option list printed by --help.
std::string runOptionsHelp(const std::string &tool);

/// `args` without --nproc and its value: the ranks' command line.
std::vector<std::string> withoutNproc(const std::vector<std::string> &args);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_RUNOPTIONS_H
