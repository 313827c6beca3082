//===- LrSchedule.h - The learning rate of each step ------------*- C++ -*-===//
//
// The schedule is evaluated by the runner before each step and handed to
// the runtime as a factor of the program's learning rates
// (fsdprt_context_set_lr_factor), as torch.optim.lr_scheduler.LambdaLR
// multiplies each parameter group's initial lr: the compiled program holds
// no step-dependent constant, and a run may change the schedule.
// Header-only: convert-fsdp-to-rt (which records the schedule in the
// program description), the runner and its command line all check a
// schedule with invalidBecause(), so the ranges are written once.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_LRSCHEDULE_H
#define FSDP_RT_LRSCHEDULE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

namespace fsdp {
namespace rt {

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
  double factor(int64_t step, int64_t totalSteps) const {
    if (step < warmupSteps)
      return double(step + 1) / double(warmupSteps + 1);
    if (kind == "constant")
      return 1.0;
    int64_t decay = decaySteps > 0
                        ? decaySteps
                        : std::max<int64_t>(totalSteps - warmupSteps, 1);
    double progress =
        std::min(1.0, double(step - warmupSteps) / double(decay));
    double c = kind == "cosine" ? 0.5 * (1.0 + std::cos(M_PI * progress))
                                : 1.0 - progress;
    return minLrRatio + (1.0 - minLrRatio) * c;
  }

  /// Why the schedule cannot run ("" when it can), naming the field by its
  /// option (lr-schedule, warmup-steps, decay-steps, min-lr-ratio), the
  /// same in fsdp-pipeline, convert-fsdp-to-rt and fsdp-run.
  std::string invalidBecause() const {
    std::ostringstream why;
    if (kind != "constant" && kind != "cosine" && kind != "linear")
      why << "lr-schedule must be constant, cosine or linear, not '" << kind
          << "'";
    else if (warmupSteps < 0)
      why << "warmup-steps must be >= 0, got " << warmupSteps;
    else if (decaySteps < 0)
      why << "decay-steps must be >= 0, got " << decaySteps;
    else if (!(minLrRatio >= 0.0 && minLrRatio <= 1.0))
      why << "min-lr-ratio must be in [0, 1], got " << minLrRatio;
    return why.str();
  }
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_LRSCHEDULE_H
