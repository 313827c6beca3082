//===- Softmax.cpp - softmax along one dim --------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/math/Rows.h"

namespace fsdp {
namespace rt {
namespace cpu {

// A row is the `dim` elements at fixed (outer, inner), `inner` apart.
void softmaxForward(int threads, const float *x, float *y, int64_t outer,
                    int64_t dim, int64_t inner) {
  parallelFor(threads, outer * inner,
              std::max<int64_t>(1, 8192 / std::max<int64_t>(dim, 1)),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  int64_t base = (r / inner) * dim * inner + r % inner;
                  softmaxRow(x + base, y + base, dim, inner);
                }
              });
}

void softmaxBackward(int threads, const float *y, const float *dy, float *dx,
                     int64_t outer, int64_t dim, int64_t inner) {
  parallelFor(threads, outer * inner,
              std::max<int64_t>(1, 8192 / std::max<int64_t>(dim, 1)),
              [&](int64_t r0, int64_t r1) {
                for (int64_t r = r0; r < r1; ++r) {
                  int64_t base = (r / inner) * dim * inner + r % inner;
                  softmaxRowBackward(y + base, dy + base, dx + base, dim,
                                     inner);
                }
              });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
