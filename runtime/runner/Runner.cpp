//===- Runner.cpp - fsdp-run and fsdprt-run around the step ---------------===//
//
// One rank sets up the runtime as the program describes it (arena,
// communicators, streams, the persistent buffer), initialises or loads the
// weights, then per step: copies its inputs in, calls the step, reports
// metrics, and saves checkpoints.
//
//===----------------------------------------------------------------------===//

#include "runner/Runner.h"

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/fsdprt.h"
#include "runner/Checkpoint.h"
#include "runner/Data.h"
#include "runner/ErrorFile.h"
#include "runner/Evaluator.h"
#include "runner/Generate.h"
#include "runner/Launcher.h"
#include "runner/LossScaler.h"
#include "runner/Metrics.h"
#include "runner/RankRuntime.h"
#include "runner/Trace.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace {

/// Below f16's smallest subnormal a scale can no longer make any gradient
/// finite.
constexpr double kMinLossScale = 0x1p-24;

void checkOptions(const RunOptions &o, const Program &p, int worldSize) {
  if (worldSize != p.worldSize)
    throw std::runtime_error(
        "the job has " + std::to_string(worldSize) +
        " ranks but the program was compiled for world-size=" +
        std::to_string(p.worldSize) + "; recompile it or launch " +
        std::to_string(p.worldSize) + " ranks");
  int64_t global = p.batchPerRank() * p.worldSize * p.microBatches;
  if (o.batchSize && o.batchSize != global)
    throw std::runtime_error("--batch-size " + std::to_string(o.batchSize) +
                             " contradicts the compiled program: " +
                             std::to_string(p.batchPerRank()) + " per rank x " +
                             std::to_string(p.worldSize) + " ranks x " +
                             std::to_string(p.microBatches) +
                             " micro-batches = " + std::to_string(global));
  if (o.microBatches && o.microBatches != p.microBatches)
    throw std::runtime_error("--micro-batches " +
                             std::to_string(o.microBatches) +
                             " contradicts the compiled program's " +
                             std::to_string(p.microBatches));
  if ((o.lossScaleInit || o.lossScaleGrowthInterval) && p.foundInfOffset < 0)
    throw std::runtime_error(
        "--loss-scale-init and --loss-scale-growth-interval need a program "
        "compiled with loss-scale=dynamic");
  if (p.mode == "eval" && (o.lrSchedule || o.warmupSteps || o.decaySteps ||
                           o.minLrRatio || !o.save.empty()))
    throw std::runtime_error(
        "this is an eval program (compiled with mode=eval): it trains "
        "nothing, so --lr-schedule, --warmup-steps, --decay-steps, "
        "--min-lr-ratio and --save do not apply; --steps N evaluates N "
        "batches");
  if (o.saveFormat != "full" && o.saveFormat != "sharded")
    throw std::runtime_error("--save-format must be full or sharded, not '" +
                             o.saveFormat + "'");
}

/// The program's learning-rate schedule with the fields the command line
/// sets replaced.
rt::LrSchedule lrSchedule(const RunOptions &o, const Program &p) {
  rt::LrSchedule s = p.lrSchedule;
  s.kind = o.lrSchedule.value_or(s.kind);
  s.warmupSteps = o.warmupSteps.value_or(s.warmupSteps);
  s.decaySteps = o.decaySteps.value_or(s.decaySteps);
  s.minLrRatio = o.minLrRatio.value_or(s.minLrRatio);
  std::string why = s.invalidBecause();
  if (!why.empty())
    throw std::runtime_error("the learning-rate schedule: " + why);
  return s;
}

/// The program's GradScaler (none without loss scaling): PyTorch's settings
/// with those the command line sets replaced, and the state a checkpoint
/// saved.
std::optional<LossScaler> lossScaler(const RunOptions &o, const Program &p,
                                     const Metadata &loaded) {
  if (p.foundInfOffset < 0)
    return std::nullopt;
  LossScalerConfig c;
  c.init = o.lossScaleInit.value_or(c.init);
  c.growthInterval = o.lossScaleGrowthInterval.value_or(c.growthInterval);
  c.validate();
  LossScaler scaler(c);
  auto it = loaded.find("loss_scale");
  if (it != loaded.end())
    scaler.restore(std::stod(it->second),
                   std::stoll(loaded.at("loss_scale_growth_tracker")),
                   std::stoll(loaded.at("skipped_steps")),
                   std::stoll(loaded.at("optimizer_steps")));
  return scaler;
}

/// What a checkpoint keeps of the scaler.
void saveLossScaler(const std::optional<LossScaler> &scaler, Metadata &meta) {
  if (!scaler)
    return;
  char scale[32];
  std::snprintf(scale, sizeof(scale), "%.17g", scaler->scale());
  meta["loss_scale"] = scale;
  meta["loss_scale_growth_tracker"] = std::to_string(scaler->growthTracker());
  meta["skipped_steps"] = std::to_string(scaler->skippedSteps());
  meta["optimizer_steps"] = std::to_string(scaler->optimizerSteps());
}

/// A scalar all-reduced over the world (loss: average; peaks: max).
struct Reduced {
  float loss;
  int64_t peak, devicePeak;
  float gradNorm = NAN; // when the step clips: the same on every rank
  float foundInf = 0;   // with loss scaling: the same on every rank
};
Reduced reduceMetrics(RankRuntime &rt, const Program &p, int64_t peak,
                      int64_t devicePeak) {
  // Allocated between steps, when the plan's transients are free, so that it
  // never adds to the arena's high-water mark that is checked against the plan.
  int64_t scratch = 0;
  check(fsdprt_buffer_alloc(rt.ctx, 16, &scratch), "allocating scratch");
  int64_t s = rt.streams[0];
  check(fsdprt_copy(rt.ctx, s, scratch, 0, rt.persistent, p.lossOffset, 4),
        "reading the loss");
  // Arena sizes are multiples of the alignment (64 bytes): in its units a
  // float holds them exactly up to 1 GiB (the device's peak, rounded up to
  // the unit, within 6e-8 beyond). -1: not tracked.
  const int64_t unit = FSDPRT_ARENA_ALIGNMENT;
  float peakUnits[2] = {float(peak / unit),
                        devicePeak < 0 ? -1.0f
                                       : float((devicePeak + unit - 1) / unit)};
  check(fsdprt_copy_from_host(rt.ctx, s, scratch, 8, peakUnits, 8),
        "staging the peaks");
  check(fsdprt_all_reduce(rt.ctx, s, rt.world, FSDPRT_F32, FSDPRT_COMM_AVG,
                          scratch, 0, scratch, 0, 1),
        "averaging the loss");
  check(fsdprt_all_reduce(rt.ctx, s, rt.world, FSDPRT_F32, FSDPRT_COMM_MAX,
                          scratch, 8, scratch, 8, 2),
        "reducing the peaks");
  Reduced out{};
  check(fsdprt_copy_to_host(rt.ctx, s, &out.loss, scratch, 0, 4), "loss");
  check(fsdprt_copy_to_host(rt.ctx, s, peakUnits, scratch, 8, 8), "peaks");
  if (p.gradNormOffset >= 0)
    check(fsdprt_copy_to_host(rt.ctx, s, &out.gradNorm, rt.persistent,
                              p.gradNormOffset, 4),
          "reading the gradient norm");
  if (p.foundInfOffset >= 0)
    check(fsdprt_copy_to_host(rt.ctx, s, &out.foundInf, rt.persistent,
                              p.foundInfOffset, 4),
          "reading the found-inf flag");
  check(fsdprt_stream_synchronize(rt.ctx, s), "reducing metrics");
  out.peak = int64_t(peakUnits[0]) * unit;
  out.devicePeak = peakUnits[1] < 0 ? -1 : int64_t(peakUnits[1]) * unit;
  check(fsdprt_buffer_free(rt.ctx, s, scratch), "freeing scratch");
  return out;
}

void saveCheckpoint(RankRuntime &rt, const RunOptions &o, const Program &p,
                    int rank, int64_t stepCount,
                    const std::optional<LossScaler> &scaler) {
  std::filesystem::create_directories(o.save);
  std::string path = o.save + "/step-" + std::to_string(stepCount);
  Metadata meta{{"seed", std::to_string(o.seed)}, {"data", o.data}};
  saveLossScaler(scaler, meta);
  if (o.saveFormat == "full") {
    path += ".safetensors";
    saveFull(path, p, rt.ctx, rt.streams[0], rt.buffers(), rt.shard, rank,
             stepCount, meta);
  } else {
    saveSharded(path, p, rt.ctx, rt.buffers(), rank, stepCount, meta);
  }
  check(fsdprt_barrier(rt.ctx, rt.streams[0], rt.world), "barrier");
  check(fsdprt_context_synchronize(rt.ctx), "saving a checkpoint");
  if (rank == 0 && !o.quiet)
    std::cout << "saved " << o.saveFormat << " checkpoint " << path
              << std::endl;
}

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
  const Program &p = program.program();
  checkOptions(o, p, launch.worldSize);
  rt::LrSchedule schedule = lrSchedule(o, p);
  int rank = launch.rank;
  StepFn step = program.step();
  std::optional<Evaluator> evaluator;
  if (evalProgram)
    evaluator.emplace(o, p, *evalProgram);

  RankRuntime rt;
  rt.setUp(o, p, launch, evaluator ? evaluator->arenaBytes() : 0);
  LoadResult loaded = rt.initWeights(o, p, rank);
  int64_t stepCount = loaded.stepCount;
  int64_t compute = rt.streams[0];

  std::optional<LossScaler> scaler = lossScaler(o, p, loaded.metadata);
  DataSource data(o.data, p, o.seed);
  std::unique_ptr<MetricsWriter> metrics;
  if (rank == 0 && !o.metrics.empty())
    metrics = std::make_unique<MetricsWriter>(
        o.metrics, o.resume.empty() ? -1 : stepCount);

  // An eval program evaluates --steps batches from the data's start,
  // whatever step the loaded checkpoint was saved at.
  bool eval = p.mode == "eval";
  if (eval)
    stepCount = 0;
  double evalLossSum = 0;
  std::vector<std::vector<uint8_t>> inputs;
  int64_t traceStart = stepCount + o.traceSkip;
  int64_t traceEnd = traceStart + o.traceSteps;
  int64_t firstStep = stepCount;
  for (; stepCount < o.steps; ++stepCount) {
    if (!o.trace.empty() && stepCount == traceStart)
      check(fsdprt_trace_enable(rt.ctx, 1), "starting the trace");
    if (!o.trace.empty() && stepCount == traceEnd)
      check(fsdprt_trace_enable(rt.ctx, 0), "ending the trace");
    data.fill(stepCount, rank, launch.worldSize, inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      check(fsdprt_copy_from_host(rt.ctx, compute, rt.persistent,
                                  p.inputs[i].offset, inputs[i].data(),
                                  int64_t(inputs[i].size())),
            "copying inputs");
    double waitedBefore = 0, waitedAfter = 0;
    check(fsdprt_stream_wait_seconds(rt.ctx, compute, &waitedBefore), "stats");
    double lrFactor = schedule.factor(stepCount, o.steps);
    check(fsdprt_context_set_lr_factor(rt.ctx, lrFactor), "the lr schedule");
    // With a scaler, a skipped step is no optimizer step: the step count the
    // program sees (Adam's bias correction) counts only the updates.
    int64_t optimizerSteps = stepCount;
    if (scaler) {
      check(fsdprt_context_set_loss_scale(rt.ctx, scaler->scale()),
            "the loss scale");
      optimizerSteps = scaler->optimizerSteps();
    }
    auto start = std::chrono::steady_clock::now();
    rt.runTrainingStep(step, optimizerSteps, o.seed, rank);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    check(fsdprt_stream_wait_seconds(rt.ctx, compute, &waitedAfter), "stats");
    int64_t peak = 0, extent = 0, devicePeak = -1;
    check(fsdprt_arena_high_water(rt.ctx, &peak, &extent), "stats");
    check(fsdprt_device_high_water(rt.ctx, &devicePeak), "stats");
    Reduced reduced = reduceMetrics(rt, p, peak, devicePeak);

    StepMetrics m;
    m.step = stepCount + 1;
    m.loss = reduced.loss;
    m.stepTimeS = seconds;
    m.tokensPerS = double(data.tokensPerStep()) / seconds;
    m.peakBytes = reduced.peak;
    m.devicePeakBytes = reduced.devicePeak;
    const char *scratchOp = "";
    check(fsdprt_device_reserve(rt.ctx, &m.gemmWorkspaceBytes,
                                &m.scratchReserveBytes, &scratchOp),
          "stats");
    if (m.devicePeakBytes >= 0)
      check(fsdprt_comm_device_bytes(rt.ctx, &m.commDeviceBytes), "stats");
    if (rank == 0 && !o.quiet && stepCount == firstStep &&
        m.scratchReserveBytes >= 0)
      std::cout << describeDeviceReserve(m, scratchOp) << std::endl;
    m.commExposedS = waitedAfter - waitedBefore;
    m.gradNorm = reduced.gradNorm;
    evalLossSum += m.loss;
    if (p.optimizer != "none")
      m.lr = p.lr * lrFactor;
    if (scaler) {
      m.lossScale = scaler->scale();
      m.skipped = reduced.foundInf != 0;
      scaler->update(m.skipped);
      m.skippedSteps = scaler->skippedSteps();
    }
    bool last = stepCount + 1 == o.steps;
    if (evaluator && (last || (stepCount + 1) % o.evalEvery == 0))
      m.valLoss = evaluator->evaluate(rt, rank, launch.worldSize);
    if (rank == 0) {
      if (!o.quiet)
        std::cout << formatProgressLine(m, o.steps) << std::endl;
      if (metrics)
        metrics->write(m);
    }
    // Every rank holds the same averaged loss, global norm and found-inf
    // flag, so every rank stops here together. A scaler skips a non-finite
    // step (and stops the run only when its scale underflows); without one,
    // training on would only spread NaN into the weights.
    if (scaler && scaler->scale() < kMinLossScale)
      throw std::runtime_error(
          "step " + std::to_string(m.step) + ": the loss scale fell to " +
          std::to_string(scaler->scale()) + " after " +
          std::to_string(scaler->skippedSteps()) +
          " skipped steps: every step's gradients overflow, whatever the "
          "scale (the loss itself is probably inf or NaN); stopping");
    if (!m.skipped && (!std::isfinite(m.loss) ||
                       (p.gradNormOffset >= 0 && !std::isfinite(m.gradNorm))))
      throw std::runtime_error(
          "step " + std::to_string(m.step) + ": the " +
          (std::isfinite(m.loss)
               ? "gradient norm is " + std::to_string(m.gradNorm)
               : "loss (averaged over the ranks) is " +
                     std::to_string(m.loss)) +
          "; stopping: the weights would be NaN from here on (lower the "
          "learning rate or clip the gradients; with param-dtype=f16, use "
          "loss-scale=dynamic, bf16 or f32)");
    if (!o.save.empty() &&
        (last || (o.saveEvery > 0 && (stepCount + 1) % o.saveEvery == 0)))
      saveCheckpoint(rt, o, p, rank, stepCount + 1, scaler);
  }
  // Nothing to train (--steps at or below the loaded step): --save still
  // writes the weights as they are, e.g. the seeded initialisation.
  if (stepCount == firstStep && !o.save.empty())
    saveCheckpoint(rt, o, p, rank, stepCount, scaler);
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
    if (options.resume == "latest") {
      resolved.load = latestCheckpoint(options.save);
      if (rank == 0 && !options.quiet && resolved.load.empty())
        std::cout << "no checkpoint in " << options.save
                  << " yet: starting from step 0" << std::endl;
    }
    if (options.generate > 0)
      generate(resolved, program, launch);
    else
      train(resolved, program, evalProgram, launch);
    return 0;
  } catch (const std::exception &e) {
    // One write per message: ranks failing together (a NaN loss stops all)
    // would otherwise interleave their pieces on the shared stderr.
    std::string line =
        tool + ": " + (rank >= 0 ? "rank " + std::to_string(rank) + ": " : "") +
        "error: " + e.what() + "\n";
    std::cerr.write(line.data(), std::streamsize(line.size()));
    std::cerr.flush();
    recordErrorForTorchrun(line);
    return 1;
  }
}

} // namespace

/// A failure before training starts: on stderr, and for torchrun's summary.
static void reportStartError(const std::string &tool, const std::exception &e) {
  std::string line = tool + ": error: " + e.what();
  std::cerr << line << std::endl;
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
  if (printReport)
    std::cout << p.report << std::flush;

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
