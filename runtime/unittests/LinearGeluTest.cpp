//===- LinearGeluTest.cpp - a linear layer and its tanh GELU, fused -------===//
//
// fsdprt_linear_gelu_forward / _backward against float64, and against the
// calls they replace (linear then activation(gelu tanh); linear_backward
// then activation_backward on its dx). The CPU backend gives the unfused
// bits, which the compiler's fuse-bias-gelu relies on there. The CUDA
// backend's cuBLASLt epilogues round once where the unfused calls round
// twice: within the bound derived below of the unfused values.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "fsdp/rt/math/Half.h"

#include <cmath>
#include <tuple>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class LinearGeluConformance : public ::testing::TestWithParam<std::string> {};

const double kSqrt2OverPi = std::sqrt(2.0 / std::acos(-1.0));

double geluTanh(double x) {
  const double c = kSqrt2OverPi;
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}
double geluTanhGrad(double x) {
  const double c = kSqrt2OverPi;
  double t = std::tanh(c * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * c * (1.0 + 3 * 0.044715 * x * x);
}

/// f32 forward and backward against float64: pre = x wᵀ + b, y =
/// gelu_tanh(pre), dx = gelu_tanh'(pre) · (dy w), dw = dyᵀ x, db = Σ dy.
TEST_P(LinearGeluConformance, MatchesFloat64) {
  Device dev(GetParam());
  const int64_t m = 24, k = 32;
  for (int64_t n : {int64_t(16), int64_t(12)}) // aux ld a multiple of 8, not
    for (bool bias : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "n " << n << " bias " << bias);
      auto x = randomVector(m * k, 501), w = randomVector(n * k, 502),
           b = randomVector(n, 503), dy = randomVector(m * n, 504),
           pre = randomVector(m * k, 505, 0.1f, 3.0f);
      std::vector<double> wantPre(m * n), wantY(m * n), wantDx(m * k),
          wantDw(n * k, 0.0), wantDb(n, 0.0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = bias ? b[j] : 0.0;
          for (int64_t p = 0; p < k; ++p) {
            s += double(x[i * k + p]) * w[j * k + p];
            wantDw[j * k + p] += double(dy[i * n + j]) * x[i * k + p];
          }
          wantPre[i * n + j] = s;
          wantY[i * n + j] = geluTanh(s);
          wantDb[j] += dy[i * n + j];
        }
      for (int64_t i = 0; i < m; ++i)
        for (int64_t p = 0; p < k; ++p) {
          double s = 0.0;
          for (int64_t j = 0; j < n; ++j)
            s += double(dy[i * n + j]) * w[j * k + p];
          wantDx[i * k + p] = geluTanhGrad(pre[i * k + p]) * s;
        }
      int64_t bx = dev.upload(x), bw = dev.upload(w),
              bb = bias ? dev.upload(b) : 0, bdy = dev.upload(dy),
              bpreIn = dev.upload(pre), bpre = dev.alloc(m * n * 4),
              by = dev.alloc(m * n * 4), bdx = dev.alloc(m * k * 4),
              bdw = dev.alloc(n * k * 4), bdb = dev.alloc(n * 4);
      RT_OK(fsdprt_linear_gelu_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0,
                                       bw, 0, bb, 0, bpre, 0, by, 0, m, k, n));
      RT_OK(fsdprt_linear_gelu_backward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0,
                                        bw, 0, bdy, 0, bpreIn, 0, bdx, 0, bdw,
                                        0, bdb, 0, m, k, n));
      // expectClose's f32 bound: sums of at most 32 O(1) products, and the
      // runtime's tanh within 3.3e-7 of tanh (math/Activation.h).
      expectClose(dev.download(bpre, m * n), wantPre, "pre");
      expectClose(dev.download(by, m * n), wantY, "y");
      expectClose(dev.download(bdx, m * k), wantDx, "dx");
      expectClose(dev.download(bdw, n * k), wantDw, "dw");
      expectClose(dev.download(bdb, n), wantDb, "db");
    }
}

/// Device values as floats, whatever the storage type.
std::vector<float> asFloats(Device &dev, int64_t buf, int32_t dtype,
                            int64_t n) {
  if (dtype == FSDPRT_F32)
    return dev.download(buf, n);
  std::vector<float> out;
  for (uint16_t h : dev.download<uint16_t>(buf, n))
    out.push_back(bf16ToFloat(h));
  return out;
}

/// |fused − unfused| where the fused op rounds g(v) once and the unfused
/// program rounds v to `q` and then g(q): |g(v) − g(q)| ≤ max|g'| · |v − q|
/// with |v − q| ≤ u·|q| (u the unit roundoff), plus each result's own
/// rounding, u·|fused| + u·|unfused|. max|g'| is 1.13 for both the GELU
/// (forward) and, as the factor gelu'(pre) multiplying v, its gradient
/// (backward); 1.25 leaves room for u·|q| ≠ u·|v|.
void expectWithinOneRounding(const std::vector<float> &fused,
                             const std::vector<float> &unfused,
                             const std::vector<float> &rounded, double u,
                             const char *what) {
  ASSERT_EQ(fused.size(), unfused.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    double bound = 1.25 * u * std::abs(rounded[i]) +
                   u * (std::abs(fused[i]) + std::abs(unfused[i]));
    EXPECT_LE(std::abs(double(fused[i]) - unfused[i]), bound)
        << what << "[" << i << "]: " << fused[i] << " vs " << unfused[i];
  }
}

/// The fused calls against the unfused ones, f32 and bf16, with the aux
/// leading dimension a multiple of 8 (the cuBLASLt epilogue) and not (the
/// CUDA fallback, the unfused calls). CPU: the same bits. The CUDA
/// emulation: pre and the weight and bias gradients the same bits (the
/// same GEMM sums), y and dx within one rounding of the storage type. A
/// GPU's epilogue kernels may sum in another order: pre, dw, db within the
/// same bound there.
TEST_P(LinearGeluConformance, FusedMatchesUnfused) {
  Device dev(GetParam());
  bool exact = GetParam() == "cpu", gpu = GetParam() == "cuda";
  const int64_t m = 24;
  for (int64_t k : {int64_t(32), int64_t(20)})
    for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16}) {
      const int64_t n = k + 8;
      SCOPED_TRACE(::testing::Message() << "k " << k << " dtype " << dtype);
      int64_t es = dtype == FSDPRT_F32 ? 4 : 2;
      // The unit roundoff of dtype. On a GPU, f32 also differs by the GEMM
      // kernels' summation order over k <= 32 O(1) products (~32 · 6e-8 of
      // the sum's magnitude) and cuBLASLt's own tanh: 1e-5.
      double u = dtype == FSDPRT_F32 ? (gpu ? 1e-5 : std::ldexp(1.0, -24))
                                     : std::ldexp(1.0, -8);
      // x, w, b, dy, and pre for the backward, in dtype.
      std::vector<int64_t> in;
      const int64_t counts[5] = {m * k, n * k, n, m * n, m * k};
      for (int i = 0; i < 5; ++i) {
        int64_t f32 = dev.upload(randomVector(
            counts[i], 521 + i, i == 4 ? 0.05f : 0.1f, i == 4 ? 4.0f : 1.0f));
        in.push_back(dev.alloc(counts[i] * es));
        RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, f32, 0, dtype, in[i],
                          0, counts[i]));
      }
      auto out = [&](int64_t count) { return dev.alloc(count * es); };
      int64_t pre = out(m * n), y = out(m * n), pre2 = out(m * n),
              y2 = out(m * n);
      RT_OK(fsdprt_linear_gelu_forward(dev.ctx, dev.stream, dtype, in[0], 0,
                                       in[1], 0, in[2], 0, pre, 0, y, 0, m, k,
                                       n));
      RT_OK(fsdprt_linear_forward(dev.ctx, dev.stream, dtype, in[0], 0, in[1],
                                  0, in[2], 0, pre2, 0, m, k, n));
      RT_OK(fsdprt_activation_forward(dev.ctx, dev.stream, dtype,
                                      FSDPRT_GELU_TANH, pre2, 0, y2, 0, m * n));
      int64_t dx = out(m * k), dw = out(n * k), db = out(n),
              dxLinear = out(m * k), dx2 = out(m * k), dw2 = out(n * k),
              db2 = out(n);
      RT_OK(fsdprt_linear_gelu_backward(dev.ctx, dev.stream, dtype, in[0], 0,
                                        in[1], 0, in[3], 0, in[4], 0, dx, 0, dw,
                                        0, db, 0, m, k, n));
      RT_OK(fsdprt_linear_backward(dev.ctx, dev.stream, dtype, in[0], 0, in[1],
                                   0, in[3], 0, dxLinear, 0, dw2, 0, db2, 0, m,
                                   k, n));
      RT_OK(fsdprt_activation_backward(dev.ctx, dev.stream, dtype,
                                       FSDPRT_GELU_TANH, in[4], 0, dxLinear, 0,
                                       dx2, 0, m * k));
      auto bytes = [&](int64_t buf, int64_t count) {
        return dev.download<uint8_t>(buf, count * es);
      };
      for (auto [a, b, count, what] :
           {std::tuple{pre, pre2, m * n, "pre"},
            std::tuple{dw, dw2, n * k, "dw"}, std::tuple{db, db2, n, "db"}}) {
        if (!gpu) {
          EXPECT_EQ(bytes(a, count), bytes(b, count)) << what;
          continue;
        }
        auto want = asFloats(dev, b, dtype, count);
        expectWithinOneRounding(asFloats(dev, a, dtype, count), want, want, u,
                                what);
      }
      if (exact) {
        EXPECT_EQ(bytes(y, m * n), bytes(y2, m * n)) << "y";
        EXPECT_EQ(bytes(dx, m * k), bytes(dx2, m * k)) << "dx";
        continue;
      }
      // The emulated epilogues (aux leading dimensions n and k multiples of
      // 8) round once: some bf16 elements land one step from the unfused.
      if (!gpu && dtype == FSDPRT_BF16 && k % 8 == 0) {
        EXPECT_NE(bytes(y, m * n), bytes(y2, m * n)) << "y: one rounding";
        EXPECT_NE(bytes(dx, m * k), bytes(dx2, m * k)) << "dx: one rounding";
      }
      expectWithinOneRounding(asFloats(dev, y, dtype, m * n),
                              asFloats(dev, y2, dtype, m * n),
                              asFloats(dev, pre2, dtype, m * n), u, "y");
      expectWithinOneRounding(asFloats(dev, dx, dtype, m * k),
                              asFloats(dev, dx2, dtype, m * k),
                              asFloats(dev, dxLinear, dtype, m * k), u, "dx");
    }
}

} // namespace

FSDPRT_INSTANTIATE_CONFORMANCE(LinearGeluConformance);

} // namespace test
} // namespace rt
} // namespace fsdp
