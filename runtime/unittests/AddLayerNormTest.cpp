//===- AddLayerNormTest.cpp - the fused residual add + layer_norm ---------===//
//
// fsdprt_add_layer_norm_forward against float64, and against the two calls
// it replaces (fsdprt_binary_forward's add, then fsdprt_layer_norm_forward
// on the stored sum) bit for bit: the compiler's fuse-add-layer-norm relies
// on the fused program computing what the unfused one does.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cmath>
#include <tuple>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class AddLayerNormConformance : public ::testing::TestWithParam<std::string> {};

/// The f32 sum is a + b in f32; y is layer_norm of that sum in float64.
TEST_P(AddLayerNormConformance, MatchesFloat64) {
  Device dev(GetParam());
  const int64_t rows = 7;
  const double eps = 1e-5;
  for (int64_t d : {int64_t(29), int64_t(768)})
    for (bool affine : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << " affine " << affine);
      auto a = randomVector(rows * d, 401, -1.0f, 1.0f),
           b = randomVector(rows * d, 402, -1.0f, 1.0f),
           w = randomVector(d, 403), bias = randomVector(d, 404);
      std::vector<float> sum(rows * d);
      for (int64_t i = 0; i < rows * d; ++i)
        sum[i] = a[i] + b[i];
      std::vector<double> y(rows * d);
      for (int64_t r = 0; r < rows; ++r) {
        const float *s = &sum[r * d];
        double mean = 0, var = 0;
        for (int64_t j = 0; j < d; ++j)
          mean += double(s[j]) / d;
        for (int64_t j = 0; j < d; ++j)
          var += (s[j] - mean) * (s[j] - mean) / d;
        for (int64_t j = 0; j < d; ++j) {
          double v = (s[j] - mean) / std::sqrt(var + eps);
          y[r * d + j] = affine ? v * w[j] + bias[j] : v;
        }
      }
      int64_t ba = dev.upload(a), bb = dev.upload(b),
              bw = affine ? dev.upload(w) : 0,
              bbias = affine ? dev.upload(bias) : 0,
              bsum = dev.alloc(rows * d * 4), by = dev.alloc(rows * d * 4);
      RT_OK(fsdprt_add_layer_norm_forward(dev.ctx, dev.stream, FSDPRT_F32, ba,
                                          0, bb, 0, bw, 0, bbias, 0, bsum, 0,
                                          by, 0, rows, d, eps));
      EXPECT_EQ(dev.download(bsum, rows * d), sum) << "sum";
      expectClose(dev.download(by, rows * d), y, "y");
    }
}

/// The fused call writes the bits of add-then-layer_norm: f32, bf16 and
/// f16, rows of whole 16-byte packs (768) and with a tail (771), operands
/// aligned and an element off.
TEST_P(AddLayerNormConformance, GivesTheUnfusedBits) {
  Device dev(GetParam());
  const int64_t rows = 6;
  const double eps = 1e-5;
  for (int64_t d : {int64_t(768), int64_t(771)})
    for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16, FSDPRT_F16})
      for (int64_t skew : {0, 1}) {
        SCOPED_TRACE(::testing::Message()
                     << "d " << d << " dtype " << dtype << " skew " << skew);
        int64_t es = dtype == FSDPRT_F32 ? 4 : 2, n = rows * d, off = skew * es;
        // a, b, w, bias in dtype, cast from f32 at `off`.
        std::vector<int64_t> in;
        const int64_t counts[4] = {n, n, d, d};
        for (int i = 0; i < 4; ++i) {
          int64_t f32 = dev.upload(
              randomVector(counts[i], 411 + i, i < 2 ? -2.0f : 0.1f, 1.0f));
          in.push_back(dev.alloc((counts[i] + 1) * es));
          RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, f32, 0, dtype,
                            in[i], off, counts[i]));
        }
        int64_t sum = dev.alloc((n + 1) * es), y = dev.alloc((n + 1) * es),
                sum2 = dev.alloc((n + 1) * es), y2 = dev.alloc((n + 1) * es);
        RT_OK(fsdprt_add_layer_norm_forward(
            dev.ctx, dev.stream, dtype, in[0], off, in[1], off, in[2], off,
            in[3], off, sum, off, y, off, rows, d, eps));
        const int64_t shape[2] = {rows, d};
        RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, dtype, FSDPRT_ADD,
                                    in[0], off, 2, shape, in[1], off, 2, shape,
                                    sum2, off));
        RT_OK(fsdprt_layer_norm_forward(dev.ctx, dev.stream, dtype, sum2, off,
                                        in[2], off, in[3], off, y2, off, rows,
                                        d, eps));
        for (auto [fused, unfused, what] :
             {std::tuple{sum, sum2, "sum"}, std::tuple{y, y2, "y"}}) {
          auto got = dev.download<uint8_t>(fused, (n + 1) * es);
          auto want = dev.download<uint8_t>(unfused, (n + 1) * es);
          std::vector<uint8_t> g(got.begin() + off, got.begin() + off + n * es),
              w(want.begin() + off, want.begin() + off + n * es);
          EXPECT_EQ(g, w) << what;
          EXPECT_NE(g, std::vector<uint8_t>(g.size(), 0)) << what;
        }
      }
}

} // namespace

FSDPRT_INSTANTIATE_CONFORMANCE(AddLayerNormConformance);

} // namespace test
} // namespace rt
} // namespace fsdp
