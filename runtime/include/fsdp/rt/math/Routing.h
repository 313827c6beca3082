//===- Routing.h - mixture-of-experts routing rules -------------*- C++ -*-===//
//
// The orders, bins and segments of the routing kernels, shared by the CPU
// loops and the CUDA kernels so that both pick the same elements: top-k
// (descending, NaN largest, ties by position), the stable ascending sort
// (NaN last) and histc's bin of a value; and, for the CUDA kernels, the
// segments of a grouped GEMM from its run-time ends.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_ROUTING_H
#define FSDP_RT_MATH_ROUTING_H

#include "fsdp/rt/math/Hd.h"

#include <cstdint>

namespace fsdp {
namespace rt {

/// Whether a (at position i) comes before b (at j) in top-k's order: the
/// larger first, NaN larger than any number (torch.topk), then by position.
FSDPRT_HD inline bool topkBefore(float a, int64_t i, float b, int64_t j) {
  bool na = a != a, nb = b != b;
  if (na != nb)
    return na;
  if (!na && a != b)
    return a > b;
  return i < j;
}

/// Whether a (at i) comes before b (at j) in the stable ascending sort:
/// NaN after any number (torch.sort), equal values by position.
template <typename T>
FSDPRT_HD inline bool sortBefore(T a, int64_t i, T b, int64_t j) {
  bool na = a != a, nb = b != b;
  if (na != nb)
    return nb;
  if (!na && a != b)
    return a < b;
  return i < j;
}

/// torch.histc's bin of x among `bins` over [lo, hi], or -1 when outside
/// (NaN too). The arithmetic is torch's CPU kernel's, in double.
FSDPRT_HD inline int64_t histcBin(double x, int64_t bins, double lo,
                                  double hi) {
  if (!(x >= lo && x <= hi))
    return -1;
  int64_t b = static_cast<int64_t>((x - lo) * bins / (hi - lo));
  return b >= bins ? bins - 1 : b; // x == hi falls in the last bin
}

/// Segment end g as the CUDA kernels read it: offsets[g] clamped into
/// [0, rows]; the callers below take the running maximum, so any input
/// gives disjoint segments in order (the CPU refuses what they clamp).
template <typename LoadEnd>
FSDPRT_HD inline int64_t segmentEnd(LoadEnd end, int64_t g, int64_t rows) {
  int64_t e = end(g);
  return e < 0 ? 0 : (e > rows ? rows : e);
}

/// The group whose segment holds `row`, or -1 past the last segment: the
/// first g whose (clamped, running-maximum) end exceeds row.
template <typename LoadEnd>
FSDPRT_HD inline int64_t groupOfRow(LoadEnd end, int64_t groups, int64_t rows,
                                    int64_t row) {
  int64_t reach = 0;
  for (int64_t g = 0; g < groups; ++g) {
    int64_t e = segmentEnd(end, g, rows);
    reach = e > reach ? e : reach;
    if (row < reach)
      return g;
  }
  return -1;
}

/// Group g's segment [begin, end) (empty where its end is not past the
/// previous ones), consistent with groupOfRow.
template <typename LoadEnd>
FSDPRT_HD inline void segmentOf(LoadEnd end, int64_t g, int64_t rows,
                                int64_t &begin, int64_t &stop) {
  int64_t reach = 0;
  for (int64_t h = 0; h < g; ++h) {
    int64_t e = segmentEnd(end, h, rows);
    reach = e > reach ? e : reach;
  }
  int64_t e = segmentEnd(end, g, rows);
  begin = reach;
  stop = e > reach ? e : reach;
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_ROUTING_H
