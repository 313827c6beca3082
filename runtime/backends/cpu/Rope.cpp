//===- Rope.cpp - rotary position embedding -------------------------------===//
//
// Interleaved pairs, as Meta's Llama reference (view_as_complex over the last
// dim): within each head, (x[2i], x[2i+1]) is rotated by t * theta^(-2i/D)
// at position t. The backward is the rotation by the opposite angle.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/math/Rotary.h"

#include <cmath>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

void rope(int threads, const float *x, float *y, int64_t batch, int64_t seq,
          int64_t heads, int64_t headDim, double theta, bool inverse) {
  int64_t half = headDim / 2;
  std::vector<float> cosT(seq * half), sinT(seq * half);
  for (int64_t t = 0; t < seq; ++t)
    for (int64_t i = 0; i < half; ++i)
      rotaryAngle(t, i, headDim, theta, cosT[t * half + i], sinT[t * half + i]);
  float sign = inverse ? -1.0f : 1.0f;
  int64_t width = heads * headDim;
  parallelFor(threads, batch * seq, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t t = r % seq;
      for (int64_t h = 0; h < heads; ++h) {
        const float *xh = x + r * width + h * headDim;
        float *yh = y + r * width + h * headDim;
        for (int64_t i = 0; i < half; ++i)
          rotatePair(xh[2 * i], xh[2 * i + 1], cosT[t * half + i],
                     sign * sinT[t * half + i], yh[2 * i], yh[2 * i + 1]);
      }
    }
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
