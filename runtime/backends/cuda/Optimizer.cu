//===- Optimizer.cu - updates, non-finite checks, grad norm clipping ------===//
//
// The optimizer updates (the CPU backend's update bodies, one thread per
// element) and the gradient norm's blocked sums.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include <cmath>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

// A step graph's launch refreshes *live (Backend.h); else s holds them. The
// gradient is read in its storage type S: a bf16 / f16 gradient widens
// exactly, so the update's bits are those of its f32 copy, without one.
template <typename S>
__global__ void sgdKernel(float *param, const typename S::T *grad,
                          float *momentumBuf, int64_t n, SgdScalars s,
                          const SgdScalars *live, const float *skip) {
  if (skip && *skip != 0.0f)
    return;
  if (live)
    s = *live;
  FSDPRT_GRID_STRIDE(i, n) {
    sgdUpdate(param[i], S::load(grad[i]),
              momentumBuf ? momentumBuf + i : nullptr, s);
  }
}

template <typename S>
__global__ void adamwKernel(float *param, const typename S::T *grad,
                            float *expAvg, float *expAvgSq, int64_t n,
                            AdamWScalars s, const AdamWScalars *live,
                            const float *skip) {
  if (skip && *skip != 0.0f)
    return;
  if (live)
    s = *live;
  FSDPRT_GRID_STRIDE(i, n) {
    adamwUpdate(param[i], S::load(grad[i]), expAvg[i], expAvgSq[i], s);
  }
}

template <typename S>
__global__ void lionKernel(float *param, const typename S::T *grad,
                           float *expAvg, int64_t n, LionScalars s,
                           const LionScalars *live, const float *skip) {
  if (skip && *skip != 0.0f)
    return;
  if (live)
    s = *live;
  FSDPRT_GRID_STRIDE(i, n) {
    lionUpdate(param[i], S::load(grad[i]), expAvg[i], s);
  }
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
  withStorage(gradType, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH(sgdKernel<S>, n, s, param,
                  static_cast<const typename S::T *>(grad), momentumBuf, n, sc,
                  live, skip);
  });
}

void adamwStep(Stream s, DType gradType, float *param, const void *grad,
               float *expAvg, float *expAvgSq, int64_t n,
               const AdamWScalars &sc, const AdamWScalars *live,
               const float *skip) {
  withStorage(gradType, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH(adamwKernel<S>, n, s, param,
                  static_cast<const typename S::T *>(grad), expAvg, expAvgSq,
                  n, sc, live, skip);
  });
}

void lionStep(Stream s, DType gradType, float *param, const void *grad,
              float *expAvg, int64_t n, const LionScalars &sc,
              const LionScalars *live, const float *skip) {
  withStorage(gradType, [&](auto st) {
    using S = decltype(st);
    FSDPRT_LAUNCH(lionKernel<S>, n, s, param,
                  static_cast<const typename S::T *>(grad), expAvg, n, sc, live,
                  skip);
  });
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
