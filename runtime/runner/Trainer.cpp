//===- Trainer.cpp - One rank's training, a step at a time ----------------===//
#include "runner/Trainer.h"

#include "fsdp/rt/fsdprt.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
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

} // namespace

Trainer::Trainer(const RunOptions &o, StepProgram &program,
                 StepProgram *evalProgram, const rt::LaunchInfo &launch)
    : options_(o), program_(program), launch_(launch) {
  const Program &p = program.program();
  checkOptions(o, p, launch.worldSize);
  schedule_ = lrSchedule(o, p);
  if (evalProgram)
    evaluator_.emplace(o, p, *evalProgram);
  rt_.setUp(o, p, launch, evaluator_ ? evaluator_->arenaBytes() : 0);
  loaded_ = rt_.initWeights(o, p, launch.rank);
  stepCount_ = firstStep_ = loaded_.stepCount;
  scaler_ = lossScaler(o, p, loaded_.metadata);
}

StepMetrics Trainer::step(const std::vector<std::vector<uint8_t>> &inputs,
                          int64_t tokensPerStep, bool evaluate) {
  const RunOptions &o = options_;
  const Program &p = program_.program();
  RankRuntime &rt = rt_;
  int rank = launch_.rank;
  int64_t compute = rt.streams[0];
  if (inputs.size() != p.inputs.size())
    throw std::runtime_error("the step takes " +
                             std::to_string(p.inputs.size()) +
                             " input arrays, not " +
                             std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    check(fsdprt_copy_from_host(rt.ctx, compute, rt.persistent,
                                p.inputs[i].offset, inputs[i].data(),
                                int64_t(inputs[i].size())),
          "copying inputs");
  double waitedBefore = 0, waitedAfter = 0;
  check(fsdprt_stream_wait_seconds(rt.ctx, compute, &waitedBefore), "stats");
  double lrFactor = lrOverride_ ? *lrOverride_ / p.lr
                                : schedule_.factor(stepCount_, o.steps);
  check(fsdprt_context_set_lr_factor(rt.ctx, lrFactor), "the lr schedule");
  // With a scaler, a skipped step is no optimizer step: the step count the
  // program sees (Adam's bias correction) counts only the updates.
  int64_t optimizerSteps = stepCount_;
  if (scaler_) {
    check(fsdprt_context_set_loss_scale(rt.ctx, scaler_->scale()),
          "the loss scale");
    optimizerSteps = scaler_->optimizerSteps();
  }
  auto start = std::chrono::steady_clock::now();
  rt.runTrainingStep(program_.step(), optimizerSteps, o.seed, rank);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  check(fsdprt_stream_wait_seconds(rt.ctx, compute, &waitedAfter), "stats");
  int64_t peak = 0, extent = 0, devicePeak = -1;
  check(fsdprt_arena_high_water(rt.ctx, &peak, &extent), "stats");
  check(fsdprt_device_high_water(rt.ctx, &devicePeak), "stats");
  Reduced reduced = reduceMetrics(rt, p, peak, devicePeak);

  StepMetrics m;
  m.step = stepCount_ + 1;
  m.loss = reduced.loss;
  m.stepTimeS = seconds;
  m.tokensPerS = double(tokensPerStep) / seconds;
  m.peakBytes = reduced.peak;
  m.devicePeakBytes = reduced.devicePeak;
  const char *scratchOp = "";
  check(fsdprt_device_reserve(rt.ctx, &m.gemmWorkspaceBytes,
                              &m.scratchReserveBytes, &scratchOp),
        "stats");
  if (m.devicePeakBytes >= 0)
    check(fsdprt_comm_device_bytes(rt.ctx, &m.commDeviceBytes), "stats");
  if (rank == 0 && !o.quiet && stepCount_ == firstStep_ &&
      m.scratchReserveBytes >= 0)
    std::cout << describeDeviceReserve(m, scratchOp) << std::endl;
  m.commExposedS = waitedAfter - waitedBefore;
  m.gradNorm = reduced.gradNorm;
  if (p.optimizer != "none")
    m.lr = p.lr * lrFactor;
  if (scaler_) {
    m.lossScale = scaler_->scale();
    m.skipped = reduced.foundInf != 0;
    scaler_->update(m.skipped);
    m.skippedSteps = scaler_->skippedSteps();
  }
  if (evaluate && evaluator_)
    m.valLoss = evaluator_->evaluate(rt, rank, launch_.worldSize);
  ++stepCount_;
  return m;
}

void Trainer::stopIfDiverged(const StepMetrics &m) const {
  // Every rank holds the same averaged loss, global norm and found-inf
  // flag, so every rank stops here together. A scaler skips a non-finite
  // step (and stops the run only when its scale underflows); without one,
  // training on would only spread NaN into the weights.
  if (scaler_ && scaler_->scale() < kMinLossScale)
    throw std::runtime_error(
        "step " + std::to_string(m.step) + ": the loss scale fell to " +
        std::to_string(scaler_->scale()) + " after " +
        std::to_string(scaler_->skippedSteps()) +
        " skipped steps: every step's gradients overflow, whatever the "
        "scale (the loss itself is probably inf or NaN); stopping");
  if (!m.skipped && (!std::isfinite(m.loss) ||
                     (program_.program().gradNormOffset >= 0 && !std::isfinite(m.gradNorm))))
    throw std::runtime_error(
        "step " + std::to_string(m.step) + ": the " +
        (std::isfinite(m.loss)
             ? "gradient norm is " + std::to_string(m.gradNorm)
             : "loss (averaged over the ranks) is " + std::to_string(m.loss)) +
        "; stopping: the weights would be NaN from here on (lower the "
        "learning rate or clip the gradients; with param-dtype=f16, use "
        "loss-scale=dynamic, bf16 or f32)");
}

Evaluator &Trainer::requireEvaluator() {
  if (!evaluator_)
    throw std::runtime_error("no eval program: open the session with one "
                             "(compiled with mode=eval)");
  return *evaluator_;
}

double Trainer::evaluate(const std::vector<std::vector<uint8_t>> &batch) {
  return requireEvaluator().evaluateOn(rt_, launch_.rank, batch);
}

std::vector<std::vector<int64_t>>
Trainer::generate(const std::vector<int64_t> &prompt, int64_t numSamples,
                  int64_t newTokens, const SamplingOptions &sampling) {
  return requireEvaluator().generate(rt_, launch_.rank, prompt, numSamples,
                                     newTokens, sampling);
}

void Trainer::save() {
  saveCheckpoint(rt_, options_, program_.program(), launch_.rank, stepCount_,
                 scaler_);
}

} // namespace driver
} // namespace fsdp
