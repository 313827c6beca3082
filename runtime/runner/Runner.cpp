//===- Runner.cpp - fsdp-run and fsdprt-run around the step ---------------===//
//
// The command line and one rank's loop: the data per step, the progress
// lines and metrics file, checkpoints every --save-every steps, the trace;
// each step runs in the Trainer (Trainer.h: set-up, load, the step itself),
// which the in-process Python session drives too.
//
//===----------------------------------------------------------------------===//

#include "runner/Runner.h"

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/fsdprt.h"
#include "runner/Checkpoint.h"
#include "runner/Data.h"
#include "runner/ErrorFile.h"
#include "runner/Generate.h"
#include "runner/KvCache.h"
#include "runner/Launcher.h"
#include "runner/Metrics.h"
#include "runner/RankRuntime.h"
#include "runner/Trace.h"
#include "runner/Trainer.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace {

void writeTrace(RankRuntime &rt, const RunOptions &o, int rank, int worldSize) {
  std::string part = o.trace + ".rank" + std::to_string(rank);
  check(fsdprt_trace_write(rt.ctx, part.c_str(), rank), "writing the trace");
  check(fsdprt_barrier(rt.ctx, rt.streams[0], rt.world), "barrier");
  check(fsdprt_context_synchronize(rt.ctx), "barrier");
  if (rank != 0)
    return;
  std::vector<std::string> parts;
  for (int r = 0; r < worldSize; ++r)
    parts.push_back(o.trace + ".rank" + std::to_string(r));
  mergeChromeTraces(parts, o.trace);
  for (const std::string &f : parts)
    std::remove(f.c_str());
}

void train(const RunOptions &o, StepProgram &program, StepProgram *evalProgram,
           const rt::LaunchInfo &launch) {
  Trainer trainer(o, program, evalProgram, launch);
  const Program &p = trainer.program();
  RankRuntime &rt = trainer.runtime();
  int rank = launch.rank;
  DataSource data(o.data, p, o.seed);
  std::unique_ptr<MetricsWriter> metrics;
  if (rank == 0 && !o.metrics.empty())
    metrics = std::make_unique<MetricsWriter>(
        o.metrics, o.resume.empty() ? -1 : trainer.stepCount());

  // An eval program evaluates --steps batches from the data's start,
  // whatever step the loaded checkpoint was saved at.
  bool eval = p.mode == "eval";
  if (eval)
    trainer.setStepCount(0);
  double evalLossSum = 0;
  std::vector<std::vector<uint8_t>> inputs;
  int64_t firstStep = trainer.stepCount();
  int64_t traceStart = firstStep + o.traceSkip;
  int64_t traceEnd = traceStart + o.traceSteps;
  for (int64_t stepCount = firstStep; stepCount < o.steps; ++stepCount) {
    if (!o.trace.empty() && stepCount == traceStart)
      check(fsdprt_trace_enable(rt.ctx, 1), "starting the trace");
    if (!o.trace.empty() && stepCount == traceEnd)
      check(fsdprt_trace_enable(rt.ctx, 0), "ending the trace");
    data.fill(stepCount, rank, launch.worldSize, inputs);
    bool last = stepCount + 1 == o.steps;
    bool evaluate =
        last || (o.evalEvery > 0 && (stepCount + 1) % o.evalEvery == 0);
    StepMetrics m = trainer.step(inputs, data.tokensPerStep(), evaluate);
    evalLossSum += m.loss;
    if (rank == 0) {
      if (!o.quiet)
        std::cout << formatProgressLine(m, o.steps) << std::endl;
      if (metrics)
        metrics->write(m);
    }
    trainer.stopIfDiverged(m);
    if (!o.save.empty() &&
        (last || (o.saveEvery > 0 && (stepCount + 1) % o.saveEvery == 0)))
      trainer.save();
  }
  int64_t stepCount = trainer.stepCount();
  // Nothing to train (--steps at or below the loaded step): --save still
  // writes the weights as they are, e.g. the seeded initialisation.
  if (stepCount == firstStep && !o.save.empty())
    trainer.save();
  if (!o.trace.empty())
    writeTrace(rt, o, rank, launch.worldSize);
  if (eval && rank == 0 && stepCount > firstStep)
    std::cout << "eval: mean loss "
              << evalLossSum / double(stepCount - firstStep) << " over "
              << stepCount - firstStep << " batches" << std::endl;
  if (rank == 0 && !o.quiet) {
    if (!o.metrics.empty())
      std::cout << "metrics: " << o.metrics << std::endl;
    if (!o.trace.empty())
      std::cout << "trace: " << o.trace
                << " (open in https://ui.perfetto.dev or chrome://tracing)"
                << std::endl;
  }
}

/// One rank of the job its environment describes.
int runRank(const std::string &tool, const RunOptions &options,
            StepProgram &program, StepProgram *evalProgram) {
  int rank = -1;
  try {
    rt::LaunchInfo launch = rt::LaunchInfo::fromEnvironment();
    rank = launch.rank;
    RunOptions resolved = options;
    resolved.load = startingCheckpoint(options);
    if (!options.resume.empty() && resolved.load.empty() && rank == 0 &&
        !options.quiet)
      std::cout << "no checkpoint in " << options.save
                << " yet: starting from step 0" << std::endl;
    if (options.generate > 0)
      generate(resolved, program, launch);
    else
      train(resolved, program, evalProgram, launch);
    return 0;
  } catch (const std::exception &e) {
    std::string line =
        tool + ": " + (rank >= 0 ? "rank " + std::to_string(rank) + ": " : "") +
        "error: " + e.what() + "\n";
    printLine(line);
    recordErrorForTorchrun(line);
    return 1;
  }
}

} // namespace

/// A failure before training starts: on stderr, and for torchrun's summary.
static void reportStartError(const std::string &tool, const std::exception &e) {
  std::string line = tool + ": error: " + e.what() + "\n";
  printLine(line);
  recordErrorForTorchrun(line);
}

int runMain(const std::string &tool, int argc, char **argv,
            const StepProgramLoader &load) {
  std::vector<std::string> args(argv + 1, argv + argc);
  RunOptions options;
  std::unique_ptr<StepProgram> program, evalProgram;
  try {
    options = parseRunOptions(args);
    if (options.help) {
      std::cout << runOptionsHelp(tool);
      return 0;
    }
    program = load(options.input);
    if (program && !options.evalProgram.empty()) {
      evalProgram = load(options.evalProgram);
      if (!evalProgram)
        return 1; // the loader printed why
    }
  } catch (const UsageError &e) {
    reportStartError(tool, e);
    return 2;
  } catch (const std::exception &e) {
    reportStartError(tool, e);
    return 1;
  }
  if (!program)
    return 1; // the loader printed why
  const Program &p = program->program();

  bool launchedByUs = std::getenv("FSDP_RUN_LOCAL_RANKS") != nullptr;
  if (launchedByUs)
    endWithLauncher();
  const char *rankEnv = std::getenv("RANK");
  bool printReport =
      !options.quiet && !launchedByUs &&
      (options.nproc > 0 || !rankEnv || std::string(rankEnv) == "0");
  if (printReport) {
    std::cout << p.report << std::flush;
    try {
      std::cout << kvCacheReport(p) << std::flush;
    } catch (const std::exception &e) { // a decode step breaking its contract
      reportStartError(tool, e);
      return 1;
    }
  }

  if (options.nproc > 0 && !launchedByUs) {
    if (options.nproc != p.worldSize) {
      std::cerr << tool << ": error: --nproc " << options.nproc
                << " contradicts the program, compiled for world-size="
                << p.worldSize << "\n";
      return 2;
    }
    std::vector<std::string> child{argv[0]};
    for (const std::string &a : withoutNproc(args))
      child.push_back(a);
    try {
      return launchLocalRanks(options.nproc, child);
    } catch (const std::exception &e) {
      reportStartError(tool, e);
      return 1;
    }
  }
  return runRank(tool, options, *program, evalProgram.get());
}

} // namespace driver
} // namespace fsdp
