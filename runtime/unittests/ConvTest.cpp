//===- ConvTest.cpp - convolution and max pooling, forward and gradients --===//
//
// Each backend's convolution against a float64 direct convolution, and its
// input and weight gradients against float64 central differences of that
// reference (TestUtil's expectGradients), over the geometries the models
// use: strided and padded 3x3 with bias (ResNet), the 'same' padding of an
// even kernel (more padding after than before), dilation with groups, a
// depthwise 7x7 (ConvNeXt), a 1x1 (the CPU's no-im2col path) and a 1-D
// convolution (height 1). Max pooling likewise (ResNet's 3x3 stride-2
// window with padding, a dilated 1-D one), its input gradient against
// central differences too (random inputs have no ties).
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "fsdp/rt/math/Conv.h"

#include <algorithm>
#include <cmath>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class ConvConformance : public ::testing::TestWithParam<std::string> {};

/// The ABI's geometry array of `g`, in fsdprt.h's order.
std::vector<int64_t> abiOf(const ConvGeometry &g) {
  return {g.n,    g.c,         g.h,         g.w,       g.o,       g.kh,
          g.kw,   g.oh,        g.ow,        g.strideH, g.strideW, g.padH,
          g.padW, g.dilationH, g.dilationW, g.groups};
}

/// y = conv(x, w) + b in float64, written from the definition: inputs are
/// {x, w, b}; taps outside the input (either side) read zero.
std::vector<double> referenceConv(const ConvGeometry &g, const Inputs &in) {
  const std::vector<double> &x = in[0], &w = in[1], &b = in[2];
  int64_t cg = g.c / g.groups, og = g.o / g.groups;
  std::vector<double> y(g.outputNumel());
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t oc = 0; oc < g.o; ++oc)
      for (int64_t oy = 0; oy < g.oh; ++oy)
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          double sum = b[oc];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < g.kh; ++ky)
              for (int64_t kx = 0; kx < g.kw; ++kx) {
                int64_t iy = oy * g.strideH - g.padH + ky * g.dilationH;
                int64_t ix = ox * g.strideW - g.padW + kx * g.dilationW;
                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w)
                  continue;
                int64_t ch = oc / og * cg + ci;
                sum += x[((n * g.c + ch) * g.h + iy) * g.w + ix] *
                       w[((oc * cg + ci) * g.kh + ky) * g.kw + kx];
              }
          y[((n * g.o + oc) * g.oh + oy) * g.ow + ox] = sum;
        }
  return y;
}

void checkConv(const std::string &backend, const ConvGeometry &g) {
  Device dev(backend);
  auto x = randomVector(g.inputNumel(), 81),
       w = randomVector(g.weightNumel(), 82), b = randomVector(g.o, 83),
       dy = randomVector(g.outputNumel(), 84);
  std::vector<int64_t> geometry = abiOf(g);
  int64_t bx = dev.upload(x), bw = dev.upload(w), bb = dev.upload(b),
          bdy = dev.upload(dy);
  int64_t by = dev.alloc(g.outputNumel() * 4),
          bdx = dev.alloc(g.inputNumel() * 4),
          bdw = dev.alloc(g.weightNumel() * 4);
  RT_OK(fsdprt_conv_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw, 0, bb,
                            0, by, 0, geometry.data()));
  RT_OK(fsdprt_conv_backward_input(dev.ctx, dev.stream, FSDPRT_F32, bdy, 0, bw,
                                   0, bdx, 0, geometry.data()));
  RT_OK(fsdprt_conv_backward_weight(dev.ctx, dev.stream, FSDPRT_F32, bdy, 0, bx,
                                    0, bdw, 0, geometry.data()));
  Reference ref = [&](const Inputs &in) { return referenceConv(g, in); };
  Inputs in{toDouble(x), toDouble(w), toDouble(b)};
  expectClose(dev.download(by, g.outputNumel()), ref(in), "y");
  // The bias gradient is not a conv kernel (the VJP sums dy): not checked.
  expectGradients(ref, in, toDouble(dy),
                  {dev.download(bdx, g.inputNumel()),
                   dev.download(bdw, g.weightNumel()),
                   {}},
                  {"dx", "dw", "db"});
}

// n, c, h, w, o, kh, kw, oh, ow, stride, pad (before), dilation, groups.
TEST_P(ConvConformance, Strided3x3PaddedWithBias) {
  checkConv(GetParam(), {2, 3, 7, 6, 4, 3, 3, 4, 3, 2, 2, 1, 1, 1, 1, 1});
}
TEST_P(ConvConformance, SamePaddingOfAnEvenKernelPadsMoreAfter) {
  // padding='same' with kw = 4: 1 column before, 2 after (implicit).
  checkConv(GetParam(), {1, 2, 5, 6, 3, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1, 1});
}
TEST_P(ConvConformance, DilatedGrouped) {
  checkConv(GetParam(), {2, 4, 7, 7, 6, 3, 3, 3, 3, 1, 1, 0, 0, 2, 2, 2});
}
TEST_P(ConvConformance, Depthwise7x7) {
  checkConv(GetParam(), {2, 3, 6, 5, 3, 7, 7, 6, 5, 1, 1, 3, 3, 1, 1, 3});
}
TEST_P(ConvConformance, Pointwise1x1) {
  checkConv(GetParam(), {2, 5, 3, 4, 3, 1, 1, 3, 4, 1, 1, 0, 0, 1, 1, 1});
}
TEST_P(ConvConformance, Conv1dIsHeightOne) {
  checkConv(GetParam(), {2, 3, 1, 9, 4, 1, 3, 1, 4, 1, 2, 0, 1, 1, 2, 1});
}

TEST_P(ConvConformance, RefusesGroupsThatDoNotDivideTheChannels) {
  Device dev(GetParam());
  ConvGeometry g{1, 3, 4, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0, 1, 1, 2};
  std::vector<int64_t> geometry = abiOf(g);
  int64_t buf = dev.alloc(1024);
  EXPECT_EQ(fsdprt_conv_forward(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, buf, 0,
                                0, 0, buf, 0, geometry.data()),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_last_error()).find("groups 2 must divide c = 3"),
            std::string::npos)
      << fsdprt_last_error();
}

/// Max pooling in float64 from the definition: each window's maximum
/// over the input elements it covers.
std::vector<double> referenceMaxPool(const ConvGeometry &g, const Inputs &in) {
  std::vector<double> y(g.outputNumel());
  for (int64_t plane = 0; plane < g.n * g.c; ++plane)
    for (int64_t oy = 0; oy < g.oh; ++oy)
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        double best = -INFINITY;
        for (int64_t ky = 0; ky < g.kh; ++ky)
          for (int64_t kx = 0; kx < g.kw; ++kx) {
            int64_t iy = oy * g.strideH - g.padH + ky * g.dilationH;
            int64_t ix = ox * g.strideW - g.padW + kx * g.dilationW;
            if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
              best = std::max(best, in[0][(plane * g.h + iy) * g.w + ix]);
          }
        y[(plane * g.oh + oy) * g.ow + ox] = best;
      }
  return y;
}

void checkMaxPool(const std::string &backend, const ConvGeometry &g) {
  Device dev(backend);
  auto x = randomVector(g.inputNumel(), 91),
       dy = randomVector(g.outputNumel(), 92);
  std::vector<int64_t> geometry = abiOf(g);
  int64_t bx = dev.upload(x), bdy = dev.upload(dy);
  int64_t by = dev.alloc(g.outputNumel() * 4),
          bdx = dev.alloc(g.inputNumel() * 4);
  RT_OK(fsdprt_max_pool_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, by, 0,
                                geometry.data()));
  RT_OK(fsdprt_max_pool_backward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bdy, 0,
                                 bdx, 0, geometry.data()));
  Reference ref = [&](const Inputs &in) { return referenceMaxPool(g, in); };
  Inputs in{toDouble(x)};
  expectClose(dev.download(by, g.outputNumel()), ref(in), "y");
  expectGradients(ref, in, toDouble(dy), {dev.download(bdx, g.inputNumel())},
                  {"dx"});
}

TEST_P(ConvConformance, MaxPool3x3Stride2Padded) {
  checkMaxPool(GetParam(), {2, 3, 7, 8, 3, 3, 3, 4, 4, 2, 2, 1, 1, 1, 1, 3});
}
TEST_P(ConvConformance, MaxPool1dDilated) {
  checkMaxPool(GetParam(), {2, 2, 1, 9, 2, 1, 2, 1, 4, 1, 2, 0, 1, 1, 3, 2});
}

TEST_P(ConvConformance, MaxPoolRefusesAGeometryThatIsNotDepthwise) {
  Device dev(GetParam());
  ConvGeometry g{1, 3, 4, 4, 3, 2, 2, 2, 2, 2, 2, 0, 0, 1, 1, 1};
  std::vector<int64_t> geometry = abiOf(g);
  int64_t buf = dev.alloc(1024);
  EXPECT_EQ(fsdprt_max_pool_forward(dev.ctx, dev.stream, FSDPRT_F32, buf, 0,
                                    buf, 0, geometry.data()),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_last_error())
                .find("a pooling has o = groups = c = 3, got o = 3 and "
                      "groups = 1"),
            std::string::npos)
      << fsdprt_last_error();
}

FSDPRT_INSTANTIATE_CONFORMANCE(ConvConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
