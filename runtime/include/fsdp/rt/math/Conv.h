//===- Conv.h - convolution geometry and direct bodies ----------*- C++ -*-===//
//
// A 2-D convolution's geometry (a 1-D one is 2-D with height 1), read from
// the ABI's FSDPRT_CONV_GEOMETRY_LEN int64 array (fsdprt.h), and the
// direct bodies of one element of each of the three convolutions: the
// output, the input gradient and the weight gradient. Sums are in double in
// index order, so an element's value is the same whoever computes it. The
// CUDA backend runs them one thread per element; the CPU backend lowers
// the same convolutions to im2col + GEMM instead.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_CONV_H
#define FSDP_RT_MATH_CONV_H

#include "fsdp/rt/math/Hd.h"

#include <cstdint>

namespace fsdp {
namespace rt {

/// x [n, c, h, w], weight [o, c / groups, kh, kw], y [n, o, oh, ow]. Input
/// rows above h and columns beyond w are the zero padding after.
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, strideH, strideW, padH, padW,
      dilationH, dilationW, groups;

  FSDPRT_HD int64_t inputNumel() const { return n * c * h * w; }
  FSDPRT_HD int64_t weightNumel() const { return o * (c / groups) * kh * kw; }
  FSDPRT_HD int64_t outputNumel() const { return n * o * oh * ow; }
  /// Input channels and output channels per group.
  FSDPRT_HD int64_t groupInputs() const { return c / groups; }
  FSDPRT_HD int64_t groupOutputs() const { return o / groups; }
};

/// The geometry from the ABI's array, in fsdprt.h's order.
inline ConvGeometry convGeometryFromAbi(const int64_t *g) {
  return {g[0], g[1], g[2],  g[3],  g[4],  g[5],  g[6],  g[7],
          g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]};
}

/// f(iy, ix, ky, kx) for each tap of output (oy, ox)'s window that falls
/// inside the input (padding skipped), in row-major order.
template <typename F>
FSDPRT_HD void forEachWindowTap(const ConvGeometry &g, int64_t oy, int64_t ox,
                                F f) {
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    int64_t iy = oy * g.strideH - g.padH + ky * g.dilationH;
    if (iy < 0 || iy >= g.h)
      continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      int64_t ix = ox * g.strideW - g.padW + kx * g.dilationW;
      if (ix < 0 || ix >= g.w)
        continue;
      f(iy, ix, ky, kx);
    }
  }
}

/// f(oy, ox, ky, kx) for each output whose window reads input (iy, ix), by
/// its tap (ky, kx) there, in row-major tap order.
template <typename F>
FSDPRT_HD void forEachWindowReading(const ConvGeometry &g, int64_t iy,
                                    int64_t ix, F f) {
  for (int64_t ky = 0; ky < g.kh; ++ky) {
    int64_t ty = iy + g.padH - ky * g.dilationH;
    if (ty < 0 || ty % g.strideH || ty / g.strideH >= g.oh)
      continue;
    for (int64_t kx = 0; kx < g.kw; ++kx) {
      int64_t tx = ix + g.padW - kx * g.dilationW;
      if (tx < 0 || tx % g.strideW || tx / g.strideW >= g.ow)
        continue;
      f(ty / g.strideH, tx / g.strideW, ky, kx);
    }
  }
}

/// y[i] (flat in [n, o, oh, ow]) without bias.
FSDPRT_HD inline float convOutputAt(const ConvGeometry &g, const float *x,
                                    const float *w, int64_t i) {
  int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, oc = (i / (g.ow * g.oh)) % g.o,
          b = i / (g.ow * g.oh * g.o);
  int64_t cg = g.groupInputs(), first = oc / g.groupOutputs() * cg;
  double sum = 0.0;
  for (int64_t ci = 0; ci < cg; ++ci)
    forEachWindowTap(
        g, oy, ox, [&](int64_t iy, int64_t ix, int64_t ky, int64_t kx) {
          sum += static_cast<double>(
                     x[((b * g.c + first + ci) * g.h + iy) * g.w + ix]) *
                 w[((oc * cg + ci) * g.kh + ky) * g.kw + kx];
        });
  return static_cast<float>(sum);
}

/// dx[i] (flat in [n, c, h, w]): the outputs whose window reads x[i].
FSDPRT_HD inline float convInputGradAt(const ConvGeometry &g, const float *dy,
                                       const float *w, int64_t i) {
  int64_t ix = i % g.w, iy = (i / g.w) % g.h, ch = (i / (g.w * g.h)) % g.c,
          b = i / (g.w * g.h * g.c);
  int64_t cg = g.groupInputs(), og = g.groupOutputs();
  int64_t group = ch / cg, ci = ch % cg;
  double sum = 0.0;
  for (int64_t k = 0; k < og; ++k) {
    int64_t oc = group * og + k;
    forEachWindowReading(
        g, iy, ix, [&](int64_t oy, int64_t ox, int64_t ky, int64_t kx) {
          sum += static_cast<double>(
                     dy[((b * g.o + oc) * g.oh + oy) * g.ow + ox]) *
                 w[((oc * cg + ci) * g.kh + ky) * g.kw + kx];
        });
  }
  return static_cast<float>(sum);
}

/// dw[i] (flat in [o, c / groups, kh, kw]): summed over the batch and the
/// output positions.
FSDPRT_HD inline float convWeightGradAt(const ConvGeometry &g, const float *dy,
                                        const float *x, int64_t i) {
  int64_t kx = i % g.kw, ky = (i / g.kw) % g.kh,
          ci = (i / (g.kw * g.kh)) % g.groupInputs(),
          oc = i / (g.kw * g.kh * g.groupInputs());
  int64_t ch = oc / g.groupOutputs() * g.groupInputs() + ci;
  double sum = 0.0;
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t oy = 0; oy < g.oh; ++oy) {
      int64_t iy = oy * g.strideH - g.padH + ky * g.dilationH;
      if (iy < 0 || iy >= g.h)
        continue;
      for (int64_t ox = 0; ox < g.ow; ++ox) {
        int64_t ix = ox * g.strideW - g.padW + kx * g.dilationW;
        if (ix < 0 || ix >= g.w)
          continue;
        sum +=
            static_cast<double>(dy[((b * g.o + oc) * g.oh + oy) * g.ow + ox]) *
            x[((b * g.c + ch) * g.h + iy) * g.w + ix];
      }
    }
  return static_cast<float>(sum);
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_CONV_H
