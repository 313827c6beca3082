//===- LrSchedule.h - The learning rate of each step ------------*- C++ -*-===//
//
// The schedule is evaluated by the runner before each step and handed to
// the runtime as a factor of the program's learning rates
// (fsdprt_context_set_lr_factor), as torch.optim.lr_scheduler.LambdaLR
// multiplies each parameter group's initial lr: the compiled program holds
// no step-dependent constant, and a run may change the schedule.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_LRSCHEDULE_H
#define FSDP_DRIVER_LRSCHEDULE_H

#include <cstdint>
#include <string>

namespace fsdp {
namespace driver {

/// Linear warmup then a constant, cosine or linear decay to a floor, as
/// nanoGPT's get_lr and torchtitan's linear_warmup_stable_decay compute it.
struct LrSchedule {
  std::string kind = "constant"; // constant | cosine | linear
  int64_t warmupSteps = 0;
  int64_t decaySteps = 0;  // steps after the warmup; 0: to the run's end
  double minLrRatio = 0.0; // the floor, a fraction of the peak lr

  /// The factor of the step after `step` optimizer steps were taken, in a
  /// run of `totalSteps`: (step + 1) / (warmup + 1) during the warmup, then
  /// floor + (1 - floor) x c with c the cosine (0.5 (1 + cos(pi p))) or
  /// linear (1 - p) decay of the progress p = (step - warmup) / decay,
  /// capped at 1; 1 after the warmup for a constant schedule.
  double factor(int64_t step, int64_t totalSteps) const;

  /// Throws std::invalid_argument naming the field when it is out of range.
  void validate() const;
};

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_LRSCHEDULE_H
