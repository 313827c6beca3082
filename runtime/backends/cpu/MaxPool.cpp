//===- MaxPool.cpp - max pooling and its input gradient -------------------===//
//
// The shared bodies of fsdp/rt/math/MaxPool.h over the outputs (forward)
// and the inputs (backward, a gather: no two threads write one element).
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/math/MaxPool.h"

namespace fsdp {
namespace rt {
namespace cpu {

void maxPoolForward(int threads, const float *x, float *y,
                    const ConvGeometry &g) {
  parallelFor(threads, g.outputNumel(), 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = maxPoolAt(g, x, i).value;
  });
}

void maxPoolBackward(int threads, const float *x, const float *dy, float *dx,
                     const ConvGeometry &g) {
  parallelFor(threads, g.inputNumel(), 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      dx[i] = maxPoolInputGradAt(g, x, dy, i);
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
