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
};

/// Offsets such that buffers live at the same time never overlap: largest
/// first, each at the best-fitting gap between the buffers already placed
/// whose lifetimes intersect its own, else on top of them.
Placement placeIntervals(const std::vector<Interval> &intervals);

/// The bytes live at each op index of [0, size) as intervals come and go,
/// and their maximum, each change in O(log size): lets the lowering weigh
/// one unit's choice against the whole step's peak without re-planning it.
/// (A segment tree with range add and range max; LLVM has none.)
class LiveBytes {
public:
  explicit LiveBytes(int64_t size);
  /// Adds `bytes` (negative to remove) at every op of [start, end].
  void add(int64_t start, int64_t end, int64_t bytes);
  int64_t peak() const { return size_ ? max_[1] : 0; }

private:
  void add(int64_t node, int64_t lo, int64_t hi, int64_t start, int64_t end,
           int64_t bytes);
  int64_t size_;
  // max_[n]: the largest total below node n, counting the adds at n itself
  // (pending_[n]) that cover its whole range.
  std::vector<int64_t> max_, pending_;
};

} // namespace mlir::fsdp

#endif
