//===- Conv.cpp - convolution as im2col + GEMM ----------------------------===//
//
// Per image and group, the windows of the input are unfolded into a column
// matrix col [K = c/groups · kh · kw, P = oh · ow] (im2col), and each
// convolution is one OpenBLAS GEMM against it:
//
//   forward          y_g [O/g, P]  = w_g [O/g, K] · col
//   input gradient   col'          = w_gᵀ · dy_g, folded back (col2im)
//   weight gradient  dw_g [O/g, K] += dy_g · colᵀ   (images in order)
//
// A 1x1 convolution with stride 1 and no padding reads the input as its own
// column matrix. col is one image-group's [K, P] floats, allocated per call.
// Every sum runs in a fixed order (GEMM blocks are shape-determined, col2im
// folds each channel on one thread), so results do not depend on threads.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include <algorithm>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {
namespace {

/// Sizes of one image-group's GEMMs.
struct ConvPlan {
  explicit ConvPlan(const ConvGeometry &g)
      : cg(g.groupInputs()), og(g.groupOutputs()), k(cg * g.kh * g.kw),
        p(g.oh * g.ow),
        pointwise(g.kh == 1 && g.kw == 1 && g.strideH == 1 && g.strideW == 1 &&
                  g.padH == 0 && g.padW == 0 && g.oh == g.h && g.ow == g.w) {}
  int64_t cg, og, k, p;
  /// The input is its own column matrix (a 1x1 convolution over every pixel).
  bool pointwise;
};

/// The input row of output row `oy` under kernel row `ky` (may be outside
/// [0, h): padding).
int64_t inputRow(const ConvGeometry &g, int64_t oy, int64_t ky) {
  return oy * g.strideH - g.padH + ky * g.dilationH;
}
int64_t inputCol(const ConvGeometry &g, int64_t ox, int64_t kx) {
  return ox * g.strideW - g.padW + kx * g.dilationW;
}

/// col [K, P] of image-group x (its cg channels [cg, h, w]).
void im2col(int threads, const ConvGeometry &g, const ConvPlan &plan,
            const float *x, float *col) {
  parallelFor(threads, plan.k, 8, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      int64_t kx = row % g.kw, ky = (row / g.kw) % g.kh,
              ci = row / (g.kw * g.kh);
      const float *channel = x + ci * g.h * g.w;
      float *out = col + row * plan.p;
      for (int64_t oy = 0; oy < g.oh; ++oy) {
        int64_t iy = inputRow(g, oy, ky);
        for (int64_t ox = 0; ox < g.ow; ++ox) {
          int64_t ix = inputCol(g, ox, kx);
          bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
          out[oy * g.ow + ox] = inside ? channel[iy * g.w + ix] : 0.0f;
        }
      }
    }
  });
}

/// dx (image-group's cg channels, overwritten) = the fold of col [K, P]:
/// each channel adds its kh · kw rows in order on one thread.
void col2im(int threads, const ConvGeometry &g, const ConvPlan &plan,
            const float *col, float *dx) {
  parallelFor(threads, plan.cg, 1, [&](int64_t begin, int64_t end) {
    for (int64_t ci = begin; ci < end; ++ci) {
      float *channel = dx + ci * g.h * g.w;
      std::fill(channel, channel + g.h * g.w, 0.0f);
      for (int64_t ky = 0; ky < g.kh; ++ky)
        for (int64_t kx = 0; kx < g.kw; ++kx) {
          const float *in = col + ((ci * g.kh + ky) * g.kw + kx) * plan.p;
          for (int64_t oy = 0; oy < g.oh; ++oy) {
            int64_t iy = inputRow(g, oy, ky);
            if (iy < 0 || iy >= g.h)
              continue;
            for (int64_t ox = 0; ox < g.ow; ++ox) {
              int64_t ix = inputCol(g, ox, kx);
              if (ix >= 0 && ix < g.w)
                channel[iy * g.w + ix] += in[oy * g.ow + ox];
            }
          }
        }
    }
  });
}

/// Runs fn(image, group, x of the image-group) over every image-group in
/// order.
template <typename Fn> void forEachImageGroup(const ConvGeometry &g, Fn fn) {
  for (int64_t b = 0; b < g.n; ++b)
    for (int64_t grp = 0; grp < g.groups; ++grp)
      fn(b, grp, (b * g.c + grp * g.groupInputs()) * g.h * g.w,
         (b * g.o + grp * g.groupOutputs()) * g.oh * g.ow);
}

} // namespace

void convForward(int threads, const float *x, const float *w, const float *b,
                 float *y, const ConvGeometry &g) {
  ConvPlan plan(g);
  std::vector<float> col(plan.pointwise ? 0 : plan.k * plan.p);
  forEachImageGroup(g, [&](int64_t, int64_t grp, int64_t xAt, int64_t yAt) {
    const float *cols = x + xAt;
    if (!plan.pointwise) {
      im2col(threads, g, plan, x + xAt, col.data());
      cols = col.data();
    }
    gemm(threads, false, false, plan.og, plan.p, plan.k, 1.0f,
         w + grp * plan.og * plan.k, plan.k, cols, plan.p, 0.0f, y + yAt,
         plan.p);
    if (b)
      for (int64_t oc = 0; oc < plan.og; ++oc) {
        float bias = b[grp * plan.og + oc];
        float *row = y + yAt + oc * plan.p;
        for (int64_t i = 0; i < plan.p; ++i)
          row[i] += bias;
      }
  });
}

void convBackwardInput(int threads, const float *dy, const float *w, float *dx,
                       const ConvGeometry &g) {
  ConvPlan plan(g);
  std::vector<float> col(plan.pointwise ? 0 : plan.k * plan.p);
  forEachImageGroup(g, [&](int64_t, int64_t grp, int64_t xAt, int64_t yAt) {
    float *cols = plan.pointwise ? dx + xAt : col.data();
    gemm(threads, true, false, plan.k, plan.p, plan.og, 1.0f,
         w + grp * plan.og * plan.k, plan.k, dy + yAt, plan.p, 0.0f, cols,
         plan.p);
    if (!plan.pointwise)
      col2im(threads, g, plan, cols, dx + xAt);
  });
}

void convBackwardWeight(int threads, const float *dy, const float *x, float *dw,
                        const ConvGeometry &g) {
  ConvPlan plan(g);
  std::vector<float> col(plan.pointwise ? 0 : plan.k * plan.p);
  std::fill(dw, dw + g.weightNumel(), 0.0f);
  forEachImageGroup(g, [&](int64_t, int64_t grp, int64_t xAt, int64_t yAt) {
    const float *cols = x + xAt;
    if (!plan.pointwise) {
      im2col(threads, g, plan, x + xAt, col.data());
      cols = col.data();
    }
    gemm(threads, false, true, plan.og, plan.k, plan.p, 1.0f, dy + yAt, plan.p,
         cols, plan.p, 1.0f, dw + grp * plan.og * plan.k, plan.k);
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
