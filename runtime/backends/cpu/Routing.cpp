//===- Routing.cpp - mixture-of-experts routing kernels -------------------===//
//
// The router's top-k, the stable sort, histc and the inverse permutation
// (the orders and bins of math/Routing.h), and the grouped GEMM: one
// OpenBLAS GEMM per non-empty segment of rows.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/Error.h"
#include "fsdp/rt/math/Routing.h"
#include "fsdp/rt/math/Storage.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

void topkForward(int threads, DType dt, const void *x, void *values,
                 int64_t *indices, int64_t rows, int64_t n, int64_t k) {
  withStorageTraits("cpu backend: ", dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    auto *px = static_cast<const T *>(x);
    auto *pv = static_cast<T *>(values);
    parallelFor(threads, rows, 64, [&](int64_t r0, int64_t r1) {
      std::vector<int64_t> order(n);
      for (int64_t r = r0; r < r1; ++r) {
        const T *row = px + r * n;
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int64_t i, int64_t j) {
                            return topkBefore(S::load(row[i]), i,
                                              S::load(row[j]), j);
                          });
        for (int64_t j = 0; j < k; ++j) {
          pv[r * k + j] = row[order[j]];
          indices[r * k + j] = order[j];
        }
      }
    });
  });
}

template <typename T, typename Load>
static void sortRows(int threads, const T *x, T *values, int64_t *indices,
                     int64_t rows, int64_t n, Load load) {
  parallelFor(threads, rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T *row = x + r * n;
      int64_t *idx = indices + r * n;
      std::iota(idx, idx + n, 0);
      std::stable_sort(idx, idx + n, [&](int64_t i, int64_t j) {
        return sortBefore(load(row[i]), i, load(row[j]), j);
      });
      for (int64_t j = 0; j < n; ++j)
        values[r * n + j] = row[idx[j]];
    }
  });
}

void sortForward(int threads, DType dt, const void *x, void *values,
                 int64_t *indices, int64_t rows, int64_t n) {
  auto same = [](auto v) { return v; };
  if (dt == DType::I32)
    return sortRows(threads, static_cast<const int32_t *>(x),
                    static_cast<int32_t *>(values), indices, rows, n, same);
  if (dt == DType::I64)
    return sortRows(threads, static_cast<const int64_t *>(x),
                    static_cast<int64_t *>(values), indices, rows, n, same);
  withStorageTraits("cpu backend: ", dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    sortRows(threads, static_cast<const T *>(x), static_cast<T *>(values),
             indices, rows, n, [](T v) { return S::load(v); });
  });
}

void histc(DType dt, const void *x, void *y, int64_t numel, int64_t bins,
           double min, double max) {
  withStorageTraits("cpu backend: ", dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    std::vector<int64_t> counts(bins, 0);
    for (int64_t i = 0; i < numel; ++i) {
      int64_t b =
          histcBin(S::load(static_cast<const T *>(x)[i]), bins, min, max);
      if (b >= 0)
        ++counts[b];
    }
    for (int64_t b = 0; b < bins; ++b)
      static_cast<T *>(y)[b] = S::store(static_cast<float>(counts[b]));
  });
}

void invertPermutation(DType dt, const void *p, void *y, int64_t n) {
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = loadIndex(dt, p, i);
    if (v < 0 || v >= n || seen[v])
      fail(Status::OutOfRange, "invert_permutation: entry ", v, " at position ",
           i, " makes the input no permutation of [0, ", n, ")");
    seen[v] = true;
    if (dt == DType::I32)
      static_cast<int32_t *>(y)[v] = static_cast<int32_t>(i);
    else
      static_cast<int64_t *>(y)[v] = i;
  }
}

/// The segment ends, checked: non-decreasing and at most d.rows.
static std::vector<int64_t> checkedEnds(DType type, const void *offsets,
                                        const GroupedDims &d) {
  std::vector<int64_t> ends(d.groups);
  for (int64_t g = 0; g < d.groups; ++g) {
    ends[g] = loadIndex(type, offsets, g);
    int64_t prev = g ? ends[g - 1] : 0;
    if (ends[g] < prev || ends[g] > d.rows)
      fail(Status::OutOfRange, "grouped matmul: offset ", ends[g], " of group ",
           g, " is not in [", prev, ", ", d.rows, "]");
  }
  return ends;
}

void groupedMatmulForward(int threads, DType offsetsType, const float *x,
                          const float *w, const void *offsets, float *y,
                          const GroupedDims &d) {
  std::vector<int64_t> ends = checkedEnds(offsetsType, offsets, d);
  int64_t begin = 0;
  for (int64_t g = 0; g < d.groups; begin = ends[g++])
    if (ends[g] > begin)
      gemm(threads, false, false, ends[g] - begin, d.n, d.k, 1.0f,
           x + begin * d.k, d.k, w + g * d.k * d.n, d.n, 0.0f, y + begin * d.n,
           d.n);
  int64_t last = d.groups ? ends.back() : 0;
  std::fill(y + last * d.n, y + d.rows * d.n, 0.0f); // rows of no group
}

void groupedMatmulBackwardWeight(int threads, DType offsetsType, const float *x,
                                 const float *dy, const void *offsets,
                                 float *dw, const GroupedDims &d) {
  std::vector<int64_t> ends = checkedEnds(offsetsType, offsets, d);
  int64_t begin = 0;
  for (int64_t g = 0; g < d.groups; begin = ends[g++]) {
    float *dwg = dw + g * d.k * d.n;
    if (ends[g] > begin)
      gemm(threads, true, false, d.k, d.n, ends[g] - begin, 1.0f,
           x + begin * d.k, d.k, dy + begin * d.n, d.n, 0.0f, dwg, d.n);
    else
      std::fill(dwg, dwg + d.k * d.n, 0.0f);
  }
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
