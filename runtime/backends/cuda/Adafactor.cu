//===- Adafactor.cu - Adafactor's statistics, moments and update ----------===//
//
// The cpu backend's Adafactor (cpu/Adafactor.cpp) with one launch per
// parameter part: sums without atomics, so that results do not depend on
// thread timing — a thread per row or column sums its elements in order,
// the squared norms are blockSums' fixed blocks.
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.cuh"
#include "Kernels.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// A part of a parameter on this rank: its elements [first, first + count),
/// the first at `local` in the rank's buffers.
struct Part {
  AdafactorParam p;
  int64_t first, count, local;
};

__device__ inline bool skipped(const float *skip) {
  return skip && *skip != 0.0f;
}

/// Σ grad² of factored parameter rows (thread per row b·rows + r) and
/// columns (thread per column, after the rows), over the part's elements.
__global__ void factoredSquaresKernel(const float *grad, Part part,
                                      float *squares) {
  const AdafactorParam &p = part.p;
  int64_t rowEntries = p.batch() * p.rows;
  int64_t matrix = p.rows * p.cols;
  FSDPRT_GRID_STRIDE(k, p.stateSize()) {
    // The elements of row k, or of column k - rowEntries, in order.
    int64_t start, stride, count;
    if (k < rowEntries) {
      start = k * p.cols, stride = 1, count = p.cols;
    } else {
      int64_t b = (k - rowEntries) / p.cols, c = (k - rowEntries) % p.cols;
      start = b * matrix + c, stride = p.cols, count = p.rows;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < count; ++j) {
      int64_t e = start + j * stride;
      if (e < part.first || e >= part.first + part.count)
        continue;
      float g = grad[part.local + e - part.first];
      sum += g * g; // f32 square, as torch's grad * grad
    }
    squares[p.stateOffset + k] = static_cast<float>(sum);
  }
}

__global__ void elementSquaresKernel(const float *grad, Part part,
                                     float *squares) {
  FSDPRT_GRID_STRIDE(k, part.count) {
    float g = grad[part.local + k];
    squares[part.p.stateOffset + part.first + k] = g * g;
  }
}

__global__ void momentKernel(AdafactorParam p, float *state,
                             const float *squares, AdafactorFactorScalars s,
                             const AdafactorFactorScalars *live,
                             const float *skip) {
  if (skipped(skip))
    return;
  if (live)
    s = *live;
  int64_t rowEntries = p.factored() ? p.batch() * p.rows : p.numel;
  FSDPRT_GRID_STRIDE(k, p.stateSize()) {
    float sum = squares[p.stateOffset + k];
    float mean = !p.factored()    ? sum
                 : k < rowEntries ? sum / static_cast<float>(p.cols)
                                  : sum / static_cast<float>(p.rows);
    float &moment = state[p.stateOffset + k];
    moment = adafactorMoment(moment, mean, s);
  }
}

/// Each batch's mean of the row moments (thread per batch, rows in order).
__global__ void rowMeansKernel(AdafactorParam p, const float *state,
                               float *means) {
  FSDPRT_GRID_STRIDE(b, p.batch()) {
    double sum = 0.0;
    for (int64_t r = 0; r < p.rows; ++r)
      sum += state[p.stateOffset + b * p.rows + r];
    means[b] = static_cast<float>(sum / static_cast<double>(p.rows));
  }
}

struct UpdateSquareTerm {
  Part part;
  const float *grad, *state, *means;
  AdafactorFactorScalars s;
  const AdafactorFactorScalars *live;
  __device__ double operator()(int64_t k) const {
    AdafactorFactorScalars sc = live ? *live : s;
    float u = adafactorUpdateAt(part.p, part.first + k, grad[part.local + k],
                                state, means, sc.eps1, sc.eps1Squared);
    return static_cast<double>(u) * u;
  }
};

__global__ void storeSumKernel(const double *partial, int64_t blocks,
                               float *out, const float *skip) {
  if (!firstThread() || skipped(skip))
    return;
  *out = static_cast<float>(totalOf(partial, blocks));
}

__global__ void applyKernel(float *param, const float *grad, Part part,
                            const float *state, const float *means,
                            const float *paramSq, const float *updateSq,
                            AdafactorApplyScalars s,
                            const AdafactorApplyScalars *live,
                            const float *skip) {
  if (skipped(skip))
    return;
  if (live)
    s = *live;
  float step = adafactorStepSize(*paramSq, *updateSq, part.p.numel, s);
  FSDPRT_GRID_STRIDE(k, part.count) {
    float u = adafactorUpdateAt(part.p, part.first + k, grad[part.local + k],
                                state, means, s.eps1, s.eps1Squared);
    float &x = param[part.local + k];
    x = x * s.decayFactor;
    x = x + step * u;
  }
}

/// The parts of the n elements from flatBegin, in parameter order.
std::vector<std::pair<int64_t, Part>> partsOf(const AdafactorLayout &layout,
                                              int64_t flatBegin, int64_t n) {
  std::vector<std::pair<int64_t, Part>> parts;
  layout.forEachPart(flatBegin, n,
                     [&](int64_t i, const AdafactorParam &p, int64_t first,
                         int64_t count, int64_t local) {
                       parts.push_back({i, Part{p, first, count, local}});
                     });
  return parts;
}

/// Each batch's mean row moment of a factored parameter, in scratch.
Scratch rowMeans(Stream s, const AdafactorParam &p, const float *state) {
  Scratch means(s, std::max<int64_t>(p.batch(), 1) * 4);
  if (p.factored())
    FSDPRT_LAUNCH(rowMeansKernel, p.batch(), s, p, state, means.as<float>());
  return means;
}

} // namespace

void adafactorStats(Stream s, const float *param, const float *grad, int64_t n,
                    int64_t flatBegin, const AdafactorLayout &layout,
                    float *stats) {
  // The entries no part reaches are zero.
  checkCuda(cudaMemsetAsync(stats, 0, layout.statsSize() * 4, s),
            "cudaMemsetAsync (Adafactor statistics)");
  float *squares = stats + layout.params.size();
  for (auto &[i, part] : partsOf(layout, flatBegin, n)) {
    gradSqNorm(s, param + part.local, part.count, stats + i, false);
    if (part.p.factored())
      FSDPRT_LAUNCH(factoredSquaresKernel, part.p.stateSize(), s, grad, part,
                    squares);
    else
      FSDPRT_LAUNCH(elementSquaresKernel, part.count, s, grad, part, squares);
  }
}

void adafactorFactor(Stream s, const float *grad, int64_t n, int64_t flatBegin,
                     const AdafactorLayout &layout, float *state,
                     const float *stats, float *updateSq,
                     const AdafactorFactorScalars &sc,
                     const AdafactorFactorScalars *live, const float *skip) {
  const float *squares = stats + layout.params.size();
  for (const AdafactorParam &p : layout.params)
    FSDPRT_LAUNCH(momentKernel, p.stateSize(), s, p, state, squares, sc, live,
                  skip);
  checkCuda(cudaMemsetAsync(updateSq, 0, layout.params.size() * 4, s),
            "cudaMemsetAsync (Adafactor update norms)");
  for (auto &[i, part] : partsOf(layout, flatBegin, n)) {
    Scratch means = rowMeans(s, part.p, state);
    int64_t blocks = 0;
    Scratch partial = blockSums(
        s, UpdateSquareTerm{part, grad, state, means.as<float>(), sc, live},
        part.count, blocks);
    FSDPRT_LAUNCH(storeSumKernel, 1, s, partial.as<double>(), blocks,
                  updateSq + i, skip);
  }
}

void adafactorApply(Stream s, float *param, const float *grad, int64_t n,
                    int64_t flatBegin, const AdafactorLayout &layout,
                    const float *state, const float *stats,
                    const float *updateSq, const AdafactorApplyScalars &sc,
                    const AdafactorApplyScalars *live, const float *skip) {
  for (auto &[i, part] : partsOf(layout, flatBegin, n)) {
    Scratch means = rowMeans(s, part.p, state);
    FSDPRT_LAUNCH(applyKernel, part.count, s, param, grad, part, state,
                  means.as<float>(), stats + i, updateSq + i, sc, live, skip);
  }
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
