//===- OptimizerScalars.h - per-step scalars of the optimizers --*- C++ -*-===//
//
// Host-side: every backend computes the scalars of an update the same way,
// then applies the shared per-element bodies of math/Optimizer.h.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_RT_OPTIMIZERSCALARS_H
#define FSDP_RT_OPTIMIZERSCALARS_H

#include "fsdp/rt/backend/Backend.h"
#include "fsdp/rt/math/Adafactor.h"
#include "fsdp/rt/math/Optimizer.h"

#include <algorithm>
#include <cmath>

namespace fsdp {
namespace rt {

/// torch.optim.SGD's scalars for step `step` (counted from 1; the first step
/// sets the momentum buffer to the gradient).
inline SgdScalars sgdScalars(const SgdOptions &o, int64_t step) {
  return SgdScalars{static_cast<float>(o.lr),
                    static_cast<float>(o.momentum),
                    static_cast<float>(o.dampening),
                    static_cast<float>(o.weightDecay),
                    o.nesterov,
                    step == 1};
}

/// torch.optim.AdamW's (or with l2WeightDecay Adam's) scalars for step
/// `step`, computed in double as its Python code does, then rounded to f32
/// when applied to f32 tensors.
inline AdamWScalars adamwScalars(const AdamWOptions &o, int64_t step) {
  double t = static_cast<double>(step);
  double biasCorrection1 = 1.0 - std::pow(o.beta1, t);
  double biasCorrection2 = 1.0 - std::pow(o.beta2, t);
  double decoupled = o.l2WeightDecay ? 0.0 : o.weightDecay;
  return AdamWScalars{static_cast<float>(1.0 - o.lr * decoupled),
                      static_cast<float>(o.l2WeightDecay ? o.weightDecay : 0.0),
                      static_cast<float>(1.0 - o.beta1),
                      static_cast<float>(o.beta2),
                      static_cast<float>(1.0 - o.beta2),
                      static_cast<float>(o.lr / biasCorrection1),
                      static_cast<float>(std::sqrt(biasCorrection2)),
                      static_cast<float>(o.eps)};
}

/// Lion's scalars (no bias correction: the same every step), formed in
/// double and applied in f32.
inline LionScalars lionScalars(const LionOptions &o) {
  return LionScalars{static_cast<float>(1.0 - o.lr * o.weightDecay),
                     static_cast<float>(o.lr),
                     static_cast<float>(o.beta1),
                     static_cast<float>(1.0 - o.beta1),
                     static_cast<float>(o.beta2),
                     static_cast<float>(1.0 - o.beta2)};
}

/// Adafactor's second-moment scalars for step `step` (from 1): torch's
/// one_minus_beta2_t = t^beta2_decay.
inline AdafactorFactorScalars
adafactorFactorScalars(double beta2Decay, double eps1, int64_t step) {
  return AdafactorFactorScalars{
      static_cast<float>(std::pow(static_cast<double>(step), beta2Decay)),
      static_cast<float>(eps1), static_cast<float>(eps1 * eps1)};
}

/// Adafactor's update scalars for step `step`: rho_t = min(lr, 1/sqrt(t)).
inline AdafactorApplyScalars adafactorApplyScalars(const AdafactorOptions &o,
                                                   int64_t step) {
  double rho = std::min(o.lr, 1.0 / std::sqrt(static_cast<double>(step)));
  return AdafactorApplyScalars{rho,
                               static_cast<float>(1.0 - o.lr * o.weightDecay),
                               static_cast<float>(o.eps1),
                               static_cast<float>(o.eps1 * o.eps1),
                               o.eps2,
                               o.d};
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_OPTIMIZERSCALARS_H
