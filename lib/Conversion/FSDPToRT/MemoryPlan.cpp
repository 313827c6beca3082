//===- MemoryPlan.cpp - static placement of a step's transient buffers ----===//

#include "MemoryPlan.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

using namespace mlir::fsdp;

namespace {
/// A placed buffer: bytes [begin, end) of the arena over ops [start, stop].
struct Placed {
  int64_t begin, end;
  int64_t start, stop;
  bool operator<(const Placed &o) const {
    return std::tie(begin, end) < std::tie(o.begin, o.end);
  }
};
} // namespace

Placement mlir::fsdp::placeIntervals(const std::vector<Interval> &intervals) {
  Placement plan;
  plan.offsets.assign(intervals.size(), 0);
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (intervals[a].bytes != intervals[b].bytes)
      return intervals[a].bytes > intervals[b].bytes;
    return intervals[a].start < intervals[b].start;
  });

  // Placed buffers kept sorted by offset, so that each new buffer walks the
  // time-overlapping ones in offset order without collecting and sorting
  // them.
  std::vector<Placed> placed;
  placed.reserve(intervals.size());
  for (size_t i : order) {
    const Interval &interval = intervals[i];
    // Best fit: the smallest gap between time-overlapping buffers that
    // holds the buffer, else the end.
    int64_t cursor = 0, best = -1, bestGap = INT64_MAX;
    for (const Placed &other : placed) {
      if (other.start > interval.end || interval.start > other.stop)
        continue;
      int64_t gap = other.begin - cursor;
      if (gap >= interval.bytes && gap < bestGap) {
        best = cursor;
        bestGap = gap;
      }
      cursor = std::max(cursor, other.end);
    }
    plan.offsets[i] = best >= 0 ? best : cursor;
    plan.extent = std::max(plan.extent, plan.offsets[i] + interval.bytes);
    Placed range{plan.offsets[i], plan.offsets[i] + interval.bytes,
                 interval.start, interval.end};
    placed.insert(std::upper_bound(placed.begin(), placed.end(), range),
                  range);
  }

  // The live peak, by a sweep over start/end events.
  std::map<int64_t, int64_t> delta;
  for (const Interval &interval : intervals) {
    delta[interval.start] += interval.bytes;
    delta[interval.end + 1] -= interval.bytes;
  }
  int64_t live = 0;
  for (auto [point, change] : delta) {
    live += change;
    plan.livePeak = std::max(plan.livePeak, live);
  }
  return plan;
}

LiveBytes::LiveBytes(int64_t size)
    : size_(size), max_(4 * std::max<int64_t>(size, 1), 0),
      pending_(max_.size(), 0) {}

void LiveBytes::add(int64_t start, int64_t end, int64_t bytes) {
  if (size_ && start <= end)
    add(1, 0, size_ - 1, std::max<int64_t>(start, 0),
        std::min(end, size_ - 1), bytes);
}

void LiveBytes::add(int64_t node, int64_t lo, int64_t hi, int64_t start,
                    int64_t end, int64_t bytes) {
  if (end < lo || hi < start)
    return;
  if (start <= lo && hi <= end) {
    max_[node] += bytes;
    pending_[node] += bytes;
    return;
  }
  int64_t mid = lo + (hi - lo) / 2;
  add(2 * node, lo, mid, start, end, bytes);
  add(2 * node + 1, mid + 1, hi, start, end, bytes);
  max_[node] = std::max(max_[2 * node], max_[2 * node + 1]) + pending_[node];
}
