//===- AdafactorTest.cpp - Adafactor's three calls against float64 --------===//
//
// A flat parameter of a batched matrix [2, 3, 4], a vector [5] and a matrix
// [4, 2] (37 elements) cut into two shards of 19, as two ranks of a shard
// group hold it: each "rank" runs fsdprt_adafactor_stats, _factor and _apply
// on its shard, with the host summing their partial sums as the
// all-reduces would. Compared over three steps with torch.optim.Adafactor's
// algorithm written here in float64.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <algorithm>
#include <cmath>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class AdafactorConformance : public ::testing::TestWithParam<std::string> {};

struct Shape {
  int64_t batch, rows, cols; // rows = cols = 0: a vector of `batch`
  int64_t numel() const { return rows ? batch * rows * cols : batch; }
};
const Shape kParams[] = {{2, 3, 4}, {5, 0, 0}, {1, 4, 2}};
const std::vector<int64_t> kLayout = {0, 24, 3, 4, 24, 5, 0, 0, 29, 8, 4, 2};
constexpr int64_t kFlat = 37, kShard = 19,
                  kStateSize = 2 * 3 + 2 * 4 + 5 + 4 + 2;
constexpr double kLr = 0.05, kDecay = -0.8, kEps1 = 1e-30, kEps2 = 1e-3,
                 kD = 1.0, kWeightDecay = 0.1;

/// torch.optim.Adafactor's step on one parameter, in float64.
void referenceStep(const Shape &s, double *p, const double *g, double *state,
                   int t) {
  int64_t n = s.numel();
  double beta = std::pow(double(t), kDecay);
  double rho = std::min(kLr, 1.0 / std::sqrt(double(t)));
  double sq = 0;
  for (int64_t i = 0; i < n; ++i)
    sq += p[i] * p[i];
  double alpha = std::max(kEps2, std::sqrt(sq / n)) * rho;
  for (int64_t i = 0; i < n; ++i)
    p[i] *= 1 - kLr * kWeightDecay;
  std::vector<double> v(n);
  if (!s.rows) {
    for (int64_t i = 0; i < n; ++i) {
      state[i] += beta * (g[i] * g[i] - state[i]);
      v[i] = state[i];
    }
  } else {
    double *row = state, *col = state + s.batch * s.rows;
    for (int64_t b = 0; b < s.batch; ++b) {
      const double *gb = g + b * s.rows * s.cols;
      for (int64_t r = 0; r < s.rows; ++r) {
        double m = 0;
        for (int64_t c = 0; c < s.cols; ++c)
          m += gb[r * s.cols + c] * gb[r * s.cols + c] / s.cols;
        row[b * s.rows + r] += beta * (m - row[b * s.rows + r]);
      }
      for (int64_t c = 0; c < s.cols; ++c) {
        double m = 0;
        for (int64_t r = 0; r < s.rows; ++r)
          m += gb[r * s.cols + c] * gb[r * s.cols + c] / s.rows;
        col[b * s.cols + c] += beta * (m - col[b * s.cols + c]);
      }
      double mean = 0;
      for (int64_t r = 0; r < s.rows; ++r)
        mean += row[b * s.rows + r] / s.rows;
      for (int64_t r = 0; r < s.rows; ++r)
        for (int64_t c = 0; c < s.cols; ++c)
          v[(b * s.rows + r) * s.cols + c] =
              row[b * s.rows + r] * col[b * s.cols + c] / std::max(mean, kEps1);
    }
  }
  std::vector<double> u(n);
  double usq = 0;
  for (int64_t i = 0; i < n; ++i) {
    u[i] = g[i] / std::sqrt(std::max(v[i], kEps1 * kEps1));
    usq += u[i] * u[i];
  }
  double denom = std::max(1.0, std::sqrt(usq / n) / kD);
  for (int64_t i = 0; i < n; ++i)
    p[i] -= alpha / denom * u[i];
}

/// One rank's buffers: its shard of the parameter and gradient, and its
/// copy of the state.
struct Rank {
  int64_t param, grad, state, stats, updateSq;
};

TEST_P(AdafactorConformance, TwoShardsMatchFloat64ReferenceOverSteps) {
  Device dev(GetParam());
  auto p0 = randomVector(2 * kShard, 501); // the padding element is unused
  std::vector<double> ref(p0.begin(), p0.begin() + kFlat),
      refState(kStateSize, 0.0);
  Rank ranks[2];
  for (int r = 0; r < 2; ++r) {
    std::vector<float> shard(p0.begin() + r * kShard,
                             p0.begin() + (r + 1) * kShard);
    ranks[r] = {dev.upload(shard), dev.alloc(kShard * 4),
                dev.upload(std::vector<float>(kStateSize, 0.0f)),
                dev.alloc((3 + kStateSize) * 4), dev.alloc(3 * 4)};
  }
  const int64_t *layout = kLayout.data(), count = kLayout.size();
  // Sums the ranks' `n` partial sums in `buffer`, as an all-reduce.
  auto allReduce = [&](int64_t Rank::*buffer, int64_t n) {
    std::vector<float> a = dev.download(ranks[0].*buffer, n),
                       b = dev.download(ranks[1].*buffer, n);
    for (int64_t i = 0; i < n; ++i)
      a[i] += b[i];
    for (Rank &rank : ranks)
      RT_EXPECT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, rank.*buffer, 0,
                                         a.data(), n * 4));
    dev.sync(); // the copies read `a`
  };
  for (int t = 1; t <= 3; ++t) {
    auto grad = randomVector(2 * kShard, 600 + t);
    grad.back() = 0.0f; // padding
    for (int r = 0; r < 2; ++r) {
      RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, ranks[r].grad, 0,
                                  grad.data() + r * kShard, kShard * 4));
      RT_OK(fsdprt_adafactor_stats(
          dev.ctx, dev.stream, FSDPRT_F32, ranks[r].param, 0, ranks[r].grad, 0,
          kShard, r * kShard, count, layout, ranks[r].stats, 0));
    }
    allReduce(&Rank::stats, 3 + kStateSize);
    for (int r = 0; r < 2; ++r)
      RT_OK(fsdprt_adafactor_factor(
          dev.ctx, dev.stream, FSDPRT_F32, ranks[r].grad, 0, kShard, r * kShard,
          count, layout, ranks[r].state, 0, ranks[r].stats, 0,
          ranks[r].updateSq, 0, t, kDecay, kEps1, 0, 0));
    allReduce(&Rank::updateSq, 3);
    for (int r = 0; r < 2; ++r) {
      // Two calls on rank 1, as for two parameter groups' segments.
      int64_t split = r == 1 ? 7 : kShard;
      RT_OK(fsdprt_adafactor_apply(dev.ctx, dev.stream, FSDPRT_F32,
                                   ranks[r].param, 0, ranks[r].grad, 0, split,
                                   r * kShard, count, layout, ranks[r].state, 0,
                                   ranks[r].stats, 0, ranks[r].updateSq, 0, t,
                                   kLr, kEps1, kEps2, kD, kWeightDecay, 0, 0));
      if (split < kShard)
        RT_OK(fsdprt_adafactor_apply(
            dev.ctx, dev.stream, FSDPRT_F32, ranks[r].param, split * 4,
            ranks[r].grad, split * 4, kShard - split, r * kShard + split, count,
            layout, ranks[r].state, 0, ranks[r].stats, 0, ranks[r].updateSq, 0,
            t, kLr, kEps1, kEps2, kD, kWeightDecay, 0, 0));
    }
    dev.sync();
    std::vector<double> g(grad.begin(), grad.begin() + kFlat);
    int64_t offset = 0, stateOffset = 0;
    for (const Shape &s : kParams) {
      referenceStep(s, ref.data() + offset, g.data() + offset,
                    refState.data() + stateOffset, t);
      offset += s.numel();
      stateOffset += s.rows ? s.batch * (s.rows + s.cols) : s.batch;
    }
  }
  std::vector<float> got = dev.download(ranks[0].param, kShard),
                     second = dev.download(ranks[1].param, kShard);
  got.insert(got.end(), second.begin(), second.end() - 1);
  // f32 against float64 arithmetic: rounding of each step's sums and
  // products, a few ulps relative.
  expectClose(got, ref, "param", 1e-5, 1e-6);
  // Both ranks hold the same (whole) state.
  std::vector<float> state0 = dev.download(ranks[0].state, kStateSize);
  EXPECT_EQ(state0, dev.download(ranks[1].state, kStateSize));
  expectClose(state0, refState, "state", 1e-5, 1e-6);

  // A set found-inf flag leaves the state and the parameters as they were.
  int64_t found = dev.upload(std::vector<float>{1.0f});
  auto before = dev.download(ranks[0].param, kShard);
  RT_OK(fsdprt_adafactor_factor(dev.ctx, dev.stream, FSDPRT_F32, ranks[0].grad,
                                0, kShard, 0, count, layout, ranks[0].state, 0,
                                ranks[0].stats, 0, ranks[0].updateSq, 0, 4,
                                kDecay, kEps1, found, 0));
  RT_OK(fsdprt_adafactor_apply(
      dev.ctx, dev.stream, FSDPRT_F32, ranks[0].param, 0, ranks[0].grad, 0,
      kShard, 0, count, layout, ranks[0].state, 0, ranks[0].stats, 0,
      ranks[0].updateSq, 0, 4, kLr, kEps1, kEps2, kD, kWeightDecay, found, 0));
  EXPECT_EQ(dev.download(ranks[0].param, kShard), before);
  EXPECT_EQ(dev.download(ranks[0].state, kStateSize), state0);
}

TEST_P(AdafactorConformance, BadLayoutIsAnError) {
  Device dev(GetParam());
  int64_t buf = dev.alloc(64 * 4);
  const int64_t overlapping[] = {0, 8, 2, 4, 4, 4, 0, 0};
  EXPECT_EQ(fsdprt_adafactor_stats(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, buf,
                                   0, 8, 0, 8, overlapping, buf, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_last_error()).find("overlap"), std::string::npos)
      << fsdprt_last_error();
  const int64_t notDividing[] = {0, 8, 3, 4};
  EXPECT_EQ(fsdprt_adafactor_stats(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, buf,
                                   0, 8, 0, 4, notDividing, buf, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

FSDPRT_INSTANTIATE_CONFORMANCE(AdafactorConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
