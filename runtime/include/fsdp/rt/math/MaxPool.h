//===- MaxPool.h - max-pooling bodies ---------------------------*- C++ -*-===//
//
// One output of a max pooling and one input's gradient, on the geometry of
// a depthwise convolution (ConvGeometry with o = groups = c, the window as
// the kernel). A window's maximum is PyTorch's: the first greatest element
// in row-major order, a NaN taking over; padding never wins (a window
// always holds an input element). The gradient of an input sums, in
// double, the cotangents of the windows whose maximum it is, so each
// element is computed by one thread without atomics.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MATH_MAXPOOL_H
#define FSDP_RT_MATH_MAXPOOL_H

#include "fsdp/rt/math/Conv.h"

namespace fsdp {
namespace rt {

/// A window's maximum and its position in the image (iy · w + ix).
struct WindowMax {
  float value;
  int64_t at;
};

/// The maximum of output i's window (i flat in [n, c, oh, ow]).
FSDPRT_HD inline WindowMax maxPoolAt(const ConvGeometry &g, const float *x,
                                     int64_t i) {
  int64_t ox = i % g.ow, oy = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
  const float *image = x + plane * g.h * g.w;
  WindowMax best{0.0f, -1};
  forEachWindowTap(g, oy, ox, [&](int64_t iy, int64_t ix, int64_t, int64_t) {
    float v = image[iy * g.w + ix];
    if (best.at < 0 || v > best.value || v != v)
      best = {v, iy * g.w + ix};
  });
  return best;
}

/// dx[i] (flat in [n, c, h, w]): the cotangents of the windows whose
/// maximum x[i] is.
FSDPRT_HD inline float maxPoolInputGradAt(const ConvGeometry &g, const float *x,
                                          const float *dy, int64_t i) {
  int64_t ix = i % g.w, iy = (i / g.w) % g.h, plane = i / (g.w * g.h);
  double sum = 0.0;
  forEachWindowReading(g, iy, ix,
                       [&](int64_t oy, int64_t ox, int64_t, int64_t) {
                         int64_t out = (plane * g.oh + oy) * g.ow + ox;
                         if (maxPoolAt(g, x, out).at == iy * g.w + ix)
                           sum += dy[out];
                       });
  return static_cast<float>(sum);
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MATH_MAXPOOL_H
