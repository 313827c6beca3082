//===- Trainer.h - One rank's training, a step at a time --------*- C++ -*-===//
//
// What a training step needs around the compiled step: the runtime set up
// as the program describes it, the weights initialised or loaded, the
// learning-rate schedule and loss scaler, then per step the rank's inputs
// copied in, the step run, its metrics reduced over the ranks, the checks
// that stop every rank together, evaluation beside training, and
// checkpoints. fsdprt-run's loop (Runner.cpp) and the in-process Python
// session (Session.cpp) both drive it, so a Python loop fed the same
// batches trains bit for bit as fsdprt-run.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_TRAINER_H
#define FSDP_DRIVER_TRAINER_H

#include "runner/Checkpoint.h"
#include "runner/Evaluator.h"
#include "runner/LossScaler.h"
#include "runner/Metrics.h"
#include "runner/RankRuntime.h"
#include "runner/RunOptions.h"
#include "runner/StepProgram.h"

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/LrSchedule.h"

#include <optional>
#include <vector>

namespace fsdp {
namespace driver {

class Trainer {
public:
  /// Checks the options against the program and the job, sets up the
  /// runtime and initialises (or --load's) the weights.
  Trainer(const RunOptions &o, StepProgram &program, StepProgram *evalProgram,
          const rt::LaunchInfo &launch);

  const Program &program() const { return program_.program(); }
  const rt::LaunchInfo &launch() const { return launch_; }
  RankRuntime &runtime() { return rt_; }
  /// Optimizer steps taken: the loaded checkpoint's, then one more a step.
  int64_t stepCount() const { return stepCount_; }
  void setStepCount(int64_t n) { stepCount_ = n; }
  /// The metadata of the loaded checkpoint (empty when initialised).
  const LoadResult &loaded() const { return loaded_; }

  /// One step on this rank's inputs (a byte vector per program().inputs
  /// entry, in its dtype and shape); `tokensPerStep` for the rate. With
  /// `evaluate`, the eval program runs after it (val_loss). The metrics
  /// are the same on every rank.
  StepMetrics step(const std::vector<std::vector<uint8_t>> &inputs,
                   int64_t tokensPerStep, bool evaluate = false);
  /// Throws, on every rank together (the metrics are the same on all),
  /// after a step whose loss or gradient norm is not finite, or whose loss
  /// scale underflowed: training on would only spread NaN.
  void stopIfDiverged(const StepMetrics &m) const;

  /// The eval program's mean loss over the ranks on this rank's `batch`
  /// (its inputs' byte vectors), of the weights now; throws without an
  /// eval program. Collective.
  double evaluate(const std::vector<std::vector<uint8_t>> &batch);
  /// Samples continuing `prompt` with the weights now, through the eval
  /// program (which must return "logits"), as fsdprt-run --generate draws
  /// them. Collective.
  std::vector<std::vector<int64_t>>
  generate(const std::vector<int64_t> &prompt, int64_t numSamples,
           int64_t newTokens, const SamplingOptions &sampling);
  const Evaluator *evaluator() const {
    return evaluator_ ? &*evaluator_ : nullptr;
  }

  /// A checkpoint at the current step count in --save's directory.
  void save();

  /// The learning rate from here on instead of the schedule's (none: the
  /// schedule again).
  void setLearningRate(std::optional<double> lr) { lrOverride_ = lr; }

private:
  /// The eval program's evaluator; throws naming the missing program.
  Evaluator &requireEvaluator();

  RunOptions options_;
  StepProgram &program_;
  rt::LaunchInfo launch_;
  rt::LrSchedule schedule_;
  std::optional<Evaluator> evaluator_;
  RankRuntime rt_;
  LoadResult loaded_;
  std::optional<LossScaler> scaler_;
  int64_t stepCount_ = 0;
  int64_t firstStep_ = 0;
  std::optional<double> lrOverride_;
};

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_TRAINER_H
