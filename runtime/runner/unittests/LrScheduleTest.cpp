//===- LrScheduleTest.cpp - The learning rate of each step ----------------===//
#include "fsdp/rt/LrSchedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

using fsdp::rt::LrSchedule;

namespace {

TEST(LrSchedule, ConstantIsOneEveryStep) {
  LrSchedule s;
  for (int64_t step : {0, 1, 99, 1000})
    EXPECT_EQ(s.factor(step, 100), 1.0);
}

// nanoGPT's get_lr: lr * (it + 1) / (warmup + 1) while it < warmup.
TEST(LrSchedule, WarmupRisesLinearlyThenHoldsForConstant) {
  LrSchedule s{"constant", 4, 0, 0.0};
  EXPECT_DOUBLE_EQ(s.factor(0, 10), 1.0 / 5);
  EXPECT_DOUBLE_EQ(s.factor(3, 10), 4.0 / 5);
  EXPECT_DOUBLE_EQ(s.factor(4, 10), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(9, 10), 1.0);
}

TEST(LrSchedule, CosineDecaysFromThePeakToTheFloor) {
  LrSchedule s{"cosine", 2, 8, 0.1};
  EXPECT_DOUBLE_EQ(s.factor(2, 100), 1.0);             // progress 0
  EXPECT_DOUBLE_EQ(s.factor(6, 100), 0.1 + 0.9 * 0.5); // progress 1/2
  EXPECT_NEAR(s.factor(4, 100), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.25)),
              1e-15);
  EXPECT_DOUBLE_EQ(s.factor(10, 100), 0.1); // progress 1
  EXPECT_DOUBLE_EQ(s.factor(50, 100), 0.1); // held after
}

TEST(LrSchedule, LinearDecayReachesTheFloorAtTheRunsEndByDefault) {
  LrSchedule s{"linear", 0, 0, 0.0};
  // decay 0: over the run's 10 steps.
  EXPECT_DOUBLE_EQ(s.factor(0, 10), 1.0);
  EXPECT_DOUBLE_EQ(s.factor(5, 10), 0.5);
  EXPECT_DOUBLE_EQ(s.factor(9, 10), 0.1);
}

TEST(LrSchedule, OutOfRangeFieldsAreNamedByTheirOption) {
  auto why = [](LrSchedule s) { return s.invalidBecause(); };
  EXPECT_EQ(why({"cos", 0, 0, 0.0}),
            "lr-schedule must be constant, cosine or linear, not 'cos'");
  EXPECT_EQ(why({"cosine", -1, 0, 0.0}), "warmup-steps must be >= 0, got -1");
  EXPECT_EQ(why({"cosine", 0, -2, 0.0}), "decay-steps must be >= 0, got -2");
  EXPECT_EQ(why({"cosine", 0, 0, 1.5}),
            "min-lr-ratio must be in [0, 1], got 1.5");
  EXPECT_EQ(why({"cosine", 0, 0, std::nan("")}),
            "min-lr-ratio must be in [0, 1], got nan");
  EXPECT_EQ(why({"linear", 10, 100, 0.1}), "");
}

} // namespace
