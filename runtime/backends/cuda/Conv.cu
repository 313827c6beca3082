//===- Conv.cu - convolution and max pooling (direct) ---------------------===//
//
// One thread per element of the result, each running the shared body of
// fsdp/rt/math/Conv.h or MaxPool.h (double sums in index order, so the same
// bits every run). No scratch: the memory plan has nothing to count.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"

#include "fsdp/rt/math/Conv.h"
#include "fsdp/rt/math/MaxPool.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

__global__ void convForwardKernel(ConvGeometry g, const float *x,
                                  const float *w, const float *b, float *y) {
  FSDPRT_GRID_STRIDE(i, g.outputNumel()) {
    float v = convOutputAt(g, x, w, i);
    y[i] = b ? v + b[(i / (g.oh * g.ow)) % g.o] : v;
  }
}

__global__ void convInputGradKernel(ConvGeometry g, const float *dy,
                                    const float *w, float *dx) {
  FSDPRT_GRID_STRIDE(i, g.inputNumel()) {
    dx[i] = convInputGradAt(g, dy, w, i);
  }
}

__global__ void convWeightGradKernel(ConvGeometry g, const float *dy,
                                     const float *x, float *dw) {
  FSDPRT_GRID_STRIDE(i, g.weightNumel()) {
    dw[i] = convWeightGradAt(g, dy, x, i);
  }
}

__global__ void maxPoolKernel(ConvGeometry g, const float *x, float *y) {
  FSDPRT_GRID_STRIDE(i, g.outputNumel()) { y[i] = maxPoolAt(g, x, i).value; }
}

__global__ void maxPoolGradKernel(ConvGeometry g, const float *x,
                                  const float *dy, float *dx) {
  FSDPRT_GRID_STRIDE(i, g.inputNumel()) {
    dx[i] = maxPoolInputGradAt(g, x, dy, i);
  }
}

} // namespace

void convForward(Stream s, const float *x, const float *w, const float *b,
                 float *y, const ConvGeometry &g) {
  FSDPRT_LAUNCH(convForwardKernel, g.outputNumel(), s, g, x, w, b, y);
}

void convBackwardInput(Stream s, const float *dy, const float *w, float *dx,
                       const ConvGeometry &g) {
  FSDPRT_LAUNCH(convInputGradKernel, g.inputNumel(), s, g, dy, w, dx);
}

void convBackwardWeight(Stream s, const float *dy, const float *x, float *dw,
                        const ConvGeometry &g) {
  FSDPRT_LAUNCH(convWeightGradKernel, g.weightNumel(), s, g, dy, x, dw);
}

void maxPoolForward(Stream s, const float *x, float *y, const ConvGeometry &g) {
  FSDPRT_LAUNCH(maxPoolKernel, g.outputNumel(), s, g, x, y);
}

void maxPoolBackward(Stream s, const float *x, const float *dy, float *dx,
                     const ConvGeometry &g) {
  FSDPRT_LAUNCH(maxPoolGradKernel, g.inputNumel(), s, g, x, dy, dx);
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
