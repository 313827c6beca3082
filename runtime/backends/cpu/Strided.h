//===- Strided.h - Walking an index space in contiguous runs ----*- C++ -*-===//
//
// Broadcasting, transposes and reductions all visit a row-major index space
// while several operands step through it with their own strides (0 along a
// broadcast dim). forEachRun hands out maximal runs along the last dim, so
// the inner loops are plain strided loops the compiler can vectorise.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CPU_STRIDED_H
#define FSDP_RT_CPU_STRIDED_H

#include "fsdp/rt/backend/Shape.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

/// Calls f(linearStart, length, offsets) for each run of the last dim of
/// `shape` within linear indices [begin, end); offsets[i] is operand i's
/// element offset at the run start, and operand i advances by
/// strides[i].back() per element of the run.
template <size_t N, typename F>
void forEachRun(const Shape &shape,
                const std::array<const std::vector<int64_t> *, N> &strides,
                int64_t begin, int64_t end, F &&f) {
  size_t rank = shape.size();
  if (rank == 0) {
    if (begin < end)
      f(int64_t(0), int64_t(1), std::array<int64_t, N>{});
    return;
  }
  std::vector<int64_t> idx(rank);
  int64_t rem = begin;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = shape[d] ? rem % shape[d] : 0;
    rem = shape[d] ? rem / shape[d] : 0;
  }
  int64_t pos = begin;
  while (pos < end) {
    std::array<int64_t, N> offsets{};
    for (size_t i = 0; i < N; ++i)
      for (size_t d = 0; d < rank; ++d)
        offsets[i] += idx[d] * (*strides[i])[d];
    int64_t len = std::min(shape[rank - 1] - idx[rank - 1], end - pos);
    f(pos, len, offsets);
    pos += len;
    idx[rank - 1] += len;
    for (size_t d = rank - 1; d > 0 && idx[d] == shape[d]; --d) {
      idx[d] = 0;
      ++idx[d - 1];
    }
  }
}

} // namespace cpu
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CPU_STRIDED_H
