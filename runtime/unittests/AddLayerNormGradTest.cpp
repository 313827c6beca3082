//===- AddLayerNormGradTest.cpp - layer_norm backward + residual gradient -===//
//
// fsdprt_add_layer_norm_backward against float64, and against the two calls
// it replaces (fsdprt_layer_norm_backward, then fsdprt_binary_forward's add
// of the residual gradient) bit for bit: the compiler's fuse-add-layer-norm
// relies on the fused program computing what the unfused one does.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cmath>
#include <tuple>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class AddLayerNormGradConformance
    : public ::testing::TestWithParam<std::string> {};

/// dx = addend + layer_norm's input gradient, dw = sum dy * xhat and
/// db = sum dy, all in float64 from the f32 inputs.
TEST_P(AddLayerNormGradConformance, MatchesFloat64) {
  Device dev(GetParam());
  const int64_t rows = 7;
  const double eps = 1e-5;
  for (int64_t d : {int64_t(29), int64_t(768)})
    for (bool affine : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "d " << d << " affine " << affine);
      int64_t n = rows * d;
      auto x = randomVector(n, 501, -2.0f, 2.0f),
           dy = randomVector(n, 502, -1.0f, 1.0f),
           addend = randomVector(n, 503, -1.0f, 1.0f), w = randomVector(d, 504);
      std::vector<double> dx(n), dw(d, 0.0), db(d, 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const float *xr = &x[r * d], *dyr = &dy[r * d];
        double mean = 0, var = 0;
        for (int64_t j = 0; j < d; ++j)
          mean += double(xr[j]) / d;
        for (int64_t j = 0; j < d; ++j)
          var += (xr[j] - mean) * (xr[j] - mean) / d;
        double rstd = 1.0 / std::sqrt(var + eps), mg = 0, mgx = 0;
        std::vector<double> xhat(d), g(d);
        for (int64_t j = 0; j < d; ++j) {
          xhat[j] = (xr[j] - mean) * rstd;
          g[j] = double(dyr[j]) * (affine ? w[j] : 1.0);
          mg += g[j] / d;
          mgx += g[j] * xhat[j] / d;
          dw[j] += dyr[j] * xhat[j];
          db[j] += dyr[j];
        }
        for (int64_t j = 0; j < d; ++j)
          dx[r * d + j] =
              addend[r * d + j] + rstd * (g[j] - mg - xhat[j] * mgx);
      }
      int64_t bx = dev.upload(x), bdy = dev.upload(dy),
              badd = dev.upload(addend), bw = affine ? dev.upload(w) : 0,
              bdx = dev.alloc(n * 4), bdw = dev.alloc(d * 4),
              bdb = dev.alloc(d * 4);
      RT_OK(fsdprt_add_layer_norm_backward(dev.ctx, dev.stream, FSDPRT_F32, bx,
                                           0, bw, 0, bdy, 0, badd, 0, bdx, 0,
                                           bdw, 0, bdb, 0, rows, d, eps));
      // expectClose's f32 bound (TestUtil.h): each output sums at most 768
      // O(1) terms in f32 or double, far inside 1e-4 of the scale.
      expectClose(dev.download(bdx, n), dx, "dx");
      expectClose(dev.download(bdw, d), dw, "dw");
      expectClose(dev.download(bdb, d), db, "db");
    }
}

/// The fused call writes the bits of layer_norm_backward then the add:
/// f32, bf16 and f16, rows of whole 16-byte packs (768) and with a tail
/// (771), operands aligned and an element off, with and without a weight,
/// and with the addend's buffer as dx (the sum written in place).
TEST_P(AddLayerNormGradConformance, GivesTheUnfusedBits) {
  Device dev(GetParam());
  const int64_t rows = 6;
  const double eps = 1e-5;
  for (int64_t d : {int64_t(768), int64_t(771)})
    for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16, FSDPRT_F16})
      for (int64_t skew : {0, 1})
        for (bool affine : {true, false})
          for (bool inPlace : {false, true}) {
            SCOPED_TRACE(::testing::Message()
                         << "d " << d << " dtype " << dtype << " skew " << skew
                         << " affine " << affine << " in place " << inPlace);
            int64_t es = dtype == FSDPRT_F32 ? 4 : 2, n = rows * d,
                    off = skew * es;
            // x, dy, addend, w in dtype, cast from f32 at `off`.
            std::vector<int64_t> in;
            const int64_t counts[4] = {n, n, n, d};
            for (int i = 0; i < 4; ++i) {
              int64_t f32 = dev.upload(
                  randomVector(counts[i], 511 + i, i < 3 ? -2.0f : 0.1f, 1.0f));
              in.push_back(dev.alloc((counts[i] + 1) * es));
              RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, f32, 0, dtype,
                                in[i], off, counts[i]));
            }
            int64_t w = affine ? in[3] : 0;
            int64_t dx = inPlace ? in[2] : dev.alloc((n + 1) * es),
                    dw = dev.alloc((d + 1) * es), db = dev.alloc((d + 1) * es),
                    g2 = dev.alloc((n + 1) * es), dx2 = dev.alloc((n + 1) * es),
                    dw2 = dev.alloc((d + 1) * es),
                    db2 = dev.alloc((d + 1) * es);
            // The unfused pair first: in place, the fused call overwrites
            // the addend.
            RT_OK(fsdprt_layer_norm_backward(dev.ctx, dev.stream, dtype, in[0],
                                             off, w, off, in[1], off, g2, off,
                                             dw2, off, db2, off, rows, d, eps));
            const int64_t shape[2] = {rows, d};
            RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, dtype, FSDPRT_ADD,
                                        in[2], off, 2, shape, g2, off, 2, shape,
                                        dx2, off));
            RT_OK(fsdprt_add_layer_norm_backward(
                dev.ctx, dev.stream, dtype, in[0], off, w, off, in[1], off,
                in[2], off, dx, off, dw, off, db, off, rows, d, eps));
            // A buffer's `count` elements from `off`.
            auto bytes = [&](int64_t buf, int64_t count) {
              auto all = dev.download<uint8_t>(buf, (count + 1) * es);
              return std::vector<uint8_t>(all.begin() + off,
                                          all.begin() + off + count * es);
            };
            for (auto [fused, unfused, count, what] :
                 {std::tuple{dx, dx2, n, "dx"}, std::tuple{dw, dw2, d, "dw"},
                  std::tuple{db, db2, d, "db"}}) {
              auto got = bytes(fused, count);
              EXPECT_EQ(got, bytes(unfused, count)) << what;
              EXPECT_NE(got, std::vector<uint8_t>(got.size(), 0)) << what;
            }
            // The addend was added: the sum is not the norm's gradient.
            EXPECT_NE(bytes(dx, n), bytes(g2, n));
          }
}

} // namespace

FSDPRT_INSTANTIATE_CONFORMANCE(AddLayerNormGradConformance);

} // namespace test
} // namespace rt
} // namespace fsdp
