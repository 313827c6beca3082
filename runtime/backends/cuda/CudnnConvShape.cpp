//===- CudnnConvShape.cpp - A convolution's geometry as cuDNN sees it -----===//
#include "CudnnConvShape.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// Contiguous strides of NCHW dims.
CudnnConvShape::Dims4 nchwStrides(const CudnnConvShape::Dims4 &d) {
  return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
}

/// The padding after along one dim: what the last window reads past the
/// input (in + before + after spans exactly `out` windows). cuDNN sizes
/// its output as floor((in + before + after - extent) / stride) + 1, so
/// input left over past the last window is fine while it is shorter than
/// a stride (padding after 0); false where it is not.
bool paddingAfter(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                  int64_t before, int64_t dilation, int64_t &after) {
  int64_t spanned = (out - 1) * stride + dilation * (kernel - 1) + 1;
  after = spanned - in - before;
  if (after > -stride) {
    after = after < 0 ? 0 : after;
    return true;
  }
  return false;
}

} // namespace

bool cudnnConvShape(const ConvGeometry &g, CudnnConvShape &s,
                    std::string &why) {
  s.xDim = {g.n, g.c, g.h, g.w};
  s.wDim = {g.o, g.groupInputs(), g.kh, g.kw};
  s.yDim = {g.n, g.o, g.oh, g.ow};
  s.xStride = nchwStrides(s.xDim);
  s.wStride = nchwStrides(s.wDim);
  s.yStride = nchwStrides(s.yDim);
  s.prePadding = {g.padH, g.padW};
  s.stride = {g.strideH, g.strideW};
  s.dilation = {g.dilationH, g.dilationW};
  if (!paddingAfter(g.h, g.oh, g.kh, g.strideH, g.padH, g.dilationH,
                    s.postPadding[0]) ||
      !paddingAfter(g.w, g.ow, g.kw, g.strideW, g.padW, g.dilationW,
                    s.postPadding[1])) {
    why = "input rows or columns past the last window, more than a stride "
          "leaves over (cuDNN would size the output larger)";
    return false;
  }
  return true;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
