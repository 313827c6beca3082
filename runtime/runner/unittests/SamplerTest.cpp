//===- SamplerTest.cpp - Choosing the next token --------------------------===//

#include "runner/Sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace {

using fsdp::driver::byteTokens;
using fsdp::driver::parseTokenIds;
using fsdp::driver::sampleToken;
using fsdp::driver::SamplingOptions;

const float kLogits[] = {0.5f, 2.0f, -1.0f, 1.0f, 2.0f};

TEST(Sampler, TemperatureZeroIsArgmaxFirstOnTies) {
  SamplingOptions greedy{0.0, 0, 7};
  for (int64_t pos = 0; pos < 20; ++pos)
    EXPECT_EQ(sampleToken(kLogits, 5, greedy, 0, pos), 1);
}

TEST(Sampler, TopKDrawsOnlyAmongTheKBest) {
  SamplingOptions top2{1.0, 2, 3};
  std::map<int64_t, int> seen;
  for (int64_t pos = 0; pos < 2000; ++pos)
    ++seen[sampleToken(kLogits, 5, top2, 0, pos)];
  // Ids 1 and 4 tie at the top; nothing else is drawn, both are.
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], 800);
  EXPECT_GT(seen[4], 800);
  SamplingOptions top1{1.0, 1, 3};
  EXPECT_EQ(sampleToken(kLogits, 5, top1, 4, 9), 1);
}

TEST(Sampler, FrequenciesFollowTheTemperedSoftmax) {
  const int draws = 40000;
  for (double temperature : {1.0, 0.5}) {
    SamplingOptions o{temperature, 0, 11};
    std::vector<int> counts(5, 0);
    for (int64_t pos = 0; pos < draws; ++pos)
      ++counts[sampleToken(kLogits, 5, o, 2, pos)];
    double total = 0;
    for (float l : kLogits)
      total += std::exp(l / temperature);
    for (int v = 0; v < 5; ++v) {
      double p = std::exp(kLogits[v] / temperature) / total;
      // Five standard deviations of a binomial proportion.
      EXPECT_NEAR(counts[v] / double(draws), p,
                  5 * std::sqrt(p * (1 - p) / draws))
          << "id " << v << " at temperature " << temperature;
    }
  }
}

TEST(Sampler, DrawsDependOnSeedSampleAndPositionOnly) {
  SamplingOptions o{1.0, 0, 5};
  int differentSample = 0, differentSeed = 0;
  SamplingOptions other{1.0, 0, 6};
  for (int64_t pos = 0; pos < 200; ++pos) {
    int64_t a = sampleToken(kLogits, 5, o, 0, pos);
    EXPECT_EQ(a, sampleToken(kLogits, 5, o, 0, pos)); // reproducible
    differentSample += a != sampleToken(kLogits, 5, o, 1, pos);
    differentSeed += a != sampleToken(kLogits, 5, other, 0, pos);
  }
  EXPECT_GT(differentSample, 50);
  EXPECT_GT(differentSeed, 50);
}

TEST(Sampler, PromptsOutsideTheVocabularyAreErrors) {
  EXPECT_EQ(byteTokens("Hi", 128), (std::vector<int64_t>{72, 105}));
  try {
    byteTokens("ok\xc3\xa9", 128);
    FAIL() << "no error";
  } catch (const std::invalid_argument &e) {
    EXPECT_STREQ(e.what(), "byte 2 of the prompt is 195, outside the model's "
                           "vocabulary of 128 tokens");
  }
  EXPECT_EQ(parseTokenIds("3,17,0", 50), (std::vector<int64_t>{3, 17, 0}));
  try {
    parseTokenIds("3,50", 50);
    FAIL() << "no error";
  } catch (const std::invalid_argument &e) {
    EXPECT_STREQ(e.what(), "token 1 of the prompt ids is 50, outside the "
                           "model's vocabulary of 50 tokens");
  }
  EXPECT_THROW(parseTokenIds("3,,4", 50), std::invalid_argument);
  EXPECT_THROW(parseTokenIds("x", 50), std::invalid_argument);
}

} // namespace
