//===- LossScaler.h - GradScaler's dynamic loss scale -----------*- C++ -*-===//
//
// torch.amp.GradScaler's state machine, run by the runner between steps:
// the step seeds its backward with the scale, unscales the gradient shards
// and skips the optimizer (every rank together) when one holds an inf or
// NaN; the runner then backs the scale off or, after `growthInterval` good
// steps in a row, grows it. A skipped step is no optimizer step: Adam's
// step count does not advance.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_LOSSSCALER_H
#define FSDP_DRIVER_LOSSSCALER_H

#include <cstdint>

namespace fsdp {
namespace driver {

struct LossScalerConfig {
  double init = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;

  /// Throws std::invalid_argument naming the field when it is out of range.
  void validate() const;
};

class LossScaler {
public:
  explicit LossScaler(const LossScalerConfig &config)
      : config_(config), scale_(config.init) {}

  /// The scale the next step uses.
  double scale() const { return scale_; }
  /// Steps skipped so far, and optimizer steps taken.
  int64_t skippedSteps() const { return skipped_; }
  int64_t optimizerSteps() const { return optimizerSteps_; }
  int64_t growthTracker() const { return growthTracker_; }

  /// GradScaler.update() after a step that found (or not) a non-finite
  /// gradient.
  void update(bool foundInf);

  /// The state a checkpoint restores.
  void restore(double scale, int64_t growthTracker, int64_t skipped,
               int64_t optimizerSteps);

private:
  LossScalerConfig config_;
  double scale_;
  int64_t growthTracker_ = 0, skipped_ = 0, optimizerSteps_ = 0;
};

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_LOSSSCALER_H
