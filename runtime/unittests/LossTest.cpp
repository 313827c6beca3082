//===- LossTest.cpp - cross_entropy and mse_loss --------------------------===//
#include "TestUtil.h"

#include <algorithm>
#include <cmath>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class LossConformance : public ::testing::TestWithParam<std::string> {};

/// The loss and the logits' gradient of n rows of c classes (two calls).
void crossEntropyCalls(Device &dev, int32_t dtype, int64_t logits,
                       int64_t targets, int64_t dloss, int64_t loss,
                       int64_t dlogits, int64_t n, int64_t c,
                       int32_t reduction = FSDPRT_LOSS_MEAN,
                       int64_t ignoreIndex = -100) {
  RT_OK(fsdprt_cross_entropy_forward(dev.ctx, dev.stream, dtype, FSDPRT_I64,
                                     logits, 0, targets, 0, loss, 0, n, c, c,
                                     reduction, ignoreIndex));
  RT_OK(fsdprt_cross_entropy_backward(dev.ctx, dev.stream, dtype, FSDPRT_I64,
                                      logits, 0, targets, 0, dloss, 0, dlogits,
                                      0, n, c, c, reduction, ignoreIndex));
}

/// The mean cross-entropy of f32 rows of c classes (no ignored targets)
/// and its gradient against float64 softmax, computed directly.
void checkMeanCrossEntropy(Device &dev, const std::vector<float> &logits,
                           const std::vector<int64_t> &targets, float dloss,
                           int64_t c) {
  const int64_t n = targets.size();
  std::vector<double> wantLoss{0.0}, wantGrad(n * c);
  for (int64_t r = 0; r < n; ++r) {
    const float *x = logits.data() + r * c;
    double max = *std::max_element(x, x + c), sum = 0.0;
    for (int64_t j = 0; j < c; ++j)
      sum += std::exp(x[j] - max);
    wantLoss[0] += (max + std::log(sum) - x[targets[r]]) / n;
    for (int64_t j = 0; j < c; ++j)
      wantGrad[r * c + j] =
          (std::exp(x[j] - max) / sum - (j == targets[r])) * dloss / n;
  }
  int64_t bl = dev.upload(logits), bt = dev.upload(targets),
          bloss = dev.alloc(4), bdl = dev.upload(std::vector<float>{dloss}),
          bd = dev.alloc(n * c * 4);
  crossEntropyCalls(dev, FSDPRT_F32, bl, bt, bdl, bloss, bd, n, c);
  expectClose(dev.download(bloss, 1), wantLoss, "loss");
  expectClose(dev.download(bd, n * c), wantGrad, "dlogits");
}

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
  crossEntropyCalls(dev, FSDPRT_F32, bl, bt, bdl, bloss, bd, n, c, reduction,
                    ignoreIndex);
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

// Wide rows whose maximum keeps rising along the row (the CUDA kernel's
// one-read log-sum-exp rescales its running sum each time), falls, or
// spans a wide range: loss and gradient against float64 softmax.
TEST_P(LossConformance, CrossEntropyWideRowsWithRisingMaxima) {
  Device dev(GetParam());
  const int64_t n = 3, c = 3000;
  std::vector<int64_t> targets{c - 1, 0, 1234};
  auto logits = randomVector(n * c, 168, 0.1f, 30.0f);
  for (int64_t j = 0; j < c; ++j) {
    logits[j] = 0.05f * j;
    logits[c + j] = 20.0f - 0.05f * j;
  }
  const float dloss = 0.75f;
  checkMeanCrossEntropy(dev, logits, targets, dloss, c);
}

// Masked logits (-inf, e.g. classes a sampler must never produce) weigh
// nothing: rows starting with a run of -inf, and one with -inf scattered,
// give the float64 softmax's loss and gradient (0 at the masked ones).
TEST_P(LossConformance, CrossEntropyMaskedLogitsWeighNothing) {
  Device dev(GetParam());
  const int64_t n = 3, c = 2500;
  std::vector<int64_t> targets{40, 2499, 7};
  auto logits = randomVector(n * c, 169, 0.1f, 3.0f);
  for (int64_t j = 0; j < 24; ++j)
    logits[j] = logits[c + j] = -INFINITY;
  for (int64_t j = 100; j < c; j += 3)
    logits[2 * c + j] = -INFINITY;
  const float dloss = 1.0f;
  checkMeanCrossEntropy(dev, logits, targets, dloss, c);
}

TEST_P(LossConformance, CrossEntropyBadTargetFailsAtSynchronize) {
  Device dev(GetParam());
  std::vector<int32_t> targets{0, 4};
  auto logits = randomVector(2 * 4, 162);
  int64_t bl = dev.upload(logits), bt = dev.upload(targets), bo = dev.alloc(4);
  RT_OK(fsdprt_cross_entropy_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                     FSDPRT_I32, bl, 0, bt, 0, bo, 0, 2, 4, 4,
                                     FSDPRT_LOSS_MEAN, -100));
  EXPECT_EQ(fsdprt_context_synchronize(dev.ctx), FSDPRT_ERR_OUT_OF_RANGE);
  std::string msg = fsdprt_last_error();
  EXPECT_NE(msg.find("cross_entropy_forward"), std::string::npos) << msg;
  EXPECT_NE(msg.find("target 4"), std::string::npos) << msg;
}

// 16-bit logits are computed on in f32 and rounded once: the bf16 results
// are the f32 results on the widened logits, rounded (rows wider than a GPU
// block, one of them ignored).
TEST_P(LossConformance, CrossEntropyBf16IsTheF32ResultRoundedOnce) {
  Device dev(GetParam());
  const int64_t n = 7, c = 300;
  std::vector<int64_t> targets{5, 299, -100, 0, 150, 42, 7};
  auto logits = randomVector(n * c, 163, 0.1f, 4.0f);
  int64_t bf = dev.upload(logits), bh = dev.alloc(n * c * 2),
          bw = dev.alloc(n * c * 4), bt = dev.upload(targets);
  // logits16, and its exact widening back to f32.
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, bf, 0, FSDPRT_BF16, bh, 0,
                    n * c));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_BF16, bh, 0, FSDPRT_F32, bw, 0,
                    n * c));
  int64_t dl32 = dev.upload(std::vector<float>{0.5f}), dl16 = dev.alloc(2);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, dl32, 0, FSDPRT_BF16, dl16,
                    0, 1));
  int64_t loss32 = dev.alloc(4), loss16 = dev.alloc(2),
          d32 = dev.alloc(n * c * 4), d16 = dev.alloc(n * c * 2),
          want16 = dev.alloc(n * c * 2), wantLoss16 = dev.alloc(2);
  crossEntropyCalls(dev, FSDPRT_F32, bw, bt, dl32, loss32, d32, n, c);
  crossEntropyCalls(dev, FSDPRT_BF16, bh, bt, dl16, loss16, d16, n, c);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, d32, 0, FSDPRT_BF16,
                    want16, 0, n * c));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, loss32, 0, FSDPRT_BF16,
                    wantLoss16, 0, 1));
  EXPECT_EQ(dev.download<uint16_t>(loss16, 1),
            dev.download<uint16_t>(wantLoss16, 1));
  auto got = dev.download<uint16_t>(d16, n * c);
  EXPECT_EQ(got, dev.download<uint16_t>(want16, n * c));
  // The ignored row's gradient is zero, the others are not.
  EXPECT_EQ(got[2 * c + 17], 0);
  EXPECT_NE(got[0 * c + 5], 0);
}

// The compiler lets the logits' gradient overwrite the logits when nothing
// reads them afterwards: in place, the gradient is the out-of-place one,
// bit for bit (rows wider than a GPU block, one ignored), in f32 and bf16.
TEST_P(LossConformance, CrossEntropyBackwardInPlaceEqualsOutOfPlace) {
  Device dev(GetParam());
  const int64_t n = 6, c = 1100;
  std::vector<int64_t> targets{5, 1099, -100, 0, 640, 42};
  auto logits = randomVector(n * c, 164, 0.1f, 4.0f);
  for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16}) {
    int64_t es = dtype == FSDPRT_F32 ? 4 : 2;
    int64_t bf = dev.upload(logits), bx = dev.alloc(n * c * es),
            bd = dev.alloc(n * c * es), bt = dev.upload(targets);
    int64_t dl32 = dev.upload(std::vector<float>{0.5f}), dl = dev.alloc(es);
    RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, bf, 0, dtype, bx, 0,
                      n * c));
    RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, dl32, 0, dtype, dl, 0,
                      1));
    RT_OK(fsdprt_cross_entropy_backward(dev.ctx, dev.stream, dtype, FSDPRT_I64,
                                        bx, 0, bt, 0, dl, 0, bd, 0, n, c, c,
                                        FSDPRT_LOSS_MEAN, -100));
    RT_OK(fsdprt_cross_entropy_backward(dev.ctx, dev.stream, dtype, FSDPRT_I64,
                                        bx, 0, bt, 0, dl, 0, bx, 0, n, c, c,
                                        FSDPRT_LOSS_MEAN, -100));
    EXPECT_EQ(dev.download<uint8_t>(bx, n * c * es),
              dev.download<uint8_t>(bd, n * c * es))
        << "dtype " << dtype;
  }
}

// One pass over the logits gives the two calls' loss and gradient, bit for
// bit, in place too (f32, bf16; mean and sum; an ignored row; rows wider
// than a GPU block).
TEST_P(LossConformance, CrossEntropyForwardBackwardEqualsTheTwoCalls) {
  Device dev(GetParam());
  const int64_t n = 6, c = 1100;
  std::vector<int64_t> targets{5, 1099, -100, 0, 640, 42};
  auto logits = randomVector(n * c, 165, 0.1f, 4.0f);
  for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16})
    for (int32_t reduction : {FSDPRT_LOSS_MEAN, FSDPRT_LOSS_SUM})
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "dtype " << dtype << " reduction "
                                          << reduction << " in place "
                                          << inPlace);
        int64_t es = dtype == FSDPRT_F32 ? 4 : 2, bytes = n * c * es;
        int64_t bf = dev.upload(logits), bx = dev.alloc(bytes),
                bt = dev.upload(targets), dl32 = dev.upload(std::vector<float>{
                                              0.5f}),
                dl = dev.alloc(es);
        RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, bf, 0, dtype, bx, 0,
                          n * c));
        RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, dl32, 0, dtype, dl,
                          0, 1));
        int64_t wantLoss = dev.alloc(es), want = dev.alloc(bytes),
                loss = dev.alloc(es), got = inPlace ? bx : dev.alloc(bytes);
        RT_OK(fsdprt_cross_entropy_forward(dev.ctx, dev.stream, dtype,
                                           FSDPRT_I64, bx, 0, bt, 0, wantLoss,
                                           0, n, c, c, reduction, -100));
        RT_OK(fsdprt_cross_entropy_backward(dev.ctx, dev.stream, dtype,
                                            FSDPRT_I64, bx, 0, bt, 0, dl, 0,
                                            want, 0, n, c, c, reduction, -100));
        RT_OK(fsdprt_cross_entropy_forward_backward(
            dev.ctx, dev.stream, dtype, FSDPRT_I64, bx, 0, bt, 0, dl, 0, loss,
            0, got, 0, n, c, c, reduction, -100));
        EXPECT_EQ(dev.download<uint8_t>(loss, es),
                  dev.download<uint8_t>(wantLoss, es));
        auto grad = dev.download<uint8_t>(got, bytes);
        EXPECT_EQ(grad, dev.download<uint8_t>(want, bytes));
        EXPECT_NE(grad, std::vector<uint8_t>(bytes, 0));
      }
}

// A bad target fails the fused call as it fails the forward, naming it.
TEST_P(LossConformance, CrossEntropyForwardBackwardBadTarget) {
  Device dev(GetParam());
  std::vector<int64_t> targets{0, 4};
  auto logits = randomVector(2 * 4, 166);
  int64_t bl = dev.upload(logits), bt = dev.upload(targets),
          bdl = dev.upload(std::vector<float>{1.0f}), bo = dev.alloc(4);
  RT_OK(fsdprt_cross_entropy_forward_backward(
      dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_I64, bl, 0, bt, 0, bdl, 0, bo,
      0, bl, 0, 2, 4, 4, FSDPRT_LOSS_MEAN, -100));
  EXPECT_EQ(fsdprt_context_synchronize(dev.ctx), FSDPRT_ERR_OUT_OF_RANGE);
  std::string msg = fsdprt_last_error();
  EXPECT_NE(msg.find("cross_entropy_forward_backward"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("target 4"), std::string::npos) << msg;
}

// Logits padded to an aligned width (the compiler pads the vocabulary):
// the classes' loss and gradient are those of the unpadded rows, bit for
// bit, whatever the padding holds, and the padding's gradient is 0 (two
// calls and the fused one in place; f32, bf16). A target in the padding is
// out of range.
TEST_P(LossConformance, CrossEntropyPaddedRowsEqualUnpaddedRows) {
  Device dev(GetParam());
  const int64_t n = 5, c = 1001, width = 1024;
  std::vector<int64_t> targets{5, 1000, -100, 0, 640};
  auto logits = randomVector(n * c, 167, 0.1f, 4.0f);
  std::vector<float> padded(n * width, 1e30f);
  for (int64_t r = 0; r < n; ++r)
    std::copy(logits.begin() + r * c, logits.begin() + (r + 1) * c,
              padded.begin() + r * width);
  for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16}) {
    SCOPED_TRACE(::testing::Message() << "dtype " << dtype);
    int64_t es = dtype == FSDPRT_F32 ? 4 : 2;
    auto narrow = [&](const std::vector<float> &v) -> int64_t {
      int64_t b32 = dev.upload(v), b = dev.alloc(v.size() * es);
      EXPECT_EQ(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, b32, 0, dtype, b,
                            0, v.size()),
                FSDPRT_OK)
          << fsdprt_last_error();
      return b;
    };
    int64_t bx = narrow(logits), bp = narrow(padded),
            dl = narrow(std::vector<float>{0.5f}), bt = dev.upload(targets);
    int64_t wantLoss = dev.alloc(es), want = dev.alloc(n * c * es),
            loss = dev.alloc(es), fusedLoss = dev.alloc(es),
            grad = dev.alloc(n * width * es);
    RT_OK(fsdprt_fill(dev.ctx, dev.stream, dtype, grad, 0, n * width, 7.0));
    RT_OK(fsdprt_cross_entropy_forward_backward(
        dev.ctx, dev.stream, dtype, FSDPRT_I64, bx, 0, bt, 0, dl, 0, wantLoss,
        0, want, 0, n, c, c, FSDPRT_LOSS_MEAN, -100));
    RT_OK(fsdprt_cross_entropy_forward(dev.ctx, dev.stream, dtype, FSDPRT_I64,
                                       bp, 0, bt, 0, loss, 0, n, c, width,
                                       FSDPRT_LOSS_MEAN, -100));
    RT_OK(fsdprt_cross_entropy_backward(dev.ctx, dev.stream, dtype, FSDPRT_I64,
                                        bp, 0, bt, 0, dl, 0, grad, 0, n, c,
                                        width, FSDPRT_LOSS_MEAN, -100));
    RT_OK(fsdprt_cross_entropy_forward_backward(
        dev.ctx, dev.stream, dtype, FSDPRT_I64, bp, 0, bt, 0, dl, 0, fusedLoss,
        0, bp, 0, n, c, width, FSDPRT_LOSS_MEAN, -100));
    auto lossBits = dev.download<uint8_t>(wantLoss, es);
    EXPECT_EQ(dev.download<uint8_t>(loss, es), lossBits);
    EXPECT_EQ(dev.download<uint8_t>(fusedLoss, es), lossBits);
    auto rowsWant = dev.download<uint8_t>(want, n * c * es);
    for (int64_t g : {grad, bp}) {
      auto got = dev.download<uint8_t>(g, n * width * es);
      for (int64_t r = 0; r < n; ++r) {
        auto row = got.begin() + r * width * es;
        EXPECT_TRUE(std::equal(row, row + c * es,
                               rowsWant.begin() + r * c * es))
            << "row " << r;
        EXPECT_TRUE(std::all_of(row + c * es, row + width * es,
                                [](uint8_t b) { return b == 0; }))
            << "padding of row " << r;
      }
    }
  }
  std::vector<int64_t> inPadding{0, c};
  int64_t bl = dev.upload(padded), bt = dev.upload(inPadding),
          bo = dev.alloc(4);
  RT_OK(fsdprt_cross_entropy_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                     FSDPRT_I64, bl, 0, bt, 0, bo, 0, 2, c,
                                     width, FSDPRT_LOSS_MEAN, -100));
  EXPECT_EQ(fsdprt_context_synchronize(dev.ctx), FSDPRT_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(fsdprt_last_error()).find("target 1001"),
            std::string::npos)
      << fsdprt_last_error();
}

/// The fused call on padded rows (n x width, c classes) against float64
/// softmax, in f32 out of place and bf16 in place: the loss and gradient
/// of the classes within tolerance, 0 for the padding and for ignored
/// rows, and the bf16 results the f32 ones rounded once (so the f32 run is
/// on the bf16 logits, widened).
void checkPaddedCrossEntropy(Device &dev, std::vector<float> logits,
                             const std::vector<int64_t> &targets, int64_t c,
                             int64_t width) {
  const int64_t n = targets.size();
  const float dloss = 0.5f;
  int64_t b32 = dev.upload(logits), b16 = dev.alloc(n * width * 2);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, b32, 0, FSDPRT_BF16, b16,
                    0, n * width));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_BF16, b16, 0, FSDPRT_F32, b32,
                    0, n * width));
  logits = dev.download<float>(b32, n * width);
  // The float64 reference on the classes (the padding holds 1e30).
  int64_t count = 0;
  std::vector<double> wantLoss{0.0}, wantGrad(n * width, 0.0);
  for (int64_t r = 0; r < n; ++r)
    count += targets[r] != -100;
  for (int64_t r = 0; r < n; ++r) {
    if (targets[r] == -100)
      continue;
    const float *x = logits.data() + r * width;
    double max = *std::max_element(x, x + c), sum = 0.0;
    for (int64_t j = 0; j < c; ++j)
      sum += std::exp(x[j] - max);
    wantLoss[0] += (max + std::log(sum) - x[targets[r]]) / count;
    for (int64_t j = 0; j < c; ++j)
      wantGrad[r * width + j] =
          (std::exp(x[j] - max) / sum - (j == targets[r])) * dloss / count;
  }
  int64_t bt = dev.upload(targets),
          dl32 = dev.upload(std::vector<float>{dloss}), dl16 = dev.alloc(2),
          loss32 = dev.alloc(4), loss16 = dev.alloc(2),
          grad32 = dev.alloc(n * width * 4), want16 = dev.alloc(n * width * 2),
          wantLoss16 = dev.alloc(2);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, dl32, 0, FSDPRT_BF16, dl16,
                    0, 1));
  RT_OK(
      fsdprt_fill(dev.ctx, dev.stream, FSDPRT_F32, grad32, 0, n * width, 7.0));
  RT_OK(fsdprt_cross_entropy_forward_backward(
      dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_I64, b32, 0, bt, 0, dl32, 0,
      loss32, 0, grad32, 0, n, c, width, FSDPRT_LOSS_MEAN, -100));
  RT_OK(fsdprt_cross_entropy_forward_backward(
      dev.ctx, dev.stream, FSDPRT_BF16, FSDPRT_I64, b16, 0, bt, 0, dl16, 0,
      loss16, 0, b16, 0, n, c, width, FSDPRT_LOSS_MEAN, -100));
  // f32 exps and sums against float64: errors of a few 1e-7 relative,
  // which expectClose's default bound (1e-3 relative + 1e-4 of the scale)
  // admits with a wide margin; a wrong max, sum or target moves them by
  // O(1e-2) or more. The padding's and ignored rows' zeros are exact.
  expectClose(dev.download<float>(loss32, 1), wantLoss, "loss");
  expectClose(dev.download<float>(grad32, n * width), wantGrad, "dlogits");
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, grad32, 0, FSDPRT_BF16,
                    want16, 0, n * width));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, loss32, 0, FSDPRT_BF16,
                    wantLoss16, 0, 1));
  EXPECT_EQ(dev.download<uint16_t>(loss16, 1),
            dev.download<uint16_t>(wantLoss16, 1));
  EXPECT_EQ(dev.download<uint16_t>(b16, n * width),
            dev.download<uint16_t>(want16, n * width));
}

/// Rows of c classes padded to `width` for checkPaddedCrossEntropy: one
/// ignored, one whose first groups and scattered classes are masked
/// (-inf), targets at both ends, the padding 1e30.
void checkMaskedPaddedRows(Device &dev, int64_t c, int64_t width,
                           uint32_t seed) {
  const int64_t n = 5;
  std::vector<int64_t> targets{0, c - 1, -100, c / 2, 3};
  auto classes = randomVector(n * c, seed, 0.1f, 4.0f);
  std::vector<float> logits(n * width, 1e30f);
  for (int64_t r = 0; r < n; ++r)
    std::copy(classes.begin() + r * c, classes.begin() + (r + 1) * c,
              logits.begin() + r * width);
  float *masked = logits.data() + 3 * width;
  for (int64_t j = 0; j < std::min<int64_t>(17, c / 2); ++j)
    masked[j] = -INFINITY;
  for (int64_t j = c / 2 + 1; j < c; j += 5)
    masked[j] = -INFINITY;
  // A maximum rising along row 1 (a held thread's running max rescales).
  for (int64_t j = 0; j < c; ++j)
    logits[width + j] = 8.0f * j / c;
  checkPaddedCrossEntropy(dev, logits, targets, c, width);
}

// The CUDA kernel keeps a row in registers where it fits (bf16 rows up to
// 57344 classes, f32 up to 24576; under the host emulation, one thread a
// block, up to 56 and 24) and streams wider rows, with the same
// arithmetic. Widths on either side of each limit, and across them (bf16
// held, f32 streamed: the f32 result rounded must still be the bf16 one):
// emulation 21 (both held), 45 (bf16 held), 200 (both streamed); GPU 200
// (both held), 30000 (bf16 held), 60000 (both streamed). Partial last
// groups, padding, masked and ignored rows in each.
TEST_P(LossConformance, CrossEntropyHeldAndStreamedRows) {
  Device dev(GetParam());
  uint32_t seed = 170;
  for (auto [c, width] : std::vector<std::pair<int64_t, int64_t>>{
           {21, 24}, {45, 48}, {200, 208}, {30000, 30016}, {60000, 60032}}) {
    SCOPED_TRACE(::testing::Message() << "c " << c << " width " << width);
    checkMaskedPaddedRows(dev, c, width, seed++);
  }
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
