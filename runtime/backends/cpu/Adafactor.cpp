//===- Adafactor.cpp - Adafactor's statistics, moments and update ---------===//
//
// torch.optim.Adafactor on a rank's part of a flat parameter
// (AdafactorLayout.h). The sums run in one thread, in double, in element
// order; the update, elementwise, in parallel.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

namespace {

/// The mean of each batch's row moments of factored parameter `p`, as
/// torch's row_var.mean(dim=-2).
std::vector<float> rowMeans(const AdafactorParam &p, const float *state) {
  std::vector<float> means(p.batch());
  for (int64_t b = 0; b < p.batch(); ++b) {
    double sum = 0.0;
    for (int64_t r = 0; r < p.rows; ++r)
      sum += state[p.stateOffset + b * p.rows + r];
    means[b] = static_cast<float>(sum / static_cast<double>(p.rows));
  }
  return means;
}

} // namespace

void adafactorStats(const float *param, const float *grad, int64_t n,
                    int64_t flatBegin, const AdafactorLayout &layout,
                    float *stats) {
  int64_t count = static_cast<int64_t>(layout.params.size());
  std::vector<double> sums(layout.statsSize(), 0.0);
  double *squares = sums.data() + count; // the state's layout of Σ grad²
  auto addSquares = [&](int64_t i, const AdafactorParam &p, int64_t first,
                        int64_t size, int64_t local) {
    double *own = squares + p.stateOffset;
    int64_t matrix = p.rows * p.cols;
    for (int64_t k = 0; k < size; ++k) {
      float x = param[local + k], g = grad[local + k];
      sums[i] += static_cast<double>(x) * x;
      float g2 = g * g; // f32, as torch's grad * grad
      int64_t e = first + k;
      if (!p.factored()) {
        own[e] = g2;
        continue;
      }
      int64_t b = e / matrix, r = e % matrix / p.cols, c = e % p.cols;
      own[b * p.rows + r] += g2;
      own[p.batch() * p.rows + b * p.cols + c] += g2;
    }
  };
  layout.forEachPart(flatBegin, n, addSquares);
  for (size_t k = 0; k < sums.size(); ++k)
    stats[k] = static_cast<float>(sums[k]);
}

void adafactorFactor(const float *grad, int64_t n, int64_t flatBegin,
                     const AdafactorLayout &layout, float *state,
                     const float *stats, float *updateSq,
                     const AdafactorFactorScalars &s) {
  int64_t count = static_cast<int64_t>(layout.params.size());
  const float *squares = stats + count;
  // Every rank moves the whole (replicated) state: row means are Σ / cols,
  // column means Σ / rows, as torch divides the squared norms.
  for (const AdafactorParam &p : layout.params) {
    float *own = state + p.stateOffset;
    const float *sum = squares + p.stateOffset;
    int64_t rowEntries = p.factored() ? p.batch() * p.rows : p.numel;
    for (int64_t k = 0; k < p.stateSize(); ++k) {
      float divisor = !p.factored()    ? 1.0f
                      : k < rowEntries ? static_cast<float>(p.cols)
                                       : static_cast<float>(p.rows);
      float mean = p.factored() ? sum[k] / divisor : sum[k];
      own[k] = adafactorMoment(own[k], mean, s);
    }
  }
  for (int64_t i = 0; i < count; ++i)
    updateSq[i] = 0.0f;
  auto sumOfSquaredUpdates = [&](int64_t i, const AdafactorParam &p,
                                 int64_t first, int64_t size, int64_t local) {
    std::vector<float> means =
        p.factored() ? rowMeans(p, state) : std::vector<float>();
    double sum = 0.0;
    for (int64_t k = 0; k < size; ++k) {
      float u = adafactorUpdateAt(p, first + k, grad[local + k], state,
                                  means.data(), s.eps1, s.eps1Squared);
      sum += static_cast<double>(u) * u;
    }
    updateSq[i] = static_cast<float>(sum);
  };
  layout.forEachPart(flatBegin, n, sumOfSquaredUpdates);
}

void adafactorApply(int threads, float *param, const float *grad, int64_t n,
                    int64_t flatBegin, const AdafactorLayout &layout,
                    const float *state, const float *stats,
                    const float *updateSq, const AdafactorApplyScalars &s) {
  layout.forEachPart(
      flatBegin, n,
      [&](int64_t i, const AdafactorParam &p, int64_t first, int64_t size,
          int64_t local) {
        std::vector<float> means =
            p.factored() ? rowMeans(p, state) : std::vector<float>();
        float step = adafactorStepSize(stats[i], updateSq[i], p.numel, s);
        parallelFor(threads, size, 1 << 14, [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k) {
            float u = adafactorUpdateAt(p, first + k, grad[local + k], state,
                                        means.data(), s.eps1, s.eps1Squared);
            float &x = param[local + k];
            x = x * s.decayFactor;
            x = x + step * u;
          }
        });
      });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
