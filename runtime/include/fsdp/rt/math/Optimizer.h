//===- Optimizer.h - Per-element optimizer updates --------------*- C++ -*-===//
//
// The element updates of torch.optim.SGD, Adam and AdamW
// (_single_tensor_* paths, foreach=False, non-amsgrad), in the same operation
// order so that f32 results match PyTorch's CPU implementation, and Lion's
// (Chen et al. 2023) as its published rule writes it. Scalars that
// PyTorch computes in Python (double) and then applies to f32 tensors arrive
// here already rounded to f32, as they are in PyTorch.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_OPTIMIZER_H
#define FSDP_RT_MATH_OPTIMIZER_H

#include "fsdp/rt/math/Hd.h"

#include <cmath>

namespace fsdp {
namespace rt {

struct SgdScalars {
  float lr, momentum, dampening, weightDecay;
  bool nesterov;
  bool firstStep; // The momentum buffer does not exist yet in PyTorch terms.
};

FSDPRT_HD inline void sgdUpdate(float &param, float grad, float *momentumBuf,
                                const SgdScalars &s) {
  float d = grad;
  if (s.weightDecay != 0.0f)
    d = d + s.weightDecay * param;
  if (s.momentum != 0.0f) {
    float buf;
    if (s.firstStep)
      buf = d; // torch.clone(d_p): no dampening on the first step.
    else
      buf = *momentumBuf * s.momentum + (1.0f - s.dampening) * d;
    *momentumBuf = buf;
    d = s.nesterov ? d + s.momentum * buf : buf;
  }
  param = param + (-s.lr) * d;
}

struct AdamWScalars {
  float decayFactor;   // 1 - lr * weight_decay (AdamW; Adam: 1)
  float l2Decay;       // weight_decay added to the gradient (Adam; AdamW: 0)
  float oneMinusBeta1; // lerp weight
  float beta2, oneMinusBeta2;
  float stepSize;            // lr / (1 - beta1^t)
  float biasCorrection2Sqrt; // sqrt(1 - beta2^t)
  float eps;
};

/// torch.lerp for weight < 0.5 (always true for 1 - beta1 in practice) is
/// start + weight * (end - start); for weight >= 0.5 it is
/// end - (end - start) * (1 - weight).
FSDPRT_HD inline float torchLerp(float start, float end, float weight) {
  return weight < 0.5f ? start + weight * (end - start)
                       : end - (end - start) * (1.0f - weight);
}

FSDPRT_HD inline void adamwUpdate(float &param, float grad, float &expAvg,
                                  float &expAvgSq, const AdamWScalars &s) {
  // torch.optim.Adam: grad.add(param, alpha=weight_decay) before the moments.
  if (s.l2Decay != 0.0f)
    grad = grad + s.l2Decay * param;
  param = param * s.decayFactor;
  expAvg = torchLerp(expAvg, grad, s.oneMinusBeta1);
  // addcmul_/addcdiv_ evaluate value * t1 * t2 and value * t1 / t2 left to
  // right on CPU; keep that order.
  expAvgSq = expAvgSq * s.beta2 + s.oneMinusBeta2 * grad * grad;
  float denom = std::sqrt(expAvgSq) / s.biasCorrection2Sqrt + s.eps;
  param = param + (-s.stepSize) * expAvg / denom;
}

struct LionScalars {
  float decayFactor; // 1 - lr * weight_decay
  float lr;
  float beta1, oneMinusBeta1, beta2, oneMinusBeta2;
};

/// Lion: c = β1·m + (1 − β1)·g; param ·= 1 − lr·wd; param −= lr·sign(c);
/// m = β2·m + (1 − β2)·g. sign(0) = 0 and a NaN stays NaN, as torch.sign.
FSDPRT_HD inline void lionUpdate(float &param, float grad, float &expAvg,
                                 const LionScalars &s) {
  float c = expAvg * s.beta1 + s.oneMinusBeta1 * grad;
  float sign = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : c);
  param = param * s.decayFactor;
  param = param + (-s.lr) * sign;
  expAvg = expAvg * s.beta2 + s.oneMinusBeta2 * grad;
}

/// The total gradient norm of type p from `total`: sum |g|^p (p finite) or
/// max |g| (p = inf), as torch.nn.utils.clip_grad_norm_ reduces it.
FSDPRT_HD inline float gradNormOf(float total, double p) {
  if (std::isinf(p) || p == 1.0)
    return total;
  if (p == 2.0)
    return std::sqrt(total);
  return std::pow(total, static_cast<float>(1.0 / p));
}

/// clip_grad_norm_'s coefficient: max_norm / (norm + 1e-6), clamped to 1.
FSDPRT_HD inline float clipCoefficientOf(float norm, float maxNorm) {
  float c = maxNorm / (norm + 1e-6f);
  return c < 1.0f ? c : 1.0f;
}

/// max(m, |x|), a NaN (in either) sticking as torch.max propagates it.
FSDPRT_HD inline float maxAbsStep(float m, float x) {
  float a = std::fabs(x);
  return (a > m || a != a) && m == m ? a : m;
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_OPTIMIZER_H
