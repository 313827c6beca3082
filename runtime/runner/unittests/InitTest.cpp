//===- InitTest.cpp - Deterministic parameter initialisation --------------===//
#include "runner/Init.h"

#include "TestProgram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace {

struct Stats {
  double mean = 0, std = 0, min = 0, max = 0;
};

Stats statsOf(const std::vector<float> &v) {
  Stats s;
  double sum = 0, sq = 0;
  for (float x : v)
    sum += x;
  s.mean = sum / v.size();
  for (float x : v)
    sq += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(sq / v.size());
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  return s;
}

std::vector<float> sample(const std::string &kind, std::vector<double> args,
                          std::vector<int64_t> shape) {
  return initTensor(InitSpec{kind, std::move(args)}, shape, 1234, "w");
}

/// Mean and standard deviation within a few standard errors of 1e5 samples.
void expectMoments(const std::vector<float> &v, double mean, double std) {
  Stats s = statsOf(v);
  double n = static_cast<double>(v.size());
  EXPECT_NEAR(s.mean, mean, 5 * std / std::sqrt(n)) << "mean";
  EXPECT_NEAR(s.std, std, 0.02 * std) << "standard deviation";
}

TEST(Init, FansFollowTorch) {
  Fans linear = computeFans({5, 6}, "fc.weight"); // [out, in]
  EXPECT_EQ(linear.fanIn, 6);
  EXPECT_EQ(linear.fanOut, 5);
  Fans conv = computeFans({16, 3, 5, 7}, "conv.weight"); // [out, in, kh, kw]
  EXPECT_EQ(conv.fanIn, 3 * 35);
  EXPECT_EQ(conv.fanOut, 16 * 35);
  try {
    computeFans({6}, "ln.bias");
    FAIL() << "a 1-D tensor has no fans";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("'ln.bias'"), std::string::npos)
        << e.what();
  }
}

TEST(Init, ConstantsAreExact) {
  for (float x : sample("zeros", {}, {100}))
    ASSERT_EQ(x, 0.0f);
  for (float x : sample("ones", {}, {100}))
    ASSERT_EQ(x, 1.0f);
  for (float x : sample("constant", {-3.5}, {7, 3}))
    ASSERT_EQ(x, -3.5f);
}

TEST(Init, NormalAndUniformHaveTheirMoments) {
  expectMoments(sample("normal", {0.5, 2.0}, {100000}), 0.5, 2.0);
  std::vector<float> u = sample("uniform", {-0.4, 0.6}, {100000});
  expectMoments(u, 0.1, 1.0 / std::sqrt(12.0));
  Stats s = statsOf(u);
  EXPECT_GE(s.min, -0.4f);
  EXPECT_LE(s.max, 0.6f);
  EXPECT_LT(s.min, -0.399);
  EXPECT_GT(s.max, 0.599);
}

TEST(Init, KaimingMatchesTorchScales) {
  // nn.Linear(100, 1000).weight: kaiming_uniform(a=sqrt(5)) gives the
  // bound 1/sqrt(fan_in) = 0.1.
  std::vector<float> w = sample("kaiming_uniform", {std::sqrt(5.0)}, {1000, 100});
  Stats s = statsOf(w);
  EXPECT_GE(s.min, -0.1f);
  EXPECT_LE(s.max, 0.1f);
  EXPECT_LT(s.min, -0.0999);
  expectMoments(w, 0.0, 0.1 / std::sqrt(3.0));
  // kaiming_normal(a=0): std = sqrt(2 / fan_in), fan_in = 20 * 5.
  expectMoments(sample("kaiming_normal", {0.0}, {1000, 20, 5}), 0.0,
                std::sqrt(2.0 / 100.0));
}

TEST(Init, XavierMatchesTorchScales) {
  std::vector<float> w = sample("xavier_uniform", {1.0}, {200, 500});
  double bound = std::sqrt(6.0 / 700.0);
  Stats s = statsOf(w);
  EXPECT_GE(s.min, -static_cast<float>(bound));
  EXPECT_LE(s.max, static_cast<float>(bound));
  expectMoments(w, 0.0, bound / std::sqrt(3.0));
  // fan_in = 50 * 10, fan_out = 100 * 10: std = gain * sqrt(2 / 1500).
  expectMoments(sample("xavier_normal", {2.0}, {100, 50, 2, 5}), 0.0,
                2.0 * std::sqrt(2.0 / 1500.0));
}

TEST(Init, TruncNormalStaysInItsBounds) {
  // Standard normal truncated to [-2, 2]: variance 1 - 4 phi(2) / (2 Phi(2) - 1).
  std::vector<float> v = sample("trunc_normal", {0.0, 1.0, -2.0, 2.0}, {100000});
  Stats s = statsOf(v);
  EXPECT_GE(s.min, -2.0f);
  EXPECT_LE(s.max, 2.0f);
  double phi2 = std::exp(-2.0) / std::sqrt(2.0 * M_PI);
  double mass = std::erf(2.0 / std::sqrt(2.0));
  expectMoments(v, 0.0, std::sqrt(1.0 - 4.0 * phi2 / mass));
  // One-sided and narrow: mean 1, std 0.02, cut at [0.99, 1.5].
  v = sample("trunc_normal", {1.0, 0.02, 0.99, 1.5}, {100000});
  s = statsOf(v);
  EXPECT_GE(s.min, 0.99f);
  EXPECT_LT(s.min, 0.9901f);
  EXPECT_LT(s.max, 1.2f);
}

TEST(Init, IsDeterministicPerSeedAndName) {
  InitSpec n{"normal", {0.0, 1.0}};
  std::vector<float> a = initTensor(n, {64}, 7, "a.weight");
  EXPECT_EQ(a, initTensor(n, {64}, 7, "a.weight"));
  EXPECT_NE(a, initTensor(n, {64}, 8, "a.weight"));
  EXPECT_NE(a, initTensor(n, {64}, 7, "b.weight"));
  // Element i does not depend on the shape or on which range is generated.
  std::vector<float> part(10);
  initRange(n, {8, 8}, 7, "a.weight", 37, 10, part.data());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), a.begin() + 37));
  EXPECT_EQ(nameHash(""), 14695981039346656037ull);
  EXPECT_EQ(nameHash("a"), 0xaf63dc4c8601ec8cull); // FNV-1a reference value
}

/// The f32 shard of unit `u` in a rank's image.
std::vector<float> shardOf(const UnitInfo &u,
                           const std::vector<uint8_t> &image) {
  std::vector<float> shard(u.shardNumel);
  std::memcpy(shard.data(), image.data() + u.offset, u.shardNumel * 4);
  return shard;
}

TEST(Init, ShardsOfEveryWorldSizeFormTheSameFlatParameter) {
  Program one = test::testProgram(1, 1);
  std::vector<uint8_t> image;
  initializeRank(one, 42, 0, image);
  for (int world = 1; world <= 4; ++world) {
    Program p = test::testProgram(1, world);
    for (size_t u = 0; u < p.units.size(); ++u) {
      std::vector<float> flat;
      for (int r = 0; r < world; ++r) {
        std::vector<uint8_t> img;
        initializeRank(p, 42, r, img);
        ASSERT_EQ(img.size(), static_cast<size_t>(p.persistentBytes));
        std::vector<float> s = shardOf(p.units[u], img);
        flat.insert(flat.end(), s.begin(), s.end());
        for (const StateInfo &st : p.units[u].state)
          for (int64_t i = 0; i < p.units[u].shardNumel; ++i)
            ASSERT_EQ(img[st.offset + 4 * i], 0) << "optimizer state is zero";
      }
      ASSERT_EQ(static_cast<int64_t>(flat.size()), p.units[u].paddedNumel);
      std::vector<float> want = shardOf(one.units[u], image);
      int64_t n = p.units[u].flatNumel;
      EXPECT_EQ(0, std::memcmp(flat.data(), want.data(), n * 4))
          << "unit " << u << " at world size " << world;
      for (int64_t i = n; i < p.units[u].paddedNumel; ++i)
        EXPECT_EQ(flat[i], 0.0f) << "padding element " << i;
    }
  }
}

TEST(Init, FlatParameterHoldsEachParamAtItsOffset) {
  Program p = test::testProgram(1, 1);
  std::vector<uint8_t> image;
  initializeRank(p, 42, 0, image);
  std::vector<float> flat = shardOf(p.units[1], image);
  for (const ParamInfo &q : p.units[1].params) {
    std::vector<float> want = initTensor(q.init, q.shape, 42, q.name);
    EXPECT_TRUE(std::equal(want.begin(), want.end(),
                           flat.begin() + q.flatOffset))
        << q.name;
  }
}

TEST(Init, RankLocalUnitIsWholeAndDrawnPerRank) {
  Program p = test::testProgram(1, 2, "adamw", "tiny", /*rankLocalBlock=*/true);
  const UnitInfo &local = p.units[1];
  std::vector<uint8_t> r0, r1;
  initializeRank(p, 42, 0, r0);
  initializeRank(p, 42, 1, r1);
  std::vector<float> a = shardOf(local, r0), b = shardOf(local, r1);
  ASSERT_EQ(static_cast<int64_t>(a.size()), local.flatNumel);
  EXPECT_NE(a, b) << "each rank has its own expert";
  for (int rank : {0, 1}) {
    std::vector<float> flat = shardOf(local, rank == 0 ? r0 : r1);
    for (const ParamInfo &q : local.params) {
      std::vector<float> want =
          initTensor(q.init, q.shape, rankLocalSeed(42, rank), q.name);
      EXPECT_TRUE(std::equal(want.begin(), want.end(),
                             flat.begin() + q.flatOffset))
          << q.name << " on rank " << rank;
    }
  }
  // The shared unit is still one flat parameter split over the ranks.
  Program whole = test::testProgram(1, 1);
  std::vector<uint8_t> one;
  initializeRank(whole, 42, 0, one);
  std::vector<float> flat = shardOf(p.units[0], r0), tail = shardOf(p.units[0], r1);
  flat.insert(flat.end(), tail.begin(), tail.end());
  std::vector<float> want = shardOf(whole.units[0], one);
  EXPECT_TRUE(std::equal(want.begin(), want.begin() + whole.units[0].flatNumel,
                         flat.begin()));
}

TEST(Init, ReplicasAndBuffersAreInitialised) {
  Program p = test::testProgram(2, 2);
  std::vector<uint8_t> r1, r3;
  initializeRank(p, 5, 1, r1);
  initializeRank(p, 5, 3, r3);
  EXPECT_EQ(r1, r3) << "ranks 1 and 3 hold the same shard in two replicas";
  const BufferInfo &var = p.buffers[1];
  float v[3];
  std::memcpy(v, r1.data() + var.offset, sizeof v);
  EXPECT_EQ(v[0], 1.0f);
  EXPECT_EQ(v[2], 1.0f);
  int64_t tracked = -1;
  std::memcpy(&tracked, r1.data() + p.buffers[2].offset, 8);
  EXPECT_EQ(tracked, 0);
  EXPECT_THROW(initializeRank(p, 5, 4, r1), std::runtime_error);
}

} // namespace
} // namespace driver
} // namespace fsdp
