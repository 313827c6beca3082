//===- OptimizerTest.cpp - SGD, AdamW, gradient norm and clipping ---------===//
#include "TestUtil.h"

#include "fsdp/rt/math/Half.h"

#include <cmath>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class OptimizerConformance : public ::testing::TestWithParam<std::string> {};

struct SgdConfig {
  double lr, momentum, dampening, weightDecay;
  bool nesterov;
};

/// Runs SGD steps on a one-element shard; returns the parameter after each.
std::vector<float> sgdTrajectory(Device &dev, const SgdConfig &c,
                                 const std::vector<float> &grads) {
  int64_t p = dev.upload(std::vector<float>{1.0f}), g = dev.alloc(4),
          buf = dev.upload(std::vector<float>{123.0f}); // garbage before step 1
  std::vector<float> out;
  for (size_t t = 0; t < grads.size(); ++t) {
    RT_EXPECT_OK(
        fsdprt_copy_from_host(dev.ctx, dev.stream, g, 0, &grads[t], 4));
    RT_EXPECT_OK(fsdprt_sgd_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0,
                                 buf, 0, 1, t + 1, c.lr, c.momentum,
                                 c.dampening, c.weightDecay, c.nesterov, 0, 0));
    out.push_back(dev.download(p, 1)[0]);
  }
  return out;
}

TEST_P(OptimizerConformance, SgdMomentumDampeningWeightDecayByHand) {
  Device dev(GetParam());
  // p0 = 1, lr = 0.1, momentum 0.9, dampening 0.1, weight decay 0.01.
  // step 1: d = 0.5 + 0.01 * 1 = 0.51; buf = d (no dampening on the first
  //         step); p = 1 - 0.1 * 0.51 = 0.949
  // step 2: d = -0.25 + 0.01 * 0.949 = -0.24051;
  //         buf = 0.9 * 0.51 + (1 - 0.1) * -0.24051 = 0.242541;
  //         p = 0.949 - 0.1 * 0.242541 = 0.9247459
  auto p = sgdTrajectory(dev, {0.1, 0.9, 0.1, 0.01, false}, {0.5f, -0.25f});
  EXPECT_NEAR(p[0], 0.949, 1e-6);
  EXPECT_NEAR(p[1], 0.9247459, 1e-6);
}

TEST_P(OptimizerConformance, SgdNesterovByHand) {
  Device dev(GetParam());
  // step 1: d = 0.51, buf = 0.51, d = 0.51 + 0.9 * 0.51 = 0.969,
  //         p = 1 - 0.0969 = 0.9031
  // step 2: d = -0.25 + 0.009031 = -0.240969; buf = 0.459 - 0.240969 =
  //         0.218031; d = -0.240969 + 0.9 * 0.218031 = -0.0447411;
  //         p = 0.9031 + 0.00447411 = 0.90757411
  auto p = sgdTrajectory(dev, {0.1, 0.9, 0.0, 0.01, true}, {0.5f, -0.25f});
  EXPECT_NEAR(p[0], 0.9031, 1e-6);
  EXPECT_NEAR(p[1], 0.90757411, 1e-6);
}

TEST_P(OptimizerConformance, SgdPlainNeedsNoMomentumBuffer) {
  Device dev(GetParam());
  int64_t p = dev.upload(std::vector<float>{1.0f, -2.0f}),
          g = dev.upload(std::vector<float>{0.5f, 0.25f});
  RT_OK(fsdprt_sgd_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, 0, 0, 2, 1,
                        0.2, 0, 0, 0, 0, 0, 0));
  auto v = dev.download(p, 2);
  EXPECT_FLOAT_EQ(v[0], 0.9f);
  EXPECT_FLOAT_EQ(v[1], -2.05f);
}

TEST_P(OptimizerConformance, AdamWTwoStepsByHand) {
  Device dev(GetParam());
  // lr 0.1, betas (0.9, 0.999), eps 1e-8, weight decay 0.01, p0 = 1.
  // step 1 (g = 0.5): p = 0.999 (decay); m = 0.05; v = 0.00025;
  //   bias corrections 0.1 and 0.001: step size 1, denom
  //   sqrt(0.00025)/sqrt(0.001) + 1e-8 = 0.5 + 1e-8; p = 0.999 - 0.05 / denom
  //   = 0.899000002
  // step 2 (g = -0.25): p = 0.899000002 * 0.999; m = 0.02; v = 0.00031225;
  //   corrections 0.19 and 0.001999: p = 0.8714672987...
  int64_t p = dev.upload(std::vector<float>{1.0f}), g = dev.alloc(4),
          m = dev.upload(std::vector<float>{0.0f}),
          v = dev.upload(std::vector<float>{0.0f});
  const float grads[2] = {0.5f, -0.25f};
  const double want[2] = {0.899000002, 0.8714672987058463};
  for (int t = 0; t < 2; ++t) {
    RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, g, 0, &grads[t], 4));
    RT_OK(fsdprt_adamw_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, m, 0,
                            v, 0, 1, t + 1, 0.1, 0.9, 0.999, 1e-8, 0.01, 0, 0,
                            0));
    EXPECT_NEAR(dev.download(p, 1)[0], want[t], 1e-6) << "step " << t + 1;
  }
}

/// AdamW (decoupled decay) or, with `l2`, Adam (decay added to the
/// gradient) over five steps against a float64 reference.
void checkAdamAgainstFloat64(const std::string &backend, bool l2) {
  Device dev(backend);
  const int64_t n = 50;
  const double lr = 1e-2, b1 = 0.8, b2 = 0.99, eps = 1e-6, wd = 0.1;
  auto p0 = randomVector(n, 191);
  int64_t p = dev.upload(p0), g = dev.alloc(n * 4),
          m = dev.upload(std::vector<float>(n, 0.0f)),
          v = dev.upload(std::vector<float>(n, 0.0f));
  std::vector<double> rp(p0.begin(), p0.end()), rm(n, 0), rv(n, 0);
  for (int t = 1; t <= 5; ++t) {
    auto grad = randomVector(n, 200 + t);
    RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, g, 0, grad.data(), n * 4));
    RT_OK(fsdprt_adamw_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, m, 0,
                            v, 0, n, t, lr, b1, b2, eps, wd, l2, 0, 0));
    dev.sync();
    for (int64_t i = 0; i < n; ++i) {
      double gi = l2 ? grad[i] + wd * rp[i] : grad[i];
      if (!l2)
        rp[i] *= 1 - lr * wd;
      rm[i] = b1 * rm[i] + (1 - b1) * gi;
      rv[i] = b2 * rv[i] + (1 - b2) * gi * gi;
      double mhat = rm[i] / (1 - std::pow(b1, t));
      double vhat = rv[i] / (1 - std::pow(b2, t));
      rp[i] -= lr * mhat / (std::sqrt(vhat) + eps);
    }
  }
  expectClose(dev.download(p, n), rp, "param", 1e-5, 1e-6);
  expectClose(dev.download(m, n), rm, "exp_avg", 1e-5, 1e-6);
  expectClose(dev.download(v, n), rv, "exp_avg_sq", 1e-5, 1e-6);
}

TEST_P(OptimizerConformance, AdamWMatchesFloat64ReferenceOverSteps) {
  checkAdamAgainstFloat64(GetParam(), /*l2=*/false);
}

TEST_P(OptimizerConformance, AdamL2WeightDecayMatchesFloat64Reference) {
  checkAdamAgainstFloat64(GetParam(), /*l2=*/true);
}

TEST_P(OptimizerConformance, LionMatchesFloat64ReferenceOverSteps) {
  // Lion's published rule in float64; the update is lr times a sign, so
  // the parameters differ by rounding only (no c lands near 0 here).
  Device dev(GetParam());
  const int64_t n = 50;
  const double lr = 1e-2, b1 = 0.9, b2 = 0.99, wd = 0.1;
  auto p0 = randomVector(n, 311);
  int64_t p = dev.upload(p0), g = dev.alloc(n * 4),
          m = dev.upload(std::vector<float>(n, 0.0f));
  std::vector<double> rp(p0.begin(), p0.end()), rm(n, 0);
  for (int t = 1; t <= 5; ++t) {
    auto grad = randomVector(n, 400 + t);
    RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, g, 0, grad.data(), n * 4));
    RT_OK(fsdprt_lion_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, m, 0,
                           n, t, lr, b1, b2, wd, 0, 0));
    dev.sync(); // the copy reads `grad`, which the next iteration replaces
    for (int64_t i = 0; i < n; ++i) {
      double c = b1 * rm[i] + (1 - b1) * grad[i];
      rp[i] = rp[i] * (1 - lr * wd) - lr * ((c > 0) - (c < 0));
      rm[i] = b2 * rm[i] + (1 - b2) * grad[i];
    }
  }
  expectClose(dev.download(p, n), rp, "param", 1e-5, 1e-6);
  expectClose(dev.download(m, n), rm, "exp_avg", 1e-5, 1e-6);
  // A set found-inf flag leaves both as they were.
  auto before = dev.download(p, n), state = dev.download(m, n);
  int64_t found = dev.upload(std::vector<float>{1.0f});
  RT_OK(fsdprt_lion_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, m, 0, n,
                         6, lr, b1, b2, wd, found, 0));
  EXPECT_EQ(dev.download(p, n), before);
  EXPECT_EQ(dev.download(m, n), state);
}

TEST_P(OptimizerConformance, LowPrecisionGradientUpdatesAsItsF32Widening) {
  // The compiler hands a reduced bf16 / f16 gradient to the update as it
  // is (Shard.cpp): every update must give the bits it gives the gradient's
  // exact f32 widening, parameters and state alike, over several steps.
  Device dev(GetParam());
  const int64_t n = 37; // not a multiple of any vector width
  for (int32_t dtype : {FSDPRT_BF16, FSDPRT_F16}) {
    SCOPED_TRACE(dtype == FSDPRT_BF16 ? "bf16" : "f16");
    auto narrow = [&](float f) {
      return dtype == FSDPRT_BF16 ? floatToBf16(f) : floatToF16(f);
    };
    auto widen = [&](uint16_t h) {
      return dtype == FSDPRT_BF16 ? bf16ToFloat(h) : f16ToFloat(h);
    };
    // [0] reads the 16-bit gradient, [1] its widening.
    auto p0 = randomVector(n, 71, -1.0f, 1.0f);
    // AdamW's moments m, v, SGD's momentum buffer mb, Lion's moment l.
    int64_t p[2], m[2], v[2], mb[2], l[2];
    int64_t g16 = dev.alloc(n * 2), g32 = dev.alloc(n * 4);
    for (int k = 0; k < 2; ++k) {
      p[k] = dev.upload(p0);
      for (int64_t *state : {m, v, mb, l})
        state[k] = dev.upload(std::vector<float>(n, 0.0f));
    }
    for (int t = 1; t <= 3; ++t) {
      std::vector<uint16_t> half(n);
      std::vector<float> wide(n);
      auto values = randomVector(n, 500 + t, -2.0f, 2.0f);
      for (int64_t i = 0; i < n; ++i)
        wide[i] = widen(half[i] = narrow(values[i]));
      RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, g16, 0, half.data(),
                                  n * 2));
      RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, g32, 0, wide.data(),
                                  n * 4));
      for (int k = 0; k < 2; ++k) {
        int32_t gt = k == 0 ? dtype : FSDPRT_F32;
        int64_t g = k == 0 ? g16 : g32;
        RT_OK(fsdprt_adamw_step(dev.ctx, dev.stream, gt, p[k], 0, g, 0, m[k],
                                0, v[k], 0, n, t, 1e-2, 0.9, 0.999, 1e-8, 0.01,
                                0, 0, 0));
        RT_OK(fsdprt_sgd_step(dev.ctx, dev.stream, gt, p[k], 0, g, 0, mb[k],
                              0, n, t, 1e-2, 0.9, 0.0, 0.01, 1, 0, 0));
        RT_OK(fsdprt_lion_step(dev.ctx, dev.stream, gt, p[k], 0, g, 0, l[k],
                               0, n, t, 1e-3, 0.9, 0.99, 0.1, 0, 0));
      }
      dev.sync(); // the copies read `half` and `wide`
    }
    for (int64_t *tensor : {p, m, v, mb, l})
      EXPECT_EQ(dev.download(tensor[0], n), dev.download(tensor[1], n));
  }
}

TEST_P(OptimizerConformance, PackedAndUnalignedUpdatesGiveTheSameBits) {
  // Backends may move elements in packs (CUDA: eight a thread where every
  // operand is 16-byte aligned) with a tail: the update of each element
  // must not depend on it. The same tensors at element offset 0 (packs,
  // then a tail: n is odd) and at offset 1 (no packs) must end bit for bit
  // alike under AdamW, SGD without a momentum buffer, and Lion (two, none
  // and one state tensors).
  Device dev(GetParam());
  const int64_t n = 1037;
  std::vector<float> result[2][4]; // by offset: param, m, v, Lion's moment
  for (int64_t offset : {int64_t(0), int64_t(1)}) {
    auto at = [&](std::vector<float> x) {
      x.insert(x.begin(), offset, 0.0f);
      return dev.upload(x);
    };
    std::vector<float> zeros(n, 0.0f);
    int64_t tensors[4] = {at(randomVector(n, 91, -1.0f, 1.0f)), at(zeros),
                          at(zeros), at(zeros)};
    auto [dp, dm, dv, dl] = tensors;
    int64_t dg = dev.alloc((n + offset) * 2), o2 = offset * 2, o4 = offset * 4;
    for (int t = 1; t <= 2; ++t) {
      std::vector<uint16_t> grad(n + offset);
      auto values = randomVector(n, 600 + t, -2.0f, 2.0f);
      for (int64_t i = 0; i < n; ++i)
        grad[offset + i] = floatToBf16(values[i]);
      RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, dg, 0, grad.data(),
                                  (n + offset) * 2));
      RT_OK(fsdprt_adamw_step(dev.ctx, dev.stream, FSDPRT_BF16, dp, o4, dg, o2,
                              dm, o4, dv, o4, n, t, 1e-2, 0.9, 0.999, 1e-8,
                              0.01, 0, 0, 0));
      RT_OK(fsdprt_sgd_step(dev.ctx, dev.stream, FSDPRT_BF16, dp, o4, dg, o2, 0,
                            0, n, t, 0.05, 0.0, 0.0, 0.01, 0, 0, 0));
      RT_OK(fsdprt_lion_step(dev.ctx, dev.stream, FSDPRT_BF16, dp, o4, dg, o2,
                             dl, o4, n, t, 1e-3, 0.9, 0.99, 0.1, 0, 0));
      dev.sync(); // the copy reads `grad`
    }
    for (int k = 0; k < 4; ++k) {
      auto all = dev.download(tensors[k], n + offset);
      result[offset][k].assign(all.begin() + offset, all.end());
    }
  }
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(result[0][k], result[1][k]) << "tensor " << k;
}

/// An update rule of the multi-tensor calls, and the state tensors it
/// keeps.
enum class Rule { AdamW, SgdNesterov, SgdPlain, Lion };
int statesOf(Rule rule) {
  return rule == Rule::AdamW ? 2 : rule == Rule::SgdPlain ? 0 : 1;
}

/// The parameter and state bits after two steps of `rule` over tensors of
/// `sizes` elements at element `offsets` of their buffers, with gradients
/// in `gradType` (bf16 or f32): one call per tensor, or (multi) one call
/// for all.
std::vector<float> updatedTensors(Device &dev, Rule rule, int32_t gradType,
                                  bool multi,
                                  const std::vector<int64_t> &sizes,
                                  const std::vector<int64_t> &offsets) {
  const int states = statesOf(rule);
  const int64_t gradBytes = gradType == FSDPRT_BF16 ? 2 : 4;
  // Operands a tensor passes: param, grad, then the states (SGD without
  // momentum passes a null momentum buffer).
  const int per = rule == Rule::AdamW ? 4 : 3;
  const size_t count = sizes.size();
  std::vector<int64_t> buf[4]; // param, grad, then the states
  for (size_t k = 0; k < count; ++k) {
    int64_t len = sizes[k] + offsets[k] + 1; // never an empty buffer
    buf[0].push_back(dev.upload(randomVector(len, 100 + k, -1.0f, 1.0f)));
    buf[1].push_back(dev.alloc(len * gradBytes));
    for (int i = 0; i < 2; ++i)
      buf[2 + i].push_back(
          i < states ? dev.upload(std::vector<float>(len, 0.0f)) : 0);
  }
  for (int t = 1; t <= 2; ++t) {
    std::vector<std::vector<float>> wide(count);
    std::vector<std::vector<uint16_t>> half(count);
    std::vector<int64_t> buffers, offs, numels;
    for (size_t k = 0; k < count; ++k) {
      int64_t len = sizes[k] + offsets[k] + 1;
      wide[k] = randomVector(len, 300 + 10 * k + t, -2.0f, 2.0f);
      for (float f : wide[k])
        half[k].push_back(floatToBf16(f));
      const void *host = gradType == FSDPRT_BF16
                             ? static_cast<const void *>(half[k].data())
                             : wide[k].data();
      RT_EXPECT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, buf[1][k], 0,
                                         host, len * gradBytes));
      for (int i = 0; i < per; ++i) {
        buffers.push_back(buf[i][k]);
        offs.push_back(buf[i][k] ? offsets[k] * (i == 1 ? gradBytes : 4) : 0);
      }
      numels.push_back(sizes[k]);
    }
    auto call = [&](int64_t n, const int64_t *b, const int64_t *o,
                    const int64_t *numel) {
      switch (rule) {
      case Rule::AdamW:
        RT_OK(fsdprt_adamw_multi_step(dev.ctx, dev.stream, gradType, n, b, o,
                                      numel, t, 1e-2, 0.9, 0.999, 1e-8, 0.01,
                                      0, 0, 0));
        break;
      case Rule::SgdNesterov:
        RT_OK(fsdprt_sgd_multi_step(dev.ctx, dev.stream, gradType, n, b, o,
                                    numel, t, 1e-2, 0.9, 0.0, 0.01, 1, 0, 0));
        break;
      case Rule::SgdPlain:
        RT_OK(fsdprt_sgd_multi_step(dev.ctx, dev.stream, gradType, n, b, o,
                                    numel, t, 5e-2, 0.0, 0.0, 0.01, 0, 0, 0));
        break;
      case Rule::Lion:
        RT_OK(fsdprt_lion_multi_step(dev.ctx, dev.stream, gradType, n, b, o,
                                     numel, t, 1e-3, 0.9, 0.99, 0.1, 0, 0));
        break;
      }
    };
    if (multi)
      call(count, buffers.data(), offs.data(), numels.data());
    else
      for (size_t k = 0; k < count; ++k)
        call(1, &buffers[k * per], &offs[k * per], &numels[k]);
    dev.sync(); // the copies read the host gradients
  }
  std::vector<float> out;
  for (int i : {0, 2, 3}) // not the gradients
    for (size_t k = 0; i < 2 + states && k < count; ++k) {
      auto all = dev.download(buf[i][k], sizes[k] + offsets[k] + 1);
      out.insert(out.end(), all.begin() + offsets[k], all.end() - 1);
    }
  return out;
}

TEST_P(OptimizerConformance, MultiTensorUpdatesGiveEachTensorItsOwnBits) {
  // torch.optim's fused=True (the compiler's fused-optimizer: every unit's
  // shard in one call, 32 tensors a launch on CUDA): one call over many
  // tensors must leave each as its own call does. Tensors with packs and
  // a tail, unaligned ones (no packs), an empty one, and more than one
  // CUDA launch takes; two, one and no state tensors; bf16 and f32
  // gradients.
  Device dev(GetParam());
  std::vector<int64_t> sizes, offsets;
  for (int k = 0; k < 37; ++k) {
    sizes.push_back(k == 0 ? 1037 : k == 3 ? 0 : (k * 13) % 50 + 1);
    offsets.push_back(k % 4 == 1 ? 1 : 0);
  }
  for (Rule rule :
       {Rule::AdamW, Rule::SgdNesterov, Rule::SgdPlain, Rule::Lion})
    for (int32_t gradType : {FSDPRT_BF16, FSDPRT_F32}) {
      SCOPED_TRACE("rule " + std::to_string(int(rule)) + ", grad dtype " +
                   std::to_string(gradType));
      auto separate =
          updatedTensors(dev, rule, gradType, false, sizes, offsets);
      auto together = updatedTensors(dev, rule, gradType, true, sizes, offsets);
      ASSERT_EQ(separate.size(), together.size());
      EXPECT_EQ(separate, together);
    }
}

TEST_P(OptimizerConformance, FoundInfFlagSkipsTheUpdateAndKeepsState) {
  // GradScaler: an update whose flag is set leaves parameter and moments as
  // they were; with the flag clear it runs as without one.
  Device dev(GetParam());
  int64_t p = dev.upload(std::vector<float>{1.0f, 2.0f}),
          g = dev.upload(std::vector<float>{0.5f, -0.5f}),
          m = dev.upload(std::vector<float>{0.1f, 0.2f}),
          v = dev.upload(std::vector<float>{0.3f, 0.4f}),
          mb = dev.upload(std::vector<float>{0.7f, 0.8f}),
          found = dev.upload(std::vector<float>{1.0f});
  RT_OK(fsdprt_adamw_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, m, 0,
                          v, 0, 2, 3, 0.1, 0.9, 0.999, 1e-8, 0.01, 0, found,
                          0));
  RT_OK(fsdprt_sgd_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, mb, 0, 2,
                        3, 0.1, 0.9, 0, 0, 0, found, 0));
  EXPECT_EQ(dev.download(p, 2), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(dev.download(m, 2), (std::vector<float>{0.1f, 0.2f}));
  EXPECT_EQ(dev.download(v, 2), (std::vector<float>{0.3f, 0.4f}));
  EXPECT_EQ(dev.download(mb, 2), (std::vector<float>{0.7f, 0.8f}));

  int64_t clear = dev.upload(std::vector<float>{0.0f});
  RT_OK(fsdprt_sgd_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, 0, 0, 2,
                        1, 0.2, 0, 0, 0, 0, clear, 0));
  EXPECT_EQ(dev.download(p, 2), (std::vector<float>{0.9f, 2.1f}));
}

TEST_P(OptimizerConformance, NonfiniteFlagFindsInfAndNanInAnyShard) {
  Device dev(GetParam());
  float inf = INFINITY, nan = NAN;
  int64_t finite = dev.upload(std::vector<float>{1e30f, -3.0f, 0.0f}),
          withInf = dev.upload(std::vector<float>{1.0f, -inf}),
          withNan = dev.upload(std::vector<float>{nan}), out = dev.alloc(4);
  auto flag = [&](int64_t buf, int64_t n, int accumulate) -> float {
    RT_EXPECT_OK(fsdprt_nonfinite_flag(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, n,
                                out, 0, accumulate));
    return dev.download(out, 1)[0];
  };
  EXPECT_EQ(flag(finite, 3, 0), 0.0f);
  EXPECT_EQ(flag(withInf, 2, 0), 1.0f);
  EXPECT_EQ(flag(finite, 3, 1), 1.0f); // a later finite shard keeps it
  EXPECT_EQ(flag(finite, 3, 0), 0.0f);
  EXPECT_EQ(flag(withNan, 1, 1), 1.0f);
  // A bf16 overflow (0x7f80 is +inf).
  int64_t bf16 = dev.upload(std::vector<uint16_t>{0x3f80, 0x7f80});
  RT_OK(fsdprt_nonfinite_flag(dev.ctx, dev.stream, FSDPRT_BF16, bf16, 0, 2,
                              out, 0, 0));
  EXPECT_EQ(dev.download(out, 1)[0], 1.0f);
}

TEST_P(OptimizerConformance, LossScaleIsWrittenAsSetWhenIssued) {
  Device dev(GetParam());
  int64_t out = dev.alloc(8);
  RT_OK(fsdprt_context_set_loss_scale(dev.ctx, 65536.0));
  RT_OK(fsdprt_loss_scale(dev.ctx, dev.stream, out, 0, 0));
  RT_OK(fsdprt_loss_scale(dev.ctx, dev.stream, out, 4, 1));
  RT_OK(fsdprt_context_set_loss_scale(dev.ctx, 2.0));
  EXPECT_EQ(dev.download(out, 2), (std::vector<float>{65536.0f, 1.0f / 65536}));
  EXPECT_NE(fsdprt_context_set_loss_scale(dev.ctx, 0.0), 0);
  EXPECT_NE(fsdprt_context_set_loss_scale(dev.ctx, INFINITY), 0);
}

TEST_P(OptimizerConformance, GradNormAccumulatesShardsAndClipScales) {
  Device dev(GetParam());
  int64_t a = dev.upload(std::vector<float>{3.0f, 0.0f}),
          b = dev.upload(std::vector<float>{4.0f}), sq = dev.alloc(4);
  RT_OK(
      fsdprt_grad_sq_norm(dev.ctx, dev.stream, FSDPRT_F32, a, 0, 2, sq, 0, 0));
  RT_OK(
      fsdprt_grad_sq_norm(dev.ctx, dev.stream, FSDPRT_F32, b, 0, 1, sq, 0, 1));
  EXPECT_EQ(dev.download(sq, 1)[0], 25.0f);
  // Norm 5 > 1: scaled by 1 / (5 + 1e-6), as clip_grad_norm_.
  RT_OK(fsdprt_clip_grad(dev.ctx, dev.stream, FSDPRT_F32, a, 0, 2, sq, 0, 1.0));
  RT_OK(fsdprt_clip_grad(dev.ctx, dev.stream, FSDPRT_F32, b, 0, 1, sq, 0, 1.0));
  float coef = 1.0f / (5.0f + 1e-6f);
  EXPECT_EQ(dev.download(a, 2), (std::vector<float>{3.0f * coef, 0.0f}));
  EXPECT_EQ(dev.download(b, 1), (std::vector<float>{4.0f * coef}));
  // Norm below max_norm: the clamp to 1 leaves gradients untouched.
  int64_t c = dev.upload(std::vector<float>{0.3f});
  RT_OK(
      fsdprt_grad_sq_norm(dev.ctx, dev.stream, FSDPRT_F32, c, 0, 1, sq, 0, 0));
  RT_OK(fsdprt_clip_grad(dev.ctx, dev.stream, FSDPRT_F32, c, 0, 1, sq, 0, 1.0));
  EXPECT_EQ(dev.download(c, 1)[0], 0.3f);
}

TEST_P(OptimizerConformance, ClipCoefficientIsTorchsClampedRatio) {
  Device dev(GetParam());
  // Sum of squares 25: norm 5, coefficient 2 / (5 + 1e-6); 0.09: clamped to 1.
  int64_t sq = dev.upload(std::vector<float>{25.0f, 0.09f});
  int64_t out = dev.upload(std::vector<float>{0, 0, 0, 0});
  RT_OK(fsdprt_clip_coefficient(dev.ctx, dev.stream, sq, 0, out, 0, out, 4, 2.0,
                                2.0));
  RT_OK(fsdprt_clip_coefficient(dev.ctx, dev.stream, sq, 4, out, 8, out, 12, 2.0,
                                2.0));
  EXPECT_EQ(dev.download(out, 4),
            (std::vector<float>{5.0f, 2.0f / (5.0f + 1e-6f), std::sqrt(0.09f), 1.0f}));
  EXPECT_EQ(fsdprt_clip_coefficient(dev.ctx, dev.stream, sq, 0, out, 0, out, 4,
                                    0.0, 2.0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_clip_coefficient(dev.ctx, dev.stream, sq, 0, out, 0, out, 4,
                                    1.0, 0.0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_clip_coefficient(dev.ctx, dev.stream, sq, 0, out, 0, out, 4,
                                    1.0, NAN),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

TEST_P(OptimizerConformance, ClipCoefficientOfOtherNormTypes) {
  // The total is sum |g|^p (max |g| for inf); the norm its p-th root.
  Device dev(GetParam());
  int64_t total = dev.upload(std::vector<float>{27.0f});
  int64_t out = dev.alloc(8);
  auto normOf = [&](double p) {
    RT_EXPECT_OK(fsdprt_clip_coefficient(dev.ctx, dev.stream, total, 0, out, 0,
                                         out, 4, 1.0, p));
    return dev.download(out, 2);
  };
  for (double p : {1.0, 3.0, 0.5, double(INFINITY)}) {
    double norm = std::isinf(p) ? 27.0 : std::pow(27.0, 1.0 / p);
    auto got = normOf(p);
    EXPECT_NEAR(got[0], norm, 1e-6 * norm) << "p " << p;
    EXPECT_NEAR(got[1], std::min(1.0, 1.0 / (norm + 1e-6)), 1e-7) << "p " << p;
  }
}

TEST_P(OptimizerConformance, MaxAbsAccumulatesShardsAndPropagatesNan) {
  // Against a scalar reference over a vector larger than one block of the
  // backends' partial maxima, in f32 and bf16.
  Device dev(GetParam());
  const int64_t n = 70000;
  auto x = randomVector(n, 77, 0.1f, 3.0f);
  x[n - 5] = -7.5f; // the largest magnitude, negative, in the last block
  float want = 0.0f;
  for (float v : x)
    want = std::max(want, std::fabs(v));
  int64_t buf = dev.upload(x), out = dev.alloc(4);
  RT_OK(fsdprt_max_abs(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, n, out, 0, 0));
  EXPECT_EQ(dev.download(out, 1)[0], want);
  // Accumulating a smaller shard keeps the max; a larger one replaces it.
  int64_t small = dev.upload(std::vector<float>{1.0f, -2.0f});
  RT_OK(fsdprt_max_abs(dev.ctx, dev.stream, FSDPRT_F32, small, 0, 2, out, 0, 1));
  EXPECT_EQ(dev.download(out, 1)[0], want);
  int64_t big = dev.upload(std::vector<float>{-9.0f});
  RT_OK(fsdprt_max_abs(dev.ctx, dev.stream, FSDPRT_F32, big, 0, 1, out, 0, 1));
  EXPECT_EQ(dev.download(out, 1)[0], 9.0f);
  // Without accumulate an empty shard gives 0.
  RT_OK(fsdprt_max_abs(dev.ctx, dev.stream, FSDPRT_F32, big, 0, 0, out, 0, 0));
  EXPECT_EQ(dev.download(out, 1)[0], 0.0f);
  // bf16 -2.0 (0xc000) and 0.5 (0x3f00).
  int64_t bf16 = dev.upload(std::vector<uint16_t>{0x3f00, 0xc000});
  RT_OK(fsdprt_max_abs(dev.ctx, dev.stream, FSDPRT_BF16, bf16, 0, 2, out, 0, 0));
  EXPECT_EQ(dev.download(out, 1)[0], 2.0f);
  // A NaN anywhere makes the norm NaN, as torch's max, and stays.
  int64_t withNan = dev.upload(std::vector<float>{1.0f, NAN, 2.0f});
  RT_OK(fsdprt_max_abs(dev.ctx, dev.stream, FSDPRT_F32, withNan, 0, 3, out, 0,
                       0));
  RT_OK(fsdprt_max_abs(dev.ctx, dev.stream, FSDPRT_F32, big, 0, 1, out, 0, 1));
  EXPECT_TRUE(std::isnan(dev.download(out, 1)[0]));
}

FSDPRT_INSTANTIATE_CONFORMANCE(OptimizerConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
