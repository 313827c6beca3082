//===- Adafactor.h - Adafactor's per-element arithmetic ---------*- C++ -*-===//
//
// torch.optim.Adafactor's _single_tensor_adafactor in its operation order,
// on the host (cpu backend) and the device (cuda backend) alike: f32
// element arithmetic, the per-parameter scalars that torch forms in Python
// (from .item() norms) in double.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_ADAFACTOR_H
#define FSDP_RT_MATH_ADAFACTOR_H

#include "fsdp/rt/math/Hd.h"
#include "fsdp/rt/math/Optimizer.h"

#include <cmath>
#include <cstdint>

namespace fsdp {
namespace rt {

/// The second moments' step: lerp weight 1 − β2ₜ = t^beta2_decay; eps1 and
/// eps1² (torch clamps the row mean to eps1 and the estimate to eps1²).
struct AdafactorFactorScalars {
  float weight;
  float eps1, eps1Squared;
};

/// The parameter's step: ρ = min(lr, 1/√t), the weight-decay factor
/// 1 − lr·wd, eps1, eps2 and d.
struct AdafactorApplyScalars {
  double rho;
  float decayFactor;
  float eps1, eps1Squared;
  double eps2, d;
};

/// A second moment moved toward this step's mean of squares.
FSDPRT_HD inline float adafactorMoment(float moment, float meanSquare,
                                       const AdafactorFactorScalars &s) {
  return torchLerp(moment, meanSquare, s.weight);
}

/// A factored parameter's variance estimate at (row, column):
/// row·col / max(mean of the rows, eps1).
FSDPRT_HD inline float factoredVariance(float row, float col, float rowMean,
                                        float eps1) {
  return row * col / (rowMean < eps1 ? eps1 : rowMean);
}

/// The update of one element: grad / √max(variance, eps1²).
FSDPRT_HD inline float adafactorUpdate(float grad, float variance,
                                       float eps1Squared) {
  float v = variance < eps1Squared ? eps1Squared : variance;
  return (1.0f / std::sqrt(v)) * grad;
}

/// The factor a parameter's update is added with: −α / max(1, RMS(u)/d),
/// α = max(eps2, RMS(param))·ρ, from Σ param² and Σ update² over the whole
/// parameter (norms rounded to f32 as torch's .norm() is).
FSDPRT_HD inline float adafactorStepSize(float paramSq, float updateSq,
                                         int64_t numel,
                                         const AdafactorApplyScalars &s) {
  double rootNumel = std::sqrt(static_cast<double>(numel));
  double paramRms = static_cast<double>(std::sqrt(paramSq)) / rootNumel;
  double alpha = (paramRms > s.eps2 ? paramRms : s.eps2) * s.rho;
  double updateRms =
      static_cast<double>(std::sqrt(updateSq)) / (rootNumel * s.d);
  double denom = updateRms > 1.0 ? updateRms : 1.0;
  return static_cast<float>(-alpha / denom);
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_ADAFACTOR_H
