//===- CudnnConvShape.h - A conv geometry as cuDNN sees it ------*- C++ -*-===//
//
// The runtime's convolution (fsdp/rt/math/Conv.h) described in cuDNN's
// terms: NCHW dims and strides of x [n, c, h, w], w [o, c / groups, kh, kw]
// (cuDNN infers the groups from the two channel counts) and y [n, o, oh,
// ow], and padding before and after per spatial dim. The runtime stores
// only the padding before; the padding after is what makes oh windows fit
// (more than before for an even kernel's 'same' padding). A pure function,
// so the translation is tested without cuDNN or a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_CUDNNCONVSHAPE_H
#define FSDP_RT_CUDA_CUDNNCONVSHAPE_H

#include "fsdp/rt/math/Conv.h"

#include <array>
#include <cstdint>
#include <string>

namespace fsdp {
namespace rt {
namespace cuda {

struct CudnnConvShape {
  using Dims4 = std::array<int64_t, 4>;
  using Dims2 = std::array<int64_t, 2>; // height, width
  Dims4 xDim, xStride, wDim, wStride, yDim, yStride;
  Dims2 prePadding, postPadding, stride, dilation;
};

/// `g` in cuDNN's terms; false, with the reason in `why`, where cuDNN
/// cannot express it: input rows or columns past the last window beyond
/// what a stride leaves over (cuDNN's output size would exceed oh / ow).
bool cudnnConvShape(const ConvGeometry &g, CudnnConvShape &shape,
                    std::string &why);

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_CUDNNCONVSHAPE_H
