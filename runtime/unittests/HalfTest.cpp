//===- HalfTest.cpp - bf16/f16 conversions and 16-bit storage kernels -----===//
#include "TestUtil.h"

#include "fsdp/rt/math/Half.h"
#include "fsdp/rt/math/Philox.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

namespace fsdp {
namespace rt {
namespace test {
namespace {

/// Independent reference: the nearest 16-bit pattern by search over the
/// monotonic positive patterns [0, maxFinite] plus the Inf pattern treated as
/// the next power of two (so IEEE overflow rounding falls out); ties go to
/// the even pattern.
template <typename ToFloat>
uint16_t nearestEven(float f, ToFloat toFloat, uint16_t infBits,
                     double infValue) {
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(static_cast<double>(f));
  if (std::isinf(f))
    return sign | infBits;
  auto value = [&](uint32_t h) {
    return h == infBits ? infValue : static_cast<double>(toFloat(uint16_t(h)));
  };
  uint32_t lo = 0, hi = infBits; // invariant value(lo) <= a < value(hi)
  if (a >= infValue)
    return sign | infBits;
  while (hi - lo > 1) {
    uint32_t mid = (lo + hi) / 2;
    (value(mid) <= a ? lo : hi) = mid;
  }
  double dLo = a - value(lo), dHi = value(hi) - a;
  uint32_t pick = dLo < dHi ? lo : dHi < dLo ? hi : (lo % 2 == 0 ? lo : hi);
  return static_cast<uint16_t>(sign | pick);
}

TEST(HalfConversion, Bf16RoundsToNearestEvenOnRandomFloats) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    float f = bitsFloat(bits(gen));
    if (std::isnan(f))
      continue;
    ASSERT_EQ(floatToBf16(f),
              nearestEven(f, bf16ToFloat, 0x7f80, std::ldexp(1.0, 128)))
        << "float bits 0x" << std::hex << floatBits(f);
  }
}

TEST(HalfConversion, F16RoundsToNearestEvenOnRandomFloats) {
  std::mt19937 gen(8);
  // Exponents around the f16 range, including its subnormals and overflow.
  std::uniform_real_distribution<double> expo(-27, 17);
  std::uniform_real_distribution<double> mant(1, 2);
  for (int i = 0; i < 200000; ++i) {
    float f =
        static_cast<float>(std::ldexp(mant(gen), int(std::floor(expo(gen)))));
    if (i % 2)
      f = -f;
    ASSERT_EQ(floatToF16(f), nearestEven(f, f16ToFloat, 0x7c00, 65536.0))
        << "value " << f;
  }
}

TEST(HalfConversion, TiesGoToEven) {
  EXPECT_EQ(floatToBf16(bitsFloat(0x3f808000)), 0x3f80); // tie, even below
  EXPECT_EQ(floatToBf16(bitsFloat(0x3f818000)), 0x3f82); // tie, even above
  EXPECT_EQ(floatToBf16(bitsFloat(0x3f808001)), 0x3f81); // above the tie
  EXPECT_EQ(floatToF16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -25)), 0x0000);     // tie to 0
  EXPECT_EQ(floatToF16(3 * std::ldexp(1.0f, -25)), 0x0002); // tie to even 2
}

TEST(HalfConversion, NanInfOverflowAndSubnormals) {
  const float inf = std::numeric_limits<float>::infinity();
  // A signalling NaN whose payload would round into the Inf pattern.
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(bitsFloat(0x7f800001)))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(bitsFloat(0x7f800001)))));
  EXPECT_TRUE(std::isnan(f16ToFloat(floatToF16(-std::nanf("")))));
  EXPECT_EQ(floatToBf16(inf), 0x7f80);
  EXPECT_EQ(floatToBf16(-inf), 0xff80);
  EXPECT_EQ(floatToF16(inf), 0x7c00);
  EXPECT_EQ(floatToF16(-inf), 0xfc00);
  // Overflow.
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToF16(65504.0f), 0x7bff);
  EXPECT_EQ(floatToF16(65519.0f), 0x7bff);
  EXPECT_EQ(floatToF16(65520.0f), 0x7c00);
  EXPECT_EQ(floatToF16(-1e6f), 0xfc00);
  // Subnormals both ways and signed zero.
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(f16ToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16ToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(floatToF16(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(floatToBf16(bitsFloat(0x00010000)), 0x0001);
  EXPECT_EQ(bf16ToFloat(0x0001), bitsFloat(0x00010000));
  EXPECT_EQ(floatToF16(-0.0f), 0x8000);
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
  EXPECT_EQ(f16ToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(f16ToFloat(0xfc00), -inf);
}

TEST(HalfConversion, EveryNonNanPatternRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t b = static_cast<uint16_t>(h);
    if (!std::isnan(bf16ToFloat(b)))
      ASSERT_EQ(floatToBf16(bf16ToFloat(b)), b) << "bf16 0x" << std::hex << h;
    if (!std::isnan(f16ToFloat(b)))
      ASSERT_EQ(floatToF16(f16ToFloat(b)), b) << "f16 0x" << std::hex << h;
  }
}

TEST(Philox, KnownAnswerVectors) {
  // Known-answer tests of Random123 (kat_vectors, philox4x32 with 10 rounds).
  Philox4x32 r = philox4x32_10({{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox4x32_10({{~0u, ~0u, ~0u, ~0u}}, ~0u, ~0u);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = philox4x32_10({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
                    0xa4093822, 0x299f31d0);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

/// Kernels with 16-bit storage compute in f32 on the widened inputs and
/// round the result once; so they must match a float64 reference on the
/// 16-bit-rounded inputs to within one 16-bit rounding (2^-8 relative for
/// bf16, 2^-11 for f16) plus the f32 tolerance.
class HalfStorageConformance
    : public ::testing::TestWithParam<std::tuple<std::string, int32_t>> {
protected:
  int32_t dtype = std::get<1>(GetParam());
  double rtol = dtype == FSDPRT_BF16 ? 1.0 / 256 : 1.0 / 2048;

  std::vector<uint16_t> narrow(const std::vector<float> &v) const {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      h[i] = dtype == FSDPRT_BF16 ? floatToBf16(v[i]) : floatToF16(v[i]);
    return h;
  }
  std::vector<float> widen(const std::vector<uint16_t> &h) const {
    std::vector<float> v(h.size());
    for (size_t i = 0; i < h.size(); ++i)
      v[i] = dtype == FSDPRT_BF16 ? bf16ToFloat(h[i]) : f16ToFloat(h[i]);
    return v;
  }
};

// Odd k and n: no leading dimension is a multiple of 16 bytes. The CUDA
// backend runs large such GEMMs on padded copies; FSDPRT_CUDA_PAD_GEMM_FLOPS
// = 0 makes it pad these small ones too, and the results must not change.
TEST_P(HalfStorageConformance, LinearForwardAndBackward) {
  const int64_t m = 4, k = 13, n = 5;
  auto x = narrow(randomVector(m * k, 181)),
       w = narrow(randomVector(n * k, 182)), b = narrow(randomVector(n, 183)),
       dy = narrow(randomVector(m * n, 184));
  auto xf = widen(x), wf = widen(w), bf = widen(b), dyf = widen(dy);
  std::vector<double> y(m * n), dx(m * k, 0.0), dw(n * k, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      y[i * n + j] = bf[j];
      for (int64_t p = 0; p < k; ++p) {
        y[i * n + j] += double(xf[i * k + p]) * wf[j * k + p];
        dx[i * k + p] += double(dyf[i * n + j]) * wf[j * k + p];
        dw[j * k + p] += double(dyf[i * n + j]) * xf[i * k + p];
      }
    }
  for (const char *pad : {"", "0"}) {
    SCOPED_TRACE(std::string("FSDPRT_CUDA_PAD_GEMM_FLOPS=") + pad);
    setenv("FSDPRT_CUDA_PAD_GEMM_FLOPS", pad, 1); // read by the backend
    Device dev(std::get<0>(GetParam()));
    int64_t bx = dev.upload(x), bw = dev.upload(w), bb = dev.upload(b),
            bdy = dev.upload(dy), by = dev.alloc(m * n * 2),
            bdx = dev.alloc(m * k * 2), bdw = dev.alloc(n * k * 2);
    RT_OK(fsdprt_linear_forward(dev.ctx, dev.stream, dtype, bx, 0, bw, 0, bb,
                                0, by, 0, m, k, n));
    RT_OK(fsdprt_linear_backward(dev.ctx, dev.stream, dtype, bx, 0, bw, 0, bdy,
                                 0, bdx, 0, bdw, 0, 0, 0, m, k, n));
    expectClose(widen(dev.download<uint16_t>(by, m * n)), y, "y", rtol, 1e-3);
    expectClose(widen(dev.download<uint16_t>(bdx, m * k)), dx, "dx", rtol,
                1e-3);
    expectClose(widen(dev.download<uint16_t>(bdw, n * k)), dw, "dw", rtol,
                1e-3);
  }
  unsetenv("FSDPRT_CUDA_PAD_GEMM_FLOPS");
}

TEST_P(HalfStorageConformance, PointwiseKernelsRoundOnce) {
  Device dev(std::get<0>(GetParam()));
  const int64_t n = 64;
  const std::vector<int64_t> aShape{4, 16}, bShape{16};
  auto x = narrow(randomVector(n, 185, 0.1f, 3.0f)),
       b = narrow(randomVector(16, 186)), dy = narrow(randomVector(n, 187));
  int64_t bx = dev.upload(x), bb = dev.upload(b), bdy = dev.upload(dy),
          out = dev.alloc(n * 2);
  auto xf = widen(x), bf = widen(b), dyf = widen(dy);
  auto check = [&](const char *what, auto ref) {
    std::vector<double> want(n);
    for (int64_t i = 0; i < n; ++i)
      want[i] = ref(i);
    expectClose(widen(dev.download<uint16_t>(out, n)), want, what, rtol, 1e-3);
  };
  RT_OK(fsdprt_activation_forward(dev.ctx, dev.stream, dtype, FSDPRT_GELU, bx,
                                  0, out, 0, n));
  check("gelu", [&](int64_t i) {
    return 0.5 * xf[i] * (1 + std::erf(xf[i] / std::sqrt(2.0)));
  });
  RT_OK(fsdprt_activation_backward(dev.ctx, dev.stream, dtype, FSDPRT_SILU, bx,
                                   0, bdy, 0, out, 0, n));
  check("silu backward", [&](int64_t i) {
    double s = 1 / (1 + std::exp(-double(xf[i])));
    return dyf[i] * s * (1 + xf[i] * (1 - s));
  });
  RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, dtype, FSDPRT_MUL, bx, 0, 2,
                              aShape.data(), bb, 0, 1, bShape.data(), out, 0));
  check("mul broadcast", [&](int64_t i) { return double(xf[i]) * bf[i % 16]; });
  RT_OK(
      fsdprt_scale_forward(dev.ctx, dev.stream, dtype, bx, 0, out, 0, n, -0.3));
  check("scale", [&](int64_t i) { return -0.3 * xf[i]; });
  RT_OK(fsdprt_dropout_forward(dev.ctx, dev.stream, dtype, bx, 0, out, 0, n,
                               0.5, 9, 1, 0));
  check("dropout", [&](int64_t i) {
    return philoxUniform(9, 1, 0, i) >= 0.5f ? 2.0 * xf[i] : 0.0;
  });
}

INSTANTIATE_TEST_SUITE_P(
    Backends, HalfStorageConformance,
    ::testing::Combine(::testing::ValuesIn(conformanceBackends()),
                       ::testing::Values(FSDPRT_BF16, FSDPRT_F16)),
    [](const auto &info) {
      return std::get<0>(info.param) +
             (std::get<1>(info.param) == FSDPRT_BF16 ? "_bf16" : "_f16");
    });

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
