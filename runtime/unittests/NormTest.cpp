//===- NormTest.cpp - layer_norm, rms_norm, batch_norm, softmax -----------===//
#include "TestUtil.h"

#include <cmath>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class NormConformance : public ::testing::TestWithParam<std::string> {};

void checkLayerNorm(const std::string &backend, bool affine,
                    int64_t rows = 5) {
  Device dev(backend);
  const int64_t d = 8;
  const double eps = 1e-5;
  auto x = randomVector(rows * d, 51), w = randomVector(d, 52),
       b = randomVector(d, 53), dy = randomVector(rows * d, 54);
  Reference ref = [&](const Inputs &in) {
    std::vector<double> y(rows * d);
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < d; ++i)
        mean += in[0][r * d + i] / d;
      for (int64_t i = 0; i < d; ++i)
        var += std::pow(in[0][r * d + i] - mean, 2) / d;
      for (int64_t i = 0; i < d; ++i) {
        double v = (in[0][r * d + i] - mean) / std::sqrt(var + eps);
        y[r * d + i] = affine ? v * in[1][i] + in[2][i] : v;
      }
    }
    return y;
  };
  int64_t bx = dev.upload(x), bw = affine ? dev.upload(w) : 0,
          bb = affine ? dev.upload(b) : 0, bdy = dev.upload(dy);
  int64_t by = dev.alloc(rows * d * 4), bdx = dev.alloc(rows * d * 4),
          bdw = affine ? dev.alloc(d * 4) : 0,
          bdb = affine ? dev.alloc(d * 4) : 0;
  RT_OK(fsdprt_layer_norm_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw, 0,
                                  bb, 0, by, 0, rows, d, eps));
  RT_OK(fsdprt_layer_norm_backward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw,
                                   0, bdy, 0, bdx, 0, bdw, 0, bdb, 0, rows, d,
                                   eps));
  Inputs in{toDouble(x)};
  std::vector<std::vector<float>> grads{dev.download(bdx, rows * d)};
  if (affine) {
    in.push_back(toDouble(w));
    in.push_back(toDouble(b));
    grads.push_back(dev.download(bdw, d));
    grads.push_back(dev.download(bdb, d));
  }
  expectClose(dev.download(by, rows * d), ref(in), "y");
  expectGradients(ref, in, toDouble(dy), grads, {"dx", "dw", "db"});
}

TEST_P(NormConformance, LayerNormAffine) { checkLayerNorm(GetParam(), true); }
TEST_P(NormConformance, LayerNormNoAffine) {
  checkLayerNorm(GetParam(), false);
}
// More rows than one chunk of the weight and bias gradients' column sums.
TEST_P(NormConformance, LayerNormManyRows) {
  checkLayerNorm(GetParam(), true, 200);
}

void checkRmsNorm(const std::string &backend, bool weighted,
                  int64_t rows = 4) {
  Device dev(backend);
  const int64_t d = 6;
  const double eps = 1e-6;
  auto x = randomVector(rows * d, 61), w = randomVector(d, 62),
       dy = randomVector(rows * d, 63);
  Reference ref = [&](const Inputs &in) {
    std::vector<double> y(rows * d);
    for (int64_t r = 0; r < rows; ++r) {
      double ms = 0;
      for (int64_t i = 0; i < d; ++i)
        ms += in[0][r * d + i] * in[0][r * d + i] / d;
      for (int64_t i = 0; i < d; ++i)
        y[r * d + i] =
            in[0][r * d + i] / std::sqrt(ms + eps) * (weighted ? in[1][i] : 1);
    }
    return y;
  };
  int64_t bx = dev.upload(x), bw = weighted ? dev.upload(w) : 0,
          bdy = dev.upload(dy), by = dev.alloc(rows * d * 4),
          bdx = dev.alloc(rows * d * 4), bdw = weighted ? dev.alloc(d * 4) : 0;
  RT_OK(fsdprt_rms_norm_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw, 0,
                                by, 0, rows, d, eps));
  RT_OK(fsdprt_rms_norm_backward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw, 0,
                                 bdy, 0, bdx, 0, bdw, 0, rows, d, eps));
  Inputs in{toDouble(x)};
  std::vector<std::vector<float>> grads{dev.download(bdx, rows * d)};
  if (weighted) {
    in.push_back(toDouble(w));
    grads.push_back(dev.download(bdw, d));
  }
  expectClose(dev.download(by, rows * d), ref(in), "y");
  expectGradients(ref, in, toDouble(dy), grads, {"dx", "dw"});
}

TEST_P(NormConformance, RmsNormWeighted) { checkRmsNorm(GetParam(), true); }
TEST_P(NormConformance, RmsNormUnweighted) { checkRmsNorm(GetParam(), false); }
TEST_P(NormConformance, RmsNormManyRows) {
  checkRmsNorm(GetParam(), true, 150);
}

/// layer_norm and rms_norm at an odd width and the models' widths (GPT-2
/// 124M's 768, GPT-2 medium's 1024, and 1032, past a 1024-wide row), with
/// more rows than one chunk of the weight gradients' column sums, against
/// float64. Gradients analytic here: finite differences cost
/// O((rows * d)^2) at these widths. expectClose's bound admits f32
/// rounding of 1000-term row sums (~1e-5 of the scale).
TEST_P(NormConformance, NormsAtModelWidthsMatchFloat64) {
  Device dev(GetParam());
  const int64_t rows = 70;
  const double eps = 1e-5;
  for (int64_t d : {int64_t(29), int64_t(768), int64_t(1024), int64_t(1032)})
    for (bool centered : {true, false}) {
      SCOPED_TRACE(::testing::Message()
                   << "d " << d << (centered ? " layer_norm" : " rms_norm"));
      auto x = randomVector(rows * d, 301), w = randomVector(d, 302),
           b = randomVector(d, 303), dy = randomVector(rows * d, 304);
      std::vector<double> y(rows * d), dx(rows * d), dw(d), db(d);
      for (int64_t r = 0; r < rows; ++r) {
        const float *xr = &x[r * d], *gr = &dy[r * d];
        double mean = 0, var = 0, mg = 0, mgx = 0;
        for (int64_t j = 0; centered && j < d; ++j)
          mean += double(xr[j]) / d;
        for (int64_t j = 0; j < d; ++j)
          var += (xr[j] - mean) * (xr[j] - mean) / d;
        double rstd = 1.0 / std::sqrt(var + eps);
        for (int64_t j = 0; j < d; ++j) {
          double xhat = (xr[j] - mean) * rstd, g = double(gr[j]) * w[j];
          y[r * d + j] = xhat * w[j] + (centered ? b[j] : 0.0);
          mg += centered ? g / d : 0.0;
          mgx += g * xhat / d;
          dw[j] += gr[j] * xhat;
          db[j] += gr[j];
        }
        for (int64_t j = 0; j < d; ++j) {
          double xhat = (xr[j] - mean) * rstd, g = double(gr[j]) * w[j];
          dx[r * d + j] = rstd * (g - mg - xhat * mgx);
        }
      }
      int64_t bx = dev.upload(x), bw = dev.upload(w), bb = dev.upload(b),
              bdy = dev.upload(dy), by = dev.alloc(rows * d * 4),
              bdx = dev.alloc(rows * d * 4), bdw = dev.alloc(d * 4),
              bdb = dev.alloc(d * 4);
      if (centered) {
        RT_OK(fsdprt_layer_norm_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0,
                                        bw, 0, bb, 0, by, 0, rows, d, eps));
        RT_OK(fsdprt_layer_norm_backward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0,
                                         bw, 0, bdy, 0, bdx, 0, bdw, 0, bdb, 0,
                                         rows, d, eps));
      } else {
        RT_OK(fsdprt_rms_norm_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0,
                                      bw, 0, by, 0, rows, d, eps));
        RT_OK(fsdprt_rms_norm_backward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0,
                                       bw, 0, bdy, 0, bdx, 0, bdw, 0, rows, d,
                                       eps));
      }
      expectClose(dev.download(by, rows * d), y, "y");
      expectClose(dev.download(bdx, rows * d), dx, "dx");
      expectClose(dev.download(bdw, d), dw, "dw");
      if (centered)
        expectClose(dev.download(bdb, d), db, "db");
    }
}

/// The CUDA norms move 16-byte packs where a row's operands are aligned and
/// elements where not, summing in the same order: the same bits either way
/// (rows of 768, whole packs, and 771, a tail; f32 and bf16; layer_norm and
/// rms_norm, forward and backward).
TEST_P(NormConformance, NormsGiveTheSameBitsAlignedOrNot) {
  Device dev(GetParam());
  const int64_t rows = 6;
  for (int64_t d : {int64_t(768), int64_t(771)})
    for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << " dtype " << dtype);
      int64_t es = dtype == FSDPRT_F32 ? 4 : 2, n = rows * d;
      // Operands x, w, b, dy, then outputs y, dx, dw, db, rms y, rms dx,
      // rms dw: one set at offset 0, one an element further.
      const int64_t counts[11] = {n, d, d, n, n, n, d, d, n, n, d};
      std::vector<std::vector<uint8_t>> results[2];
      int64_t seed = 191;
      std::vector<int64_t> inputs32;
      for (int i = 0; i < 4; ++i)
        inputs32.push_back(dev.upload(randomVector(counts[i], seed++)));
      for (int layout = 0; layout < 2; ++layout) {
        int64_t off = layout * es;
        std::vector<int64_t> b;
        for (int i = 0; i < 11; ++i) {
          b.push_back(dev.alloc((counts[i] + 1) * (i >= 6 && i != 8 && i != 9
                                                       ? 4
                                                       : es)));
          if (i < 4)
            RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, inputs32[i], 0,
                              dtype, b[i], off, counts[i]));
        }
        RT_OK(fsdprt_layer_norm_forward(dev.ctx, dev.stream, dtype, b[0], off,
                                        b[1], off, b[2], off, b[4], off, rows,
                                        d, 1e-5));
        RT_OK(fsdprt_layer_norm_backward(dev.ctx, dev.stream, dtype, b[0], off,
                                         b[1], off, b[3], off, b[5], off, b[6],
                                         0, b[7], 0, rows, d, 1e-5));
        RT_OK(fsdprt_rms_norm_forward(dev.ctx, dev.stream, dtype, b[0], off,
                                      b[1], off, b[8], off, rows, d, 1e-6));
        RT_OK(fsdprt_rms_norm_backward(dev.ctx, dev.stream, dtype, b[0], off,
                                       b[1], off, b[3], off, b[9], off, b[10],
                                       0, rows, d, 1e-6));
        for (int i : {4, 5, 8, 9}) {
          auto bytes = dev.download<uint8_t>(b[i], (counts[i] + 1) * es);
          results[layout].emplace_back(bytes.begin() + off,
                                       bytes.begin() + off + counts[i] * es);
        }
      }
      for (size_t i = 0; i < results[0].size(); ++i) {
        EXPECT_EQ(results[0][i], results[1][i]) << "output " << i;
        EXPECT_NE(results[0][i],
                  std::vector<uint8_t>(results[0][i].size(), 0));
      }
    }
}

/// A bf16 layer_norm / rms_norm (forward and backward) gives the bits of the
/// f32 one on the same (widened) values, each result rounded once.
TEST_P(NormConformance, NormsInBf16AreTheF32ResultsRoundedOnce) {
  Device dev(GetParam());
  const int64_t rows = 40, d = 300;
  const double eps = 1e-5;
  // in16[i]: bf16 values; in32[i]: the same values widened to f32.
  std::vector<int64_t> in16, in32;
  int64_t seed = 181;
  for (int64_t n : {rows * d, d, d, rows * d}) { // x, w, b, dy
    int64_t f = dev.upload(randomVector(n, seed++)), h = dev.alloc(n * 2),
            w = dev.alloc(n * 4);
    RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, f, 0, FSDPRT_BF16, h, 0,
                      n));
    RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_BF16, h, 0, FSDPRT_F32, w, 0,
                      n));
    in16.push_back(h);
    in32.push_back(w);
  }
  // Outputs y, dx, dw, db in f32 and bf16.
  const int64_t sizes[4] = {rows * d, rows * d, d, d};
  std::vector<int64_t> out32, out16;
  for (int64_t n : sizes) {
    out32.push_back(dev.alloc(n * 4));
    out16.push_back(dev.alloc(n * 2));
  }
  auto expectRoundedOnce = [&](int count) {
    for (int i = 0; i < count; ++i) {
      int64_t want = dev.alloc(sizes[i] * 2);
      RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, out32[i], 0,
                        FSDPRT_BF16, want, 0, sizes[i]));
      EXPECT_EQ(dev.download<uint16_t>(out16[i], sizes[i]),
                dev.download<uint16_t>(want, sizes[i]))
          << "output " << i;
    }
  };
  for (int32_t dt : {FSDPRT_F32, FSDPRT_BF16}) {
    const std::vector<int64_t> &in = dt == FSDPRT_F32 ? in32 : in16;
    const std::vector<int64_t> &out = dt == FSDPRT_F32 ? out32 : out16;
    RT_OK(fsdprt_layer_norm_forward(dev.ctx, dev.stream, dt, in[0], 0, in[1],
                                    0, in[2], 0, out[0], 0, rows, d, eps));
    RT_OK(fsdprt_layer_norm_backward(dev.ctx, dev.stream, dt, in[0], 0, in[1],
                                     0, in[3], 0, out[1], 0, out[2], 0,
                                     out[3], 0, rows, d, eps));
  }
  {
    SCOPED_TRACE("layer_norm");
    expectRoundedOnce(4);
  }
  for (int32_t dt : {FSDPRT_F32, FSDPRT_BF16}) {
    const std::vector<int64_t> &in = dt == FSDPRT_F32 ? in32 : in16;
    const std::vector<int64_t> &out = dt == FSDPRT_F32 ? out32 : out16;
    RT_OK(fsdprt_rms_norm_forward(dev.ctx, dev.stream, dt, in[0], 0, in[1], 0,
                                  out[0], 0, rows, d, eps));
    RT_OK(fsdprt_rms_norm_backward(dev.ctx, dev.stream, dt, in[0], 0, in[1],
                                   0, in[3], 0, out[1], 0, out[2], 0, rows, d,
                                   eps));
  }
  SCOPED_TRACE("rms_norm");
  expectRoundedOnce(3);
}

void checkBatchNorm(const std::string &backend, bool training) {
  Device dev(backend);
  const int64_t n = 3, c = 4, s = 5; // x is [3, 4, 5] (N, C, L)
  const double eps = 1e-5, momentum = 0.1;
  auto x = randomVector(n * c * s, 71), w = randomVector(c, 72),
       b = randomVector(c, 73), dy = randomVector(n * c * s, 74);
  std::vector<float> rm = randomVector(c, 75),
                     rv = randomVector(c, 76, 0.5f, 2.0f);
  for (float &v : rv)
    v = std::fabs(v);
  auto stats = [&](const std::vector<double> &xs, int64_t ch, double &mean,
                   double &var) {
    mean = 0, var = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j)
        mean += xs[(i * c + ch) * s + j] / (n * s);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < s; ++j)
        var += std::pow(xs[(i * c + ch) * s + j] - mean, 2) / (n * s);
  };
  Reference ref = [&](const Inputs &in) {
    std::vector<double> y(n * c * s);
    for (int64_t ch = 0; ch < c; ++ch) {
      double mean = rm[ch], var = rv[ch];
      if (training)
        stats(in[0], ch, mean, var);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < s; ++j) {
          int64_t at = (i * c + ch) * s + j;
          y[at] =
              (in[0][at] - mean) / std::sqrt(var + eps) * in[1][ch] + in[2][ch];
        }
    }
    return y;
  };
  int64_t bx = dev.upload(x), bw = dev.upload(w), bb = dev.upload(b),
          brm = dev.upload(rm), brv = dev.upload(rv), bdy = dev.upload(dy);
  int64_t by = dev.alloc(x.size() * 4), bdx = dev.alloc(x.size() * 4),
          bdw = dev.alloc(c * 4), bdb = dev.alloc(c * 4);
  RT_OK(fsdprt_batch_norm_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw, 0,
                                  bb, 0, brm, 0, brv, 0, by, 0, n, c, s, eps,
                                  momentum, training));
  RT_OK(fsdprt_batch_norm_backward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw,
                                   0, brm, 0, brv, 0, bdy, 0, bdx, 0, bdw, 0,
                                   bdb, 0, n, c, s, eps, training));
  Inputs in{toDouble(x), toDouble(w), toDouble(b)};
  expectClose(dev.download(by, x.size()), ref(in), "y");
  // Running statistics: updated with the unbiased variance in training,
  // untouched in eval.
  std::vector<double> wantMean(c), wantVar(c);
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean, var;
    stats(in[0], ch, mean, var);
    double count = n * s;
    wantMean[ch] =
        training ? (1 - momentum) * rm[ch] + momentum * mean : rm[ch];
    wantVar[ch] = training ? (1 - momentum) * rv[ch] +
                                 momentum * var * count / (count - 1)
                           : rv[ch];
  }
  expectClose(dev.download(brm, c), wantMean, "running_mean");
  expectClose(dev.download(brv, c), wantVar, "running_var");
  expectGradients(
      ref, in, toDouble(dy),
      {dev.download(bdx, x.size()), dev.download(bdw, c), dev.download(bdb, c)},
      {"dx", "dw", "db"});
}

TEST_P(NormConformance, BatchNormTraining) { checkBatchNorm(GetParam(), true); }
TEST_P(NormConformance, BatchNormEval) { checkBatchNorm(GetParam(), false); }

TEST_P(NormConformance, SoftmaxAlongMiddleAndLastDim) {
  Device dev(GetParam());
  const std::vector<int64_t> shape{2, 5, 3};
  const int64_t n = 30;
  auto x = randomVector(n, 81, 0.1f, 3.0f), dy = randomVector(n, 82);
  for (int dim : {1, -1}) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    int64_t inner = dim == 1 ? 3 : 1, size = dim == 1 ? 5 : 3;
    Reference ref = [&](const Inputs &in) {
      std::vector<double> y(n);
      for (int64_t o = 0; o < n / (size * inner); ++o)
        for (int64_t i = 0; i < inner; ++i) {
          double sum = 0;
          for (int64_t j = 0; j < size; ++j)
            sum += std::exp(in[0][(o * size + j) * inner + i]);
          for (int64_t j = 0; j < size; ++j)
            y[(o * size + j) * inner + i] =
                std::exp(in[0][(o * size + j) * inner + i]) / sum;
        }
      return y;
    };
    int64_t bx = dev.upload(x), bdy = dev.upload(dy), by = dev.alloc(n * 4),
            bdx = dev.alloc(n * 4);
    RT_OK(fsdprt_softmax_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, by, 0,
                                 3, shape.data(), dim));
    RT_OK(fsdprt_softmax_backward(dev.ctx, dev.stream, FSDPRT_F32, by, 0, bdy,
                                  0, bdx, 0, 3, shape.data(), dim));
    Inputs in{toDouble(x)};
    expectClose(dev.download(by, n), ref(in), "y");
    expectGradients(ref, in, toDouble(dy), {dev.download(bdx, n)}, {"dx"});
  }
}

FSDPRT_INSTANTIATE_CONFORMANCE(NormConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
