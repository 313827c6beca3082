//===- EpilogueTest.cpp - linear layers take cuBLASLt's bias epilogues ----===//
//
// On the host emulation (cuda/emu/cublasLt.h counts the matmuls): a linear
// forward with a bias is one cuBLASLt matmul (bias epilogue), its backward
// one more (dw with the bias gradient as epilogue), for f32 and bf16, and
// the values are those of the float64 reference within one rounding of
// the storage type.
//
//===----------------------------------------------------------------------===//
#include "../TestUtil.h"

#include "fsdp/rt/math/Half.h"

#include <cstdlib>

#include <cublasLt.h>

namespace fsdp {
namespace rt {
namespace test {
namespace {

std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> out;
  for (float f : v)
    out.push_back(floatToBf16(f));
  return out;
}
std::vector<float> fromBf16(const std::vector<uint16_t> &v) {
  std::vector<float> out;
  for (uint16_t h : v)
    out.push_back(bf16ToFloat(h));
  return out;
}

void expectWithin(const std::vector<float> &got,
                  const std::vector<double> &want, double rel,
                  const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rel * (1.0 + std::abs(want[i])))
        << what << "[" << i << "]";
}

void checkEpilogues(bool bf16) {
  Device dev("cuda_emu");
  const int64_t m = 24, k = 16, n = 8; // 16-byte aligned rows in bf16
  auto x = randomVector(m * k, 1), w = randomVector(n * k, 2),
       b = randomVector(n, 3), dy = randomVector(m * n, 4);
  if (bf16) // the inputs the device sees, exactly
    for (auto *v : {&x, &w, &b, &dy})
      *v = fromBf16(toBf16(*v));
  int32_t dt = bf16 ? FSDPRT_BF16 : FSDPRT_F32;
  int64_t es = bf16 ? 2 : 4;
  auto up = [&](const std::vector<float> &v) {
    return bf16 ? dev.upload(toBf16(v)) : dev.upload(v);
  };
  auto down = [&](int64_t buf, int64_t count) {
    return bf16 ? fromBf16(dev.download<uint16_t>(buf, count))
                : dev.download(buf, count);
  };
  int64_t bx = up(x), bw = up(w), bb = up(b), bdy = up(dy);
  int64_t by = dev.alloc(m * n * es), bdx = dev.alloc(m * k * es),
          bdw = dev.alloc(n * k * es), bdb = dev.alloc(n * es);

  long before = emuLtMatmulCalls();
  RT_OK(fsdprt_linear_forward(dev.ctx, dev.stream, dt, bx, 0, bw, 0, bb, 0, by,
                              0, m, k, n));
  dev.sync();
  EXPECT_EQ(emuLtMatmulCalls() - before, 1) << "forward: one bias epilogue";
  RT_OK(fsdprt_linear_backward(dev.ctx, dev.stream, dt, bx, 0, bw, 0, bdy, 0,
                               bdx, 0, bdw, 0, bdb, 0, m, k, n));
  dev.sync();
  EXPECT_EQ(emuLtMatmulCalls() - before, 2) << "backward: dw with db";

  std::vector<double> y(m * n, 0.0), dw(n * k, 0.0), db(n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = b[j];
      for (int64_t p = 0; p < k; ++p) {
        s += double(x[i * k + p]) * w[j * k + p];
        dw[j * k + p] += double(dy[i * n + j]) * x[i * k + p];
      }
      y[i * n + j] = s;
      db[j] += dy[i * n + j];
    }
  double rel = bf16 ? 1.0 / 128 : 1e-5; // one rounding of the storage type
  expectWithin(down(by, m * n), y, rel, "y");
  expectWithin(down(bdw, n * k), dw, rel, "dw");
  expectWithin(down(bdb, n), db, rel, "db");
}

TEST(CudaEmuEpilogues, LinearF32UsesBiasEpilogues) { checkEpilogues(false); }
TEST(CudaEmuEpilogues, LinearBf16UsesBiasEpilogues) { checkEpilogues(true); }

/// nn.linear_gelu is one cuBLASLt matmul (GELU_AUX_BIAS) and
/// nn.linear_gelu_grad two (dx with DGELU, dw with the bias gradient) where
/// the aux's leading dimension is a multiple of 8; else the forward's
/// linear and the backward's dw take one each, dx a plain GEMM.
void checkGeluEpilogues(int64_t k, int64_t n, long forward, long backward) {
  Device dev("cuda_emu");
  const int64_t m = 24;
  int64_t x = dev.upload(randomVector(m * k, 11)),
          w = dev.upload(randomVector(n * k, 12)),
          b = dev.upload(randomVector(n, 13)),
          dy = dev.upload(randomVector(m * n, 14)), pre = dev.alloc(m * n * 4),
          y = dev.alloc(m * n * 4), dx = dev.alloc(m * k * 4),
          dw = dev.alloc(n * k * 4), db = dev.alloc(n * 4),
          preIn = dev.upload(randomVector(m * k, 15));
  long before = emuLtMatmulCalls();
  RT_OK(fsdprt_linear_gelu_forward(dev.ctx, dev.stream, FSDPRT_F32, x, 0, w, 0,
                                   b, 0, pre, 0, y, 0, m, k, n));
  dev.sync();
  EXPECT_EQ(emuLtMatmulCalls() - before, forward) << "forward";
  RT_OK(fsdprt_linear_gelu_backward(dev.ctx, dev.stream, FSDPRT_F32, x, 0, w, 0,
                                    dy, 0, preIn, 0, dx, 0, dw, 0, db, 0, m, k,
                                    n));
  dev.sync();
  EXPECT_EQ(emuLtMatmulCalls() - before, forward + backward) << "backward";
}

TEST(CudaEmuEpilogues, LinearGeluUsesGeluEpilogues) {
  checkGeluEpilogues(32, 16, 1, 2);
}
TEST(CudaEmuEpilogues, LinearGeluWithAnUnalignedAuxFallsBack) {
  checkGeluEpilogues(20, 12, 1, 1);
}

/// f32 GEMMs (cuBLAS and cuBLASLt) of a linear layer with and without a
/// bias, forward and backward: how many were allowed TF32 inputs.
long tf32Gemms(int32_t dtype) {
  Device dev("cuda_emu");
  const int64_t m = 8, k = 8, n = 8, es = dtype == FSDPRT_F32 ? 4 : 2;
  int64_t x = dev.alloc(m * k * es), w = dev.alloc(n * k * es),
          b = dev.alloc(n * es), y = dev.alloc(m * n * es),
          dx = dev.alloc(m * k * es), dw = dev.alloc(n * k * es),
          db = dev.alloc(n * es);
  for (int64_t buf : {x, w, b})
    RT_EXPECT_OK(fsdprt_fill(dev.ctx, dev.stream, dtype, buf, 0, 8, 0.5));
  long before = emuTf32Gemms();
  for (int64_t bias : {b, int64_t(0)}) {
    RT_EXPECT_OK(fsdprt_linear_forward(dev.ctx, dev.stream, dtype, x, 0, w, 0,
                                       bias, 0, y, 0, m, k, n));
    RT_EXPECT_OK(fsdprt_linear_backward(dev.ctx, dev.stream, dtype, x, 0, w,
                                        0, y, 0, dx, 0, dw, 0,
                                        bias ? db : 0, 0, m, k, n));
  }
  dev.sync();
  return emuTf32Gemms() - before;
}

// TF32 is off unless FSDPRT_CUDA_TF32=1 (read when the context is made),
// and then only for f32 GEMMs, as torch.backends.cuda.matmul.allow_tf32.
TEST(CudaEmuEpilogues, Tf32OnlyWhenAllowedAndOnlyForF32) {
  EXPECT_EQ(tf32Gemms(FSDPRT_F32), 0);
  setenv("FSDPRT_CUDA_TF32", "1", 1);
  long f32 = tf32Gemms(FSDPRT_F32), bf16 = tf32Gemms(FSDPRT_BF16);
  unsetenv("FSDPRT_CUDA_TF32");
  EXPECT_EQ(f32, 6) << "with bias: 1 + 2 (dx, dw with db); without: 1 + 2";
  EXPECT_EQ(bf16, 0);
}

/// A linear forward's output and its cuBLASLt calls, twice on one shape.
struct TunedRun {
  std::vector<float> y;
  long firstCalls, secondCalls;
};
TunedRun linearForwardTwice() {
  Device dev("cuda_emu");
  const int64_t m = 24, k = 16, n = 8;
  int64_t x = dev.upload(randomVector(m * k, 5)),
          w = dev.upload(randomVector(n * k, 6)),
          b = dev.upload(randomVector(n, 7)), y = dev.alloc(m * n * 4);
  TunedRun run;
  for (long *calls : {&run.firstCalls, &run.secondCalls}) {
    long before = emuLtMatmulCalls();
    RT_EXPECT_OK(fsdprt_linear_forward(dev.ctx, dev.stream, FSDPRT_F32, x, 0, w,
                                       0, b, 0, y, 0, m, k, n));
    dev.sync();
    *calls = emuLtMatmulCalls() - before;
  }
  run.y = dev.download(y, m * n);
  return run;
}

// FSDPRT_GEMM_AUTOTUNE=1 (read when the context is made): a shape's first
// call times each candidate of the heuristic (the emulation offers two)
// once to warm up and three times timed, then runs the fastest; later
// calls of the shape run the chosen one alone. The output is the same.
TEST(CudaEmuEpilogues, AutotuneTimesTheCandidatesOncePerShape) {
  TunedRun plain = linearForwardTwice();
  setenv("FSDPRT_GEMM_AUTOTUNE", "1", 1);
  TunedRun tuned = linearForwardTwice();
  unsetenv("FSDPRT_GEMM_AUTOTUNE");
  EXPECT_EQ(plain.firstCalls, 1);
  EXPECT_EQ(plain.secondCalls, 1);
  EXPECT_EQ(tuned.firstCalls, 2 * (1 + 3) + 1);
  EXPECT_EQ(tuned.secondCalls, 1);
  EXPECT_EQ(tuned.y, plain.y);
}

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
