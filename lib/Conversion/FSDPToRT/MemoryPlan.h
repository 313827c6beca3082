//===- MemoryPlan.h - static placement of a step's transient buffers -*- C++ -*-===//

#ifndef FSDP_LIB_CONVERSION_FSDPTORT_MEMORYPLAN_H
#define FSDP_LIB_CONVERSION_FSDPTORT_MEMORYPLAN_H

#include "fsdp/rt/fsdprt.h"

#include <cstdint>
#include <vector>

namespace mlir::fsdp {

/// The runtime arena's alignment: every buffer is rounded up to it, so the
/// plan counts bytes as the runtime does.
constexpr int64_t kArenaAlignment = FSDPRT_ARENA_ALIGNMENT;

inline int64_t alignToArena(int64_t bytes) {
  int64_t b = bytes < 1 ? 1 : bytes;
  return (b + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// A buffer live over the op indices [start, end].
struct Interval {
  int64_t bytes; // aligned
  int64_t start, end;
};

struct Placement {
  std::vector<int64_t> offsets; // per interval, from the transient base
  int64_t extent = 0;           // bytes the placed buffers span
  int64_t livePeak = 0;         // max bytes live at one op: the lower bound
  bool exceeded = false;        // stopped once extent > the limit given
};

/// Offsets such that buffers live at the same time never overlap: largest
/// first, each at the lowest offset that fits between the buffers already
/// placed whose lifetimes intersect its own. With `extentLimit`, stops as
/// soon as the extent exceeds it (`exceeded`; offsets then incomplete):
/// a trial plan that cannot win needs no finishing.
Placement placeIntervals(const std::vector<Interval> &intervals,
                         int64_t extentLimit = INT64_MAX);

} // namespace mlir::fsdp

#endif
