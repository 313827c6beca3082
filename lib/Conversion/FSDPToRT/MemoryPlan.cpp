//===- MemoryPlan.cpp - static placement of a step's transient buffers ----===//

#include "MemoryPlan.h"

#include <algorithm>
#include <map>
#include <numeric>

using namespace mlir::fsdp;

static bool overlapInTime(const Interval &a, const Interval &b) {
  return a.start <= b.end && b.start <= a.end;
}

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

  std::vector<size_t> placed;
  for (size_t i : order) {
    const Interval &interval = intervals[i];
    // Occupied [offset, offset + bytes) ranges of time-overlapping buffers.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (overlapInTime(interval, intervals[j]))
        busy.push_back({plan.offsets[j], plan.offsets[j] + intervals[j].bytes});
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap that holds the buffer, else the end.
    int64_t cursor = 0, best = -1, bestGap = INT64_MAX;
    for (auto [begin, end] : busy) {
      int64_t gap = begin - cursor;
      if (gap >= interval.bytes && gap < bestGap) {
        best = cursor;
        bestGap = gap;
      }
      cursor = std::max(cursor, end);
    }
    plan.offsets[i] = best >= 0 ? best : cursor;
    plan.extent = std::max(plan.extent, plan.offsets[i] + interval.bytes);
    placed.push_back(i);
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
