//===- Optimizer.cu - updates, non-finite checks, grad norm clipping ------===//
//
// The optimizer updates (the CPU backend's update bodies, in packs of eight
// elements a thread) and the gradient norm's blocked sums.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include <cmath>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

// The updates of one element, as the CPU backend's (math/Optimizer.h):
// state[k] is the element of the update's k-th state tensor.
struct SgdElement {
  using Scalars = SgdScalars;
  __device__ void operator()(float &param, float grad, float *state,
                             const SgdScalars &s, bool momentum) const {
    sgdUpdate(param, grad, momentum ? state : nullptr, s);
  }
};
struct AdamWElement {
  using Scalars = AdamWScalars;
  __device__ void operator()(float &param, float grad, float *state,
                             const AdamWScalars &s, bool) const {
    adamwUpdate(param, grad, state[0], state[1], s);
  }
};
struct LionElement {
  using Scalars = LionScalars;
  __device__ void operator()(float &param, float grad, float *state,
                             const LionScalars &s, bool) const {
    lionUpdate(param, grad, state[0], s);
  }
};

/// An update's state tensors (the first `count` used).
struct StateTensors {
  float *at[2];
  int count;
};

// Updates go eight elements a thread step in whole 16-byte packs where
// every operand is aligned (eight bf16 gradient elements are one pack, the
// f32 parameter's and each state's two), the rest element by element: the
// same arithmetic per element, so packing does not change the bits. The
// gradient is read in its storage type S: a bf16 / f16 gradient widens
// exactly, so the bits are those of its f32 copy, without one. A step
// graph's launch refreshes *live (Backend.h); else s holds the scalars.
constexpr int kUpdateItems = 8;

template <typename S, typename Element>
__global__ void updateKernel(Element element, float *param,
                             const typename S::T *grad, StateTensors states,
                             int64_t n, int64_t groups,
                             typename Element::Scalars s,
                             const typename Element::Scalars *live,
                             const float *skip) {
  using T = typename S::T;
  constexpr int kF = Pack<float>::kCount, kG = Pack<T>::kCount;
  constexpr int kFPacks = kUpdateItems / kF, kGPacks = kUpdateItems / kG;
  if (skip && *skip != 0.0f)
    return;
  if (live)
    s = *live;
  bool momentum = states.count > 0;
  FSDPRT_GRID_STRIDE(g, groups) {
    Pack<float> p[kFPacks], st[2][kFPacks] = {}; // unused states stay 0
    Pack<T> gp[kGPacks];
#pragma unroll
    for (int k = 0; k < kFPacks; ++k) {
      p[k] = loadPack(param, g * kFPacks + k);
      for (int t = 0; t < states.count; ++t)
        st[t][k] = loadPack(states.at[t], g * kFPacks + k);
    }
#pragma unroll
    for (int k = 0; k < kGPacks; ++k)
      gp[k] = loadPack(grad, g * kGPacks + k);
#pragma unroll
    for (int u = 0; u < kUpdateItems; ++u) {
      float state[2] = {st[0][u / kF].v[u % kF], st[1][u / kF].v[u % kF]};
      element(p[u / kF].v[u % kF], S::load(gp[u / kG].v[u % kG]), state, s,
              momentum);
      st[0][u / kF].v[u % kF] = state[0];
      st[1][u / kF].v[u % kF] = state[1];
    }
#pragma unroll
    for (int k = 0; k < kFPacks; ++k) {
      storePack(param, g * kFPacks + k, p[k]);
      for (int t = 0; t < states.count; ++t)
        storePack(states.at[t], g * kFPacks + k, st[t][k]);
    }
  }
  int64_t done = groups * kUpdateItems;
  FSDPRT_GRID_STRIDE(i, n - done) {
    int64_t at = done + i;
    float state[2] = {0.0f, 0.0f};
    for (int t = 0; t < states.count; ++t)
      state[t] = states.at[t][at];
    element(param[at], S::load(grad[at]), state, s, momentum);
    for (int t = 0; t < states.count; ++t)
      states.at[t][at] = state[t];
  }
}

/// Launches updateKernel over n elements, in packs where every operand is
/// 16-byte aligned.
template <typename Element>
void launchUpdate(Stream s, DType gradType, float *param, const void *grad,
                  StateTensors states, int64_t n,
                  const typename Element::Scalars &sc,
                  const typename Element::Scalars *live, const float *skip) {
  bool packed = packAligned(param) && packAligned(grad);
  for (int t = 0; t < states.count; ++t)
    packed = packed && packAligned(states.at[t]);
  int64_t groups = packed ? n / kUpdateItems : 0;
  withStorage(gradType, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH((updateKernel<S, Element>), groups > 0 ? groups : n, s,
                  Element{}, param, static_cast<const typename S::T *>(grad),
                  states, n, groups, sc, live, skip);
  });
}

__global__ void clearUnlessKernel(float *out, bool keep) {
  if (firstThread() && !keep)
    *out = 0.0f;
}

// Threads that see a non-finite element all store 1: the same value.
__global__ void nonfiniteKernel(const float *x, int64_t n, float *out) {
  FSDPRT_GRID_STRIDE(i, n) {
    if (!std::isfinite(x[i]))
      *out = 1.0f;
  }
}

__global__ void sqNormFinishKernel(const double *partial, int64_t blocks,
                                   float *out, bool accumulate) {
  if (!firstThread())
    return;
  double sum = totalOf(partial, blocks);
  *out = static_cast<float>((accumulate ? *out : 0.0) + sum);
}

template <typename S>
__global__ void clipKernel(typename S::T *grad, int64_t n, const float *totalSq,
                           float maxNorm) {
  // torch.nn.utils.clip_grad_norm_: f32 arithmetic on the norm.
  float totalNorm = std::sqrt(*totalSq);
  float coef = maxNorm / (totalNorm + 1e-6f);
  if (coef >= 1.0f)
    return;
  FSDPRT_GRID_STRIDE(i, n) { grad[i] = S::store(coef * S::load(grad[i])); }
}

__global__ void clipCoefficientKernel(const float *total, float *norm,
                                      float *coef, float maxNorm,
                                      double normType) {
  FSDPRT_GRID_STRIDE(i, 1) {
    (void)i; // one thread's worth of work
    *norm = gradNormOf(*total, normType);
    *coef = clipCoefficientOf(*norm, maxNorm);
  }
}

// Block b's max |x| over [b * kSumBlock, (b + 1) * kSumBlock).
__global__ void blockMaxAbsKernel(const float *x, int64_t n, float *partial) {
  FSDPRT_GRID_STRIDE(blk, (n + kSumBlock - 1) / kSumBlock) {
    int64_t end = (blk + 1) * kSumBlock < n ? (blk + 1) * kSumBlock : n;
    float m = 0.0f;
    for (int64_t i = blk * kSumBlock; i < end; ++i)
      m = maxAbsStep(m, x[i]);
    partial[blk] = m;
  }
}

__global__ void maxAbsFinishKernel(const float *partial, int64_t blocks,
                                   float *out, bool accumulate) {
  if (!firstThread())
    return;
  float m = accumulate ? *out : 0.0f;
  for (int64_t b = 0; b < blocks; ++b)
    m = maxAbsStep(m, partial[b]);
  *out = m;
}

} // namespace

void sgdStep(Stream s, DType gradType, float *param, const void *grad,
             float *momentumBuf, int64_t n, const SgdScalars &sc,
             const SgdScalars *live, const float *skip) {
  launchUpdate<SgdElement>(s, gradType, param, grad,
                           StateTensors{{momentumBuf, nullptr},
                                        momentumBuf ? 1 : 0},
                           n, sc, live, skip);
}

void adamwStep(Stream s, DType gradType, float *param, const void *grad,
               float *expAvg, float *expAvgSq, int64_t n,
               const AdamWScalars &sc, const AdamWScalars *live,
               const float *skip) {
  launchUpdate<AdamWElement>(s, gradType, param, grad,
                             StateTensors{{expAvg, expAvgSq}, 2}, n, sc, live,
                             skip);
}

void lionStep(Stream s, DType gradType, float *param, const void *grad,
              float *expAvg, int64_t n, const LionScalars &sc,
              const LionScalars *live, const float *skip) {
  launchUpdate<LionElement>(s, gradType, param, grad,
                            StateTensors{{expAvg, nullptr}, 1}, n, sc, live,
                            skip);
}

void nonfiniteFlag(Stream s, const float *x, int64_t n, float *out,
                   bool accumulate) {
  FSDPRT_LAUNCH(clearUnlessKernel, 1, s, out, accumulate);
  if (n > 0)
    FSDPRT_LAUNCH(nonfiniteKernel, n, s, x, n, out);
}

void gradSqNorm(Stream s, const float *x, int64_t n, float *out,
                bool accumulate) {
  int64_t blocks;
  Scratch partial = blockSums(s, SquareTerm{x}, n, blocks);
  FSDPRT_LAUNCH(sqNormFinishKernel, 1, s, partial.as<double>(), blocks, out,
                accumulate);
}

void maxAbs(Stream s, const float *x, int64_t n, float *out,
            bool accumulate) {
  int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  Scratch partial(s, std::max<int64_t>(blocks, 1) * 4);
  if (blocks > 0)
    FSDPRT_LAUNCH(blockMaxAbsKernel, blocks, s, x, n, partial.as<float>());
  FSDPRT_LAUNCH(maxAbsFinishKernel, 1, s, partial.as<float>(), blocks, out,
                accumulate);
}

void clipGrad(Stream s, DType dt, void *grad, int64_t n, const float *totalSq,
              double maxNorm) {
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH(clipKernel<S>, n, s, static_cast<typename S::T *>(grad), n,
                  totalSq, static_cast<float>(maxNorm));
  });
}

void clipCoefficient(Stream s, const float *total, float *norm, float *coef,
                     double maxNorm, double normType) {
  FSDPRT_LAUNCH(clipCoefficientKernel, 1, s, total, norm, coef,
                static_cast<float>(maxNorm), normType);
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
