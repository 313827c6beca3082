//===- LossTest.cpp - cross_entropy and mse_loss --------------------------===//
#include "TestUtil.h"

#include <cmath>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class LossConformance : public ::testing::TestWithParam<std::string> {};

void checkCrossEntropy(const std::string &backend, int32_t reduction,
                       int64_t ignoreIndex) {
  Device dev(backend);
  const int64_t n = 5, c = 4;
  // Row 2 carries the ignore index; mean divides by the 4 remaining rows.
  std::vector<int64_t> targets{1, 3, ignoreIndex, 0, 2};
  auto logits = randomVector(n * c, 161, 0.1f, 2.0f);
  const float dloss = 0.75f;
  Reference ref = [&](const Inputs &in) {
    double total = 0;
    int64_t count = 0;
    for (int64_t r = 0; r < n; ++r) {
      if (targets[r] == ignoreIndex)
        continue;
      double sum = 0;
      for (int64_t j = 0; j < c; ++j)
        sum += std::exp(in[0][r * c + j]);
      total += std::log(sum) - in[0][r * c + targets[r]];
      ++count;
    }
    return std::vector<double>{reduction == FSDPRT_LOSS_MEAN ? total / count
                                                             : total};
  };
  int64_t bl = dev.upload(logits), bt = dev.upload(targets),
          bloss = dev.alloc(4), bdl = dev.upload(std::vector<float>{dloss}),
          bd = dev.alloc(n * c * 4);
  RT_OK(fsdprt_cross_entropy_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                     FSDPRT_I64, bl, 0, bt, 0, bloss, 0, n, c,
                                     reduction, ignoreIndex));
  RT_OK(fsdprt_cross_entropy_backward(dev.ctx, dev.stream, FSDPRT_F32,
                                      FSDPRT_I64, bl, 0, bt, 0, bdl, 0, bd, 0,
                                      n, c, reduction, ignoreIndex));
  Inputs in{toDouble(logits)};
  expectClose(dev.download(bloss, 1), ref(in), "loss");
  expectGradients(ref, in, {dloss}, {dev.download(bd, n * c)}, {"dlogits"});
}

TEST_P(LossConformance, CrossEntropyMeanIgnoresDefaultIndex) {
  checkCrossEntropy(GetParam(), FSDPRT_LOSS_MEAN, -100);
}
TEST_P(LossConformance, CrossEntropySumCustomIgnoreIndex) {
  checkCrossEntropy(GetParam(), FSDPRT_LOSS_SUM, 3);
}

TEST_P(LossConformance, CrossEntropyBadTargetFailsAtSynchronize) {
  Device dev(GetParam());
  std::vector<int32_t> targets{0, 4};
  auto logits = randomVector(2 * 4, 162);
  int64_t bl = dev.upload(logits), bt = dev.upload(targets), bo = dev.alloc(4);
  RT_OK(fsdprt_cross_entropy_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                     FSDPRT_I32, bl, 0, bt, 0, bo, 0, 2, 4,
                                     FSDPRT_LOSS_MEAN, -100));
  EXPECT_EQ(fsdprt_context_synchronize(dev.ctx), FSDPRT_ERR_OUT_OF_RANGE);
  std::string msg = fsdprt_last_error();
  EXPECT_NE(msg.find("cross_entropy_forward"), std::string::npos) << msg;
  EXPECT_NE(msg.find("target 4"), std::string::npos) << msg;
}

TEST_P(LossConformance, MseLossMeanAndSum) {
  Device dev(GetParam());
  const int64_t n = 13;
  auto a = randomVector(n, 171), b = randomVector(n, 172);
  const float dloss = 1.5f;
  for (int32_t reduction : {FSDPRT_LOSS_MEAN, FSDPRT_LOSS_SUM}) {
    SCOPED_TRACE("reduction " + std::to_string(reduction));
    Reference ref = [&](const Inputs &in) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i)
        s += std::pow(in[0][i] - in[1][i], 2);
      return std::vector<double>{reduction == FSDPRT_LOSS_MEAN ? s / n : s};
    };
    int64_t ba = dev.upload(a), bb = dev.upload(b), bo = dev.alloc(4),
            bdl = dev.upload(std::vector<float>{dloss}), bda = dev.alloc(n * 4),
            bdb = dev.alloc(n * 4);
    RT_OK(fsdprt_mse_loss_forward(dev.ctx, dev.stream, FSDPRT_F32, ba, 0, bb, 0,
                                  bo, 0, n, reduction));
    RT_OK(fsdprt_mse_loss_backward(dev.ctx, dev.stream, FSDPRT_F32, ba, 0, bb,
                                   0, bdl, 0, bda, 0, bdb, 0, n, reduction));
    Inputs in{toDouble(a), toDouble(b)};
    expectClose(dev.download(bo, 1), ref(in), "loss");
    expectGradients(ref, in, {dloss},
                    {dev.download(bda, n), dev.download(bdb, n)}, {"da", "db"});
  }
}

FSDPRT_INSTANTIATE_CONFORMANCE(LossConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
