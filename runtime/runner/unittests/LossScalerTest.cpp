//===- LossScalerTest.cpp - GradScaler's dynamic loss scale ---------------===//
#include "runner/LossScaler.h"

#include <gtest/gtest.h>

#include <stdexcept>

using fsdp::driver::LossScaler;
using fsdp::driver::LossScalerConfig;

namespace {

// torch.amp.GradScaler defaults: 2^16, x2 after 2000 good steps, x0.5 and a
// skipped step on inf/NaN.
TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterTheInterval) {
  LossScalerConfig c;
  c.growthInterval = 3;
  LossScaler s(c);
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(/*foundInf=*/true);
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.skippedSteps(), 1);
  EXPECT_EQ(s.optimizerSteps(), 0);
  s.update(false);
  s.update(false);
  EXPECT_EQ(s.scale(), 32768.0);
  s.update(false); // the third good step in a row
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.optimizerSteps(), 3);
  EXPECT_EQ(s.growthTracker(), 0);
}

TEST(LossScaler, AnOverflowRestartsTheGrowthCount) {
  LossScalerConfig c;
  c.growthInterval = 2;
  LossScaler s(c);
  s.update(false);
  s.update(true); // resets the count: two more good steps to grow
  s.update(false);
  EXPECT_EQ(s.scale(), 32768.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.skippedSteps(), 1);
  EXPECT_EQ(s.optimizerSteps(), 3);
}

TEST(LossScaler, RestoresCheckpointedState) {
  LossScaler s{LossScalerConfig{}};
  s.restore(1024.0, 7, 3, 40);
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.growthTracker(), 7);
  EXPECT_EQ(s.skippedSteps(), 3);
  EXPECT_EQ(s.optimizerSteps(), 40);
}

TEST(LossScaler, RejectsSettingsOutOfRange) {
  auto bad = [](auto change) {
    LossScalerConfig c;
    change(c);
    EXPECT_THROW(c.validate(), std::invalid_argument);
  };
  bad([](LossScalerConfig &c) { c.init = 0; });
  bad([](LossScalerConfig &c) { c.growthFactor = 1; });
  bad([](LossScalerConfig &c) { c.backoffFactor = 1; });
  bad([](LossScalerConfig &c) { c.growthInterval = 0; });
  EXPECT_NO_THROW(LossScalerConfig{}.validate());
}

} // namespace
