//===- Reduce.cpp - reduce_sum / reduce_mean and their backward, cumsum ---===//
#include "Kernels.h"
#include "Parallel.h"
#include "Strided.h"

#include "fsdp/rt/math/Scan.h"

#include <algorithm>
#include <array>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// Element offsets of every index of the sub-space spanned by the dims with
/// take[d] set (empty if one of them has size 0).
static std::vector<int64_t> subspaceOffsets(const Shape &shape,
                                            const std::vector<bool> &take) {
  std::vector<int64_t> strides = stridesOf(shape);
  std::vector<int64_t> offsets{0};
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!take[d])
      continue;
    std::vector<int64_t> next;
    next.reserve(offsets.size() * shape[d]);
    for (int64_t base : offsets)
      for (int64_t i = 0; i < shape[d]; ++i)
        next.push_back(base + i * strides[d]);
    offsets.swap(next);
  }
  return offsets;
}

void reduceForward(int threads, ReduceKind kind, const float *x,
                   const Shape &xShape, const std::vector<int64_t> &dims,
                   float *y) {
  std::vector<bool> reduced(xShape.size(), false);
  for (int64_t d : dims)
    reduced[d] = true;
  std::vector<bool> kept(reduced.size());
  for (size_t d = 0; d < reduced.size(); ++d)
    kept[d] = !reduced[d];
  std::vector<int64_t> red = subspaceOffsets(xShape, reduced);
  std::vector<int64_t> keep = subspaceOffsets(xShape, kept);
  double factor =
      kind == ReduceKind::Mean ? 1.0 / static_cast<double>(red.size()) : 1.0;
  bool lastReduced = !xShape.empty() && reduced.back();
  // Each y[k] is summed over the reduced offsets in increasing order in both
  // loop orders; only the memory walk differs (contiguous either way).
  parallelFor(threads, keep.size(), 64, [&](int64_t k0, int64_t k1) {
    if (lastReduced) {
      for (int64_t k = k0; k < k1; ++k) {
        double acc = 0.0;
        const float *base = x + keep[k];
        for (int64_t r : red)
          acc += base[r];
        y[k] = static_cast<float>(acc * factor);
      }
      return;
    }
    std::vector<double> acc(k1 - k0, 0.0);
    for (int64_t r : red)
      for (int64_t k = k0; k < k1; ++k)
        acc[k - k0] += x[keep[k] + r];
    for (int64_t k = k0; k < k1; ++k)
      y[k] = static_cast<float>(acc[k - k0] * factor);
  });
}

void reduceBackward(int threads, ReduceKind kind, const float *dy,
                    const Shape &xShape, const std::vector<int64_t> &dims,
                    float *dx) {
  int64_t count = 0; // dy seen with keepdim = true
  std::vector<int64_t> sdy =
      broadcastStrides(keptShape(xShape, dims, count), xShape);
  float factor =
      kind == ReduceKind::Mean ? 1.0f / static_cast<float>(count) : 1.0f;
  int64_t last = xShape.empty() ? 0 : sdy.back();
  parallelFor(threads, numelOf(xShape), 1 << 15, [&](int64_t b, int64_t e) {
    forEachRun<1>(xShape, {&sdy}, b, e,
                  [&](int64_t start, int64_t len, std::array<int64_t, 1> off) {
                    for (int64_t i = 0; i < len; ++i)
                      dx[start + i] = dy[off[0] + i * last] * factor;
                  });
  });
}

void cumsum(int threads, DType dt, const void *x, void *y, int64_t outer,
            int64_t dim, int64_t inner, bool reverse) {
  withScanTraits(dt, [&](auto scan) {
    using Sc = decltype(scan);
    auto *px = static_cast<const typename Sc::T *>(x);
    auto *py = static_cast<typename Sc::T *>(y);
    // One task per line; a line is `dim` elements.
    parallelFor(threads, outer * inner,
                std::max<int64_t>(1, 4096 / std::max<int64_t>(dim, 1)),
                [&](int64_t l0, int64_t l1) {
                  for (int64_t l = l0; l < l1; ++l) {
                    int64_t o = l / inner, at = o * dim * inner + (l - o * inner);
                    cumsumLine<Sc>(px + at, py + at, dim, inner, reverse);
                  }
                });
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
