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

#include "fsdp/rt/AdafactorLayout.h"
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

/// The update of element e of parameter `p` from its gradient g, the state
/// and (factored) each batch's mean row moment `rowMeans`.
FSDPRT_HD inline float adafactorUpdateAt(const AdafactorParam &p, int64_t e,
                                         float g, const float *state,
                                         const float *rowMeans, float eps1,
                                         float eps1Squared) {
  if (!p.factored())
    return adafactorUpdate(g, state[p.stateOffset + e], eps1Squared);
  int64_t matrix = p.rows * p.cols;
  int64_t b = e / matrix, r = e % matrix / p.cols, c = e % p.cols;
  const float *rows = state + p.stateOffset;
  const float *cols = rows + p.batch() * p.rows;
  float v = factoredVariance(rows[b * p.rows + r], cols[b * p.cols + c],
                             rowMeans[b], eps1);
  return adafactorUpdate(g, v, eps1Squared);
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
