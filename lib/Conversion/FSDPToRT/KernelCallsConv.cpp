//===- KernelCallsConv.cpp - convolution and pooling calls ----------------===//
//
// The convolution family (CApiConv.cpp): nn.conv and its two gradients,
// nn.max_pool and its gradient, each one call taking the geometry as
// fsdprt.h's FSDPRT_CONV_GEOMETRY_LEN array (a pooling's is a depthwise
// convolution's: o = groups = c, the window as the kernel). A 1-D op
// [N, C, L] runs as a 2-D one of height 1.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/rt/fsdprt.h"

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

/// The ABI geometry of `input` [N, C, ...] into `output` [N, O, ...] with
/// windows `kernel` (spatial dims only) and the per-dim stride, padding
/// before and dilation.
static SmallVector<int64_t>
geometry(Value input, Value output, ArrayRef<int64_t> kernel,
         ArrayRef<int64_t> stride, ArrayRef<int64_t> padLow,
         ArrayRef<int64_t> dilation, int64_t groups) {
  ArrayRef<int64_t> x = shapeOf(input), y = shapeOf(output);
  bool twoD = x.size() == 4;
  // Per spatial dim (height, width): a 1-D convolution's height is 1.
  auto hw = [&](ArrayRef<int64_t> v, size_t first, int64_t unit) {
    return twoD ? std::pair(v[first], v[first + 1]) : std::pair(unit, v[first]);
  };
  auto [h, wd] = hw(x, 2, 1);
  auto [kh, kw] = hw(kernel, 0, 1);
  auto [oh, ow] = hw(y, 2, 1);
  auto [sh, sw] = hw(stride, 0, 1);
  auto [ph, pw] = hw(padLow, 0, 0);
  auto [dh, dw] = hw(dilation, 0, 1);
  static_assert(FSDPRT_CONV_GEOMETRY_LEN == 16, "fsdprt.h's geometry order");
  return SmallVector<int64_t>{x[0], x[1], h,  wd, y[1], kh, kw, oh,
                              ow,   sh,   sw, ph, pw,   dh, dw, groups};
}

/// A conv-family op's geometry: `weight` [O, C/groups, k...].
template <typename OpTy>
static SmallVector<int64_t> convGeometry(OpTy op, Value input, Value weight,
                                         Value output) {
  return geometry(input, output, shapeOf(weight).drop_front(2), op.getStride(),
                  op.getPadLow(), op.getDilation(),
                  static_cast<int64_t>(op.getGroups()));
}

/// A max pooling's geometry: a depthwise convolution's.
template <typename OpTy>
static SmallVector<int64_t> poolGeometry(OpTy op, Value input, Value output) {
  return geometry(input, output, op.getKernel(), op.getStride(),
                  op.getPadding(), op.getDilation(), shapeOf(input)[1]);
}

void fsdp::addConvKernels(KernelEmitters &k) {
  k.add<nn::ConvOp>([](CallBuilder &calls, nn::ConvOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getWeight())
        .opt(o.getBias())
        .t(o.getResult())
        .array(convGeometry(o, o.getInput(), o.getWeight(), o.getResult()))
        .call("conv_forward");
    return success();
  });
  k.add<nn::ConvTransposeOp>([](CallBuilder &calls, nn::ConvTransposeOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getWeight())
        .t(o.getResult())
        .array(convGeometry(o, o.getResult(), o.getWeight(), o.getInput()))
        .call("conv_backward_input");
    return success();
  });
  k.add<nn::ConvGradWeightOp>([](CallBuilder &calls, nn::ConvGradWeightOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getGrad())
        .t(o.getInput())
        .t(o.getResult())
        .array(convGeometry(o, o.getInput(), o.getResult(), o.getGrad()))
        .call("conv_backward_weight");
    return success();
  });
  k.add<nn::MaxPoolOp>([](CallBuilder &calls, nn::MaxPoolOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getResult())
        .array(poolGeometry(o, o.getInput(), o.getResult()))
        .call("max_pool_forward");
    return success();
  });
  k.add<nn::MaxPoolGradOp>([](CallBuilder &calls, nn::MaxPoolGradOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getGrad())
        .t(o.getResult())
        .array(poolGeometry(o, o.getInput(), o.getGrad()))
        .call("max_pool_backward");
    return success();
  });
}
