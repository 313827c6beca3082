//===- Loss.cpp - cross_entropy and mse_loss ------------------------------===//
//
// Both follow PyTorch: cross_entropy's mean divides by the number of
// non-ignored targets (NaN when every target is ignored, as 0/0 in PyTorch);
// mse_loss's mean divides by the element count.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/Error.h"
#include "fsdp/rt/backend/IndexCheck.h"
#include "fsdp/rt/math/Rows.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// Targets are data: validated up front, so a bad one fails the op before
/// any output is written.
static std::vector<int64_t> checkedTargets(const char *op, DType targetType,
                                           const void *targets, int64_t n,
                                           int64_t c, int64_t ignoreIndex,
                                           int64_t &count) {
  std::vector<int64_t> t(n);
  IndexRange range{c, true, ignoreIndex};
  count = 0;
  for (int64_t i = 0; i < n; ++i) {
    t[i] = loadIndex(targetType, targets, i);
    if (t[i] == ignoreIndex)
      continue;
    if (!range.allows(t[i]))
      failOnIndex(op, IndexKind::Target, range, t[i], i);
    ++count;
  }
  return t;
}

/// Row r's loss term logsumexp(x) - x[t] (0 for an ignored row), and, where
/// dx is given, its gradient (softmax(x) - onehot(t)) * g (0 for an
/// ignored row and for the padding columns [c, width)), as softmaxRow
/// computes it; dx may be x.
static double crossEntropyRow(const float *x, int64_t t, int64_t c,
                              int64_t width, int64_t ignoreIndex, float g,
                              float *dx) {
  if (dx)
    std::fill(dx + c, dx + width, 0.0f);
  if (t == ignoreIndex) {
    if (dx)
      std::fill(dx, dx + c, 0.0f);
    return 0.0;
  }
  float max, logSum;
  rowLogSumExp(x, c, 1, max, logSum);
  double term = static_cast<double>(max) + logSum - x[t];
  if (dx) {
    for (int64_t j = 0; j < c; ++j)
      dx[j] = std::exp(x[j] - max - logSum);
    dx[t] -= 1.0f;
    for (int64_t j = 0; j < c; ++j)
      dx[j] *= g;
  }
  return term;
}

/// The rows in parallel (writing each row's gradient where dlogits is
/// given), their terms then summed in the CPU's fixed blocks, in row order:
/// the loss.
static float crossEntropyRows(int threads, const float *logits,
                              const std::vector<int64_t> &t, int64_t count,
                              int64_t n, int64_t c, int64_t width,
                              LossReduction reduction, int64_t ignoreIndex,
                              float g, float *dlogits) {
  std::vector<double> terms(n);
  parallelFor(threads, n, std::max<int64_t>(1, 8192 / width),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r)
                  terms[r] = crossEntropyRow(
                      logits + r * width, t[r], c, width, ignoreIndex, g,
                      dlogits ? dlogits + r * width : nullptr);
              });
  double total = blockedSum(threads, n, [&](int64_t r0, int64_t r1) {
    double sum = 0.0;
    for (int64_t r = r0; r < r1; ++r)
      sum += terms[r];
    return sum;
  });
  return static_cast<float>(reduction == LossReduction::Mean
                                ? total / static_cast<double>(count)
                                : total);
}

static float gradScale(float dloss, int64_t count, LossReduction reduction) {
  return reduction == LossReduction::Mean ? dloss / static_cast<float>(count)
                                          : dloss;
}

void crossEntropyForward(int threads, DType targetType, const float *logits,
                         const void *targets, float *loss, int64_t n, int64_t c,
                         int64_t width, LossReduction reduction,
                         int64_t ignoreIndex) {
  int64_t count;
  std::vector<int64_t> t = checkedTargets("cross_entropy_forward", targetType,
                                          targets, n, c, ignoreIndex, count);
  *loss = crossEntropyRows(threads, logits, t, count, n, c, width, reduction,
                           ignoreIndex, 0.0f, nullptr);
}

void crossEntropyBackward(int threads, DType targetType, const float *logits,
                          const void *targets, float dloss, float *dlogits,
                          int64_t n, int64_t c, int64_t width,
                          LossReduction reduction, int64_t ignoreIndex) {
  int64_t count;
  std::vector<int64_t> t = checkedTargets("cross_entropy_backward", targetType,
                                          targets, n, c, ignoreIndex, count);
  crossEntropyRows(threads, logits, t, count, n, c, width, reduction,
                   ignoreIndex, gradScale(dloss, count, reduction), dlogits);
}

void crossEntropyForwardBackward(int threads, DType targetType,
                                 const float *logits, const void *targets,
                                 float dloss, float *loss, float *dlogits,
                                 int64_t n, int64_t c, int64_t width,
                                 LossReduction reduction,
                                 int64_t ignoreIndex) {
  int64_t count;
  std::vector<int64_t> t =
      checkedTargets("cross_entropy_forward_backward", targetType, targets, n,
                     c, ignoreIndex, count);
  *loss = crossEntropyRows(threads, logits, t, count, n, c, width, reduction,
                           ignoreIndex, gradScale(dloss, count, reduction),
                           dlogits);
}

void mseLossForward(int threads, const float *a, const float *b, float *loss,
                    int64_t n, LossReduction reduction) {
  double total = blockedSum(threads, n, [&](int64_t i0, int64_t i1) {
    double sum = 0.0;
    for (int64_t i = i0; i < i1; ++i) {
      double diff = static_cast<double>(a[i]) - b[i];
      sum += diff * diff;
    }
    return sum;
  });
  *loss = static_cast<float>(reduction == LossReduction::Mean
                                 ? total / static_cast<double>(n)
                                 : total);
}

void mseLossBackward(int threads, const float *a, const float *b, float dloss,
                     float *da, float *db, int64_t n, LossReduction reduction) {
  float g =
      2.0f * (reduction == LossReduction::Mean ? dloss / static_cast<float>(n)
                                               : dloss);
  parallelFor(threads, n, 1 << 15, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float d = g * (a[i] - b[i]);
      if (da)
        da[i] = d;
      if (db)
        db[i] = -d;
    }
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
