//===- MemoryPlanTest.cpp - The static placement of transient buffers -----===//

#include "../../lib/Conversion/FSDPToRT/MemoryPlan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <random>

using namespace mlir::fsdp;

namespace {

bool overlap(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return a0 <= b1 && b0 <= a1;
}

/// The plan's own definition, written the slow, obvious way: largest first
/// (earlier start first), each at the best-fitting gap between the placed
/// buffers whose lifetimes meet its own, collected and sorted afresh.
std::vector<int64_t> referenceOffsets(const std::vector<Interval> &in) {
  std::vector<size_t> order(in.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return in[a].bytes != in[b].bytes ? in[a].bytes > in[b].bytes
                                      : in[a].start < in[b].start;
  });
  std::vector<int64_t> offsets(in.size(), 0);
  std::vector<size_t> placed;
  for (size_t i : order) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (size_t j : placed)
      if (overlap(in[i].start, in[i].end, in[j].start, in[j].end))
        busy.push_back({offsets[j], offsets[j] + in[j].bytes});
    std::sort(busy.begin(), busy.end());
    int64_t cursor = 0, best = -1, bestGap = INT64_MAX;
    for (auto [begin, end] : busy) {
      if (begin - cursor >= in[i].bytes && begin - cursor < bestGap) {
        best = cursor;
        bestGap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    offsets[i] = best >= 0 ? best : cursor;
    placed.push_back(i);
  }
  return offsets;
}

TEST(MemoryPlan, BuffersLiveAtDifferentTimesShareMemory) {
  Placement plan = placeIntervals({{128, 0, 2}, {64, 3, 5}, {128, 6, 9}});
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(plan.extent, 128);
  EXPECT_EQ(plan.livePeak, 128);
}

TEST(MemoryPlan, BuffersLiveTogetherNeverOverlap) {
  Placement plan = placeIntervals({{64, 0, 4}, {128, 2, 6}, {64, 3, 3}});
  // Largest first: 128 at 0; then the first 64 (earlier start) above it;
  // the last 64 meets both and goes on top.
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{128, 0, 192}));
  EXPECT_EQ(plan.extent, 256);
  EXPECT_EQ(plan.livePeak, 256);
}

TEST(MemoryPlan, AHoleLeftByADeadBufferIsReused) {
  std::vector<Interval> in = {{256, 0, 30}, {128, 0, 30}, {64, 0, 30},
                              {128, 0, 5},  {64, 0, 5},   {64, 10, 20}};
  // Largest first: 256@0, 128@256, the early 128@384, 64@512, the early
  // 64@576. While [10, 20] is live the early ones are dead: the 64 bytes
  // fit in [384, 512), below the top.
  Placement plan = placeIntervals(in);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 256, 512, 384, 576, 384}));
  EXPECT_EQ(plan.extent, 640);
  EXPECT_EQ(plan.livePeak, 640);
}

TEST(MemoryPlan, BestFitTakesTheSmallestHole) {
  // While [10, 20] is live: a 192-byte hole at [0, 192) and a 64-byte hole
  // at [320, 384); 64 bytes go into the smaller one.
  std::vector<Interval> in = {{64, 0, 30},  {192, 0, 5}, {64, 0, 30},
                              {64, 0, 5},   {64, 0, 30}, {64, 10, 20}};
  Placement plan = placeIntervals(in);
  EXPECT_EQ(plan.offsets[1], 0);   // largest first
  EXPECT_EQ(plan.offsets[5], plan.offsets[3]);
}

TEST(MemoryPlan, LivePeakIsTheLowerBoundTheExtentMeets) {
  Placement plan = placeIntervals({{64, 0, 1}, {64, 1, 2}, {64, 2, 3}});
  EXPECT_EQ(plan.livePeak, 128);
  EXPECT_GE(plan.extent, plan.livePeak);
}

TEST(MemoryPlan, EmptyStepPlansNothing) {
  Placement plan = placeIntervals({});
  EXPECT_TRUE(plan.offsets.empty());
  EXPECT_EQ(plan.extent, 0);
  EXPECT_EQ(plan.livePeak, 0);
}

// Random steps: never two live buffers in the same bytes, the extent covers
// every buffer and the live peak, and the offsets are exactly the
// definition's (the fast walk must not change any plan).
TEST(MemoryPlan, RandomStepsMatchTheDefinitionAndNeverOverlap) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    int n = 1 + int(rng() % 60);
    std::vector<Interval> in;
    for (int i = 0; i < n; ++i) {
      int64_t start = int64_t(rng() % 100);
      int64_t length = rng() % 4 == 0 ? int64_t(rng() % 100) : int64_t(rng() % 8);
      in.push_back({alignToArena(int64_t(rng() % 5000)), start, start + length});
    }
    Placement plan = placeIntervals(in);
    ASSERT_EQ(plan.offsets, referenceOffsets(in)) << "trial " << trial;
    int64_t end = 0;
    for (int i = 0; i < n; ++i) {
      end = std::max(end, plan.offsets[i] + in[i].bytes);
      for (int j = i + 1; j < n; ++j)
        if (overlap(in[i].start, in[i].end, in[j].start, in[j].end))
          ASSERT_FALSE(overlap(plan.offsets[i], plan.offsets[i] + in[i].bytes - 1,
                               plan.offsets[j], plan.offsets[j] + in[j].bytes - 1))
              << "trial " << trial << ": buffers " << i << " and " << j;
    }
    EXPECT_EQ(plan.extent, end);
    EXPECT_GE(plan.extent, plan.livePeak);
  }
}

TEST(LiveBytes, PeakFollowsAddsAndRemovals) {
  LiveBytes live(10);
  EXPECT_EQ(live.peak(), 0);
  live.add(0, 4, 64);
  live.add(3, 9, 128);
  EXPECT_EQ(live.peak(), 192); // ops 3 and 4
  live.add(0, 4, -64);
  EXPECT_EQ(live.peak(), 128);
  live.add(8, 20, 256); // clipped to the last op
  EXPECT_EQ(live.peak(), 384);
}

// Random adds and removals: the peak is always the maximum of the bytes
// live at each op, counted one op at a time.
TEST(LiveBytes, RandomChangesMatchCountingEveryOp) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 50; ++trial) {
    int64_t size = 1 + int64_t(rng() % 200);
    LiveBytes live(size);
    std::vector<int64_t> bytesAt(size, 0);
    std::vector<Interval> added;
    for (int change = 0; change < 100; ++change) {
      if (!added.empty() && rng() % 3 == 0) {
        size_t k = rng() % added.size();
        Interval gone = added[k];
        added.erase(added.begin() + k);
        live.add(gone.start, gone.end, -gone.bytes);
        for (int64_t i = gone.start; i <= gone.end; ++i)
          bytesAt[i] -= gone.bytes;
      } else {
        int64_t start = int64_t(rng() % size);
        int64_t end = start + int64_t(rng() % (size - start));
        Interval in{int64_t(rng() % 1000), start, end};
        added.push_back(in);
        live.add(in.start, in.end, in.bytes);
        for (int64_t i = start; i <= end; ++i)
          bytesAt[i] += in.bytes;
      }
      ASSERT_EQ(live.peak(), *std::max_element(bytesAt.begin(), bytesAt.end()))
          << "trial " << trial << ", change " << change;
    }
  }
}

} // namespace
