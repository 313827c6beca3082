//===- Optimizer.cu - updates, non-finite checks, grad norm clipping ------===//
//
// The optimizer updates (the CPU backend's update bodies, in packs of eight
// elements a thread, several tensors a launch) and the gradient norm's
// blocked sums.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "KernelSupport.cuh"

#include <algorithm>
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

// Updates go eight elements a thread step in whole 16-byte packs where
// every operand of the tensor is aligned (eight bf16 gradient elements are
// one pack, the f32 parameter's and each state's two), the rest element by
// element: the same arithmetic per element, so packing does not change the
// bits, nor does updating several tensors in one launch. The gradient is
// read in its storage type S: a bf16 / f16 gradient widens exactly, so the
// bits are those of its f32 copy, without one. A step graph's launch
// refreshes *live (Backend.h); else s holds the scalars.
constexpr int kUpdateItems = 8;
/// Tensors one launch updates: their table is a kernel parameter (under
/// the 4 KiB limit), as in PyTorch's multi_tensor_apply.
constexpr int kUpdateLaunchTensors = 32;

/// The tensors of one launch. Tensor k's work items are [end[k - 1],
/// end[k]): its packs[k] packs of kUpdateItems elements (0 unless every
/// operand is 16-byte aligned), then its remaining elements one by one.
struct UpdateTable {
  float *param[kUpdateLaunchTensors];
  const void *grad[kUpdateLaunchTensors];
  float *state[2][kUpdateLaunchTensors];
  int64_t packs[kUpdateLaunchTensors], end[kUpdateLaunchTensors];
  int count;
};

/// The tensor work item w belongs to: the first k with w < end[k].
__device__ inline int tensorOf(const UpdateTable &t, int64_t w) {
  int lo = 0, hi = t.count - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (w < t.end[mid])
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// kStates: the update's state tensors (SGD 0 or 1, AdamW 2, Lion 1), fixed
// at compile time so that a thread's packs stay in registers.
template <typename S, int kStates, typename Element>
__device__ void updatePack(Element element, const UpdateTable &t, int k,
                           int64_t g, const typename Element::Scalars &s) {
  using T = typename S::T;
  constexpr int kF = Pack<float>::kCount, kG = Pack<T>::kCount;
  constexpr int kFPacks = kUpdateItems / kF, kGPacks = kUpdateItems / kG;
  const T *grad = static_cast<const T *>(t.grad[k]);
  Pack<float> p[kFPacks], st[2][kFPacks] = {}; // unused states stay 0
  Pack<T> gp[kGPacks];
#pragma unroll
  for (int q = 0; q < kFPacks; ++q) {
    p[q] = loadPack(t.param[k], g * kFPacks + q);
#pragma unroll
    for (int i = 0; i < kStates; ++i)
      st[i][q] = loadPack(t.state[i][k], g * kFPacks + q);
  }
#pragma unroll
  for (int q = 0; q < kGPacks; ++q)
    gp[q] = loadPack(grad, g * kGPacks + q);
#pragma unroll
  for (int u = 0; u < kUpdateItems; ++u) {
    float state[2] = {st[0][u / kF].v[u % kF], st[1][u / kF].v[u % kF]};
    element(p[u / kF].v[u % kF], S::load(gp[u / kG].v[u % kG]), state, s,
            kStates > 0);
    st[0][u / kF].v[u % kF] = state[0];
    st[1][u / kF].v[u % kF] = state[1];
  }
#pragma unroll
  for (int q = 0; q < kFPacks; ++q) {
    storePack(t.param[k], g * kFPacks + q, p[q]);
#pragma unroll
    for (int i = 0; i < kStates; ++i)
      storePack(t.state[i][k], g * kFPacks + q, st[i][q]);
  }
}

template <typename S, int kStates, typename Element>
__device__ void updateOne(Element element, const UpdateTable &t, int k,
                          int64_t at, const typename Element::Scalars &s) {
  const auto *grad = static_cast<const typename S::T *>(t.grad[k]);
  float state[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kStates; ++i)
    state[i] = t.state[i][k][at];
  element(t.param[k][at], S::load(grad[at]), state, s, kStates > 0);
#pragma unroll
  for (int i = 0; i < kStates; ++i)
    t.state[i][k][at] = state[i];
}

template <typename S, int kStates, typename Element>
__global__ void updateKernel(Element element, UpdateTable table, int64_t items,
                             typename Element::Scalars s,
                             const typename Element::Scalars *live,
                             const float *skip) {
  if (skip && *skip != 0.0f)
    return;
  if (live)
    s = *live;
  FSDPRT_GRID_STRIDE(w, items) {
    int k = tensorOf(table, w);
    int64_t j = w - (k > 0 ? table.end[k - 1] : 0);
    if (j < table.packs[k])
      updatePack<S, kStates>(element, table, k, j, s);
    else
      updateOne<S, kStates>(
          element, table, k,
          table.packs[k] * kUpdateItems + (j - table.packs[k]), s);
  }
}

/// Launches updateKernel over `count` tensors with kStates states each,
/// kUpdateLaunchTensors at a time.
template <int kStates, typename Element>
void launchUpdates(Stream s, DType gradType, const UpdateTensors *tensors,
                   int64_t count, const typename Element::Scalars &sc,
                   const typename Element::Scalars *live, const float *skip) {
  for (int64_t first = 0; first < count; first += kUpdateLaunchTensors) {
    UpdateTable table{};
    table.count = static_cast<int>(
        std::min<int64_t>(kUpdateLaunchTensors, count - first));
    int64_t items = 0;
    for (int k = 0; k < table.count; ++k) {
      const UpdateTensors &u = tensors[first + k];
      bool packed = packAligned(u.param) && packAligned(u.grad);
      for (int i = 0; i < kStates; ++i)
        packed = packed && packAligned(u.state[i]);
      table.param[k] = u.param;
      table.grad[k] = u.grad;
      table.state[0][k] = u.state[0];
      table.state[1][k] = u.state[1];
      table.packs[k] = packed ? u.n / kUpdateItems : 0;
      items += table.packs[k] + (u.n - table.packs[k] * kUpdateItems);
      table.end[k] = items;
    }
    withStorage(gradType, [&](auto st) {
      using S = decltype(st);
      FSDPRT_LAUNCH((updateKernel<S, kStates, Element>), items, s, Element{},
                    table, items, sc, live, skip);
    });
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

void sgdStep(Stream s, DType gradType, const UpdateTensors *tensors,
             int64_t count, const SgdScalars &sc, const SgdScalars *live,
             const float *skip) {
  bool momentum = count > 0 && tensors[0].state[0];
  for (int64_t k = 0; k < count; ++k)
    if ((tensors[k].state[0] != nullptr) != momentum)
      fail(Status::InvalidArgument, "cuda backend: an SGD update's tensors "
                                    "must all have a momentum buffer or none");
  if (momentum)
    launchUpdates<1, SgdElement>(s, gradType, tensors, count, sc, live, skip);
  else
    launchUpdates<0, SgdElement>(s, gradType, tensors, count, sc, live, skip);
}

void adamwStep(Stream s, DType gradType, const UpdateTensors *tensors,
               int64_t count, const AdamWScalars &sc, const AdamWScalars *live,
               const float *skip) {
  launchUpdates<2, AdamWElement>(s, gradType, tensors, count, sc, live, skip);
}

void lionStep(Stream s, DType gradType, const UpdateTensors *tensors,
              int64_t count, const LionScalars &sc, const LionScalars *live,
              const float *skip) {
  launchUpdates<1, LionElement>(s, gradType, tensors, count, sc, live, skip);
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
