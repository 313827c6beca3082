//===- NNConvOps.cpp - shape rules of convolution and pooling -------------===//
//
// One rule, convResultShape, gives a convolution's result shape from its
// input, weight and geometry; nn.conv infers its type with it, and
// nn.conv_transpose (its adjoint) and nn.conv_grad_weight check their
// spelled types against it. poolResultShape does the same for nn.max_pool
// and its gradient.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "ShapeRules.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::nn;

using namespace mlir::nn::rules;

namespace {

struct Geometry {
  DenseI64ArrayAttr stride, low, high, dilation;
  int64_t groups;
};

/// Checks that `list` has `spatial` entries, each at least `least`.
LogicalResult checkPerDim(std::optional<Location> loc, StringRef name,
                          StringRef what, DenseI64ArrayAttr list,
                          int64_t spatial, int64_t least) {
  if (!list)
    return fail(loc, name, "needs ", what);
  if (static_cast<int64_t>(list.size()) != spatial)
    return fail(loc, name, what, " must have ", spatial,
                " entries (one per spatial dim), got ", list.size());
  for (int64_t v : list.asArrayRef())
    if (v < least)
      return fail(loc, name, what, " entries must be ",
                  least ? "positive" : "non-negative", ", got ", v);
  return success();
}

/// The result shape of convolving `input` [N, C, spatial...] with `weight`
/// [O, C/groups, k...] under `g`, or an error at `loc`.
FailureOr<SmallVector<int64_t>> convResultShape(std::optional<Location> loc,
                                                StringRef name,
                                                RankedTensorType input,
                                                RankedTensorType weight,
                                                const Geometry &g) {
  if (!input || (input.getRank() != 3 && input.getRank() != 4))
    return fail(loc, name, "input must be [N, C, L] or [N, C, H, W], got ",
                input ? Type(input) : Type());
  int64_t spatial = input.getRank() - 2;
  if (!weight || weight.getRank() != input.getRank())
    return fail(loc, name, "weight must have rank ", input.getRank(),
                " like the input, got ", weight ? Type(weight) : Type());
  if (input.getElementType() != weight.getElementType())
    return fail(loc, name, "weight element type ", weight.getElementType(),
                " differs from the input's ", input.getElementType());
  if (failed(checkPerDim(loc, name, "stride", g.stride, spatial, 1)) ||
      failed(checkPerDim(loc, name, "pad_low", g.low, spatial, 0)) ||
      failed(checkPerDim(loc, name, "pad_high", g.high, spatial, 0)) ||
      failed(checkPerDim(loc, name, "dilation", g.dilation, spatial, 1)))
    return failure();
  int64_t channels = input.getDimSize(1), out = weight.getDimSize(0);
  if (g.groups < 1 || channels % g.groups || out % g.groups)
    return fail(loc, name, "groups ", g.groups,
                " must divide the input channels ", channels,
                " and the output channels ", out);
  if (weight.getDimSize(1) * g.groups != channels)
    return fail(loc, name, "weight has ", weight.getDimSize(1),
                " input channels per group, the input ", channels, " in ",
                g.groups, " group(s)");
  SmallVector<int64_t> shape{input.getDimSize(0), out};
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t size = input.getDimSize(2 + d), k = weight.getDimSize(2 + d);
    int64_t field = g.dilation[d] * (k - 1) + 1;
    int64_t padded = size + g.low[d] + g.high[d];
    if (k < 1 || padded < field)
      return fail(loc, name, "spatial dim ", d, ": the padded input (", padded,
                  ") is smaller than the dilated kernel (", field, ")");
    shape.push_back((padded - field) / g.stride[d] + 1);
  }
  return shape;
}

template <typename OpTy> Geometry geometryOf(OpTy op) {
  return {op.getStrideAttr(), op.getPadLowAttr(), op.getPadHighAttr(),
          op.getDilationAttr(), static_cast<int64_t>(op.getGroups())};
}

/// The check of an op defined through the convolution of `input` with
/// `weight` under the op's geometry (the transposed convolution and the
/// weight gradient): that convolution's result has `convolved`'s type.
template <typename OpTy>
LogicalResult checkConvolvedType(OpTy op, RankedTensorType input,
                                 RankedTensorType weight, Value convolved,
                                 StringRef convolvedName, StringRef hint) {
  FailureOr<SmallVector<int64_t>> shape = convResultShape(
      op.getLoc(), op.getOperationName(), input, weight, geometryOf(op));
  if (failed(shape))
    return failure();
  auto expected = RankedTensorType::get(*shape, input.getElementType());
  if (convolved.getType() != expected)
    return op.emitOpError()
           << convolvedName << " has type " << convolved.getType() << " but "
           << hint << " gives " << expected;
  return success();
}

/// The result shape of max-pooling `input` [N, C, spatial...] over the
/// window (kernel, stride, padding, dilation), or an error at `loc`.
FailureOr<SmallVector<int64_t>>
poolResultShape(std::optional<Location> loc, StringRef name,
                RankedTensorType input, DenseI64ArrayAttr kernel,
                DenseI64ArrayAttr stride, DenseI64ArrayAttr padding,
                DenseI64ArrayAttr dilation) {
  if (!input || (input.getRank() != 3 && input.getRank() != 4))
    return fail(loc, name, "input must be [N, C, L] or [N, C, H, W], got ",
                input ? Type(input) : Type());
  int64_t spatial = input.getRank() - 2;
  if (failed(checkPerDim(loc, name, "kernel", kernel, spatial, 1)) ||
      failed(checkPerDim(loc, name, "stride", stride, spatial, 1)) ||
      failed(checkPerDim(loc, name, "padding", padding, spatial, 0)) ||
      failed(checkPerDim(loc, name, "dilation", dilation, spatial, 1)))
    return failure();
  SmallVector<int64_t> shape{input.getDimSize(0), input.getDimSize(1)};
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t field = dilation[d] * (kernel[d] - 1) + 1;
    // PyTorch's rule: a window is never all padding.
    if (2 * padding[d] > field)
      return fail(loc, name, "spatial dim ", d, ": padding ", padding[d],
                  " exceeds half the dilated kernel (", field, ")");
    int64_t padded = input.getDimSize(2 + d) + 2 * padding[d];
    if (padded < field)
      return fail(loc, name, "spatial dim ", d, ": the padded input (", padded,
                  ") is smaller than the dilated kernel (", field, ")");
    shape.push_back((padded - field) / stride[d] + 1);
  }
  return shape;
}

} // namespace

LogicalResult ConvOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType input = tensorOf(adaptor.getInput());
  Geometry g{adaptor.getStrideAttr(), adaptor.getPadLowAttr(),
             adaptor.getPadHighAttr(), adaptor.getDilationAttr(),
             adaptor.getGroupsAttr() ? adaptor.getGroupsAttr().getInt() : 0};
  FailureOr<SmallVector<int64_t>> shape =
      convResultShape(loc, name, input, tensorOf(adaptor.getWeight()), g);
  if (failed(shape))
    return failure();
  if (adaptor.getBias() &&
      failed(checkVector(loc, name, "bias", adaptor.getBias(), (*shape)[1],
                         input.getElementType())))
    return failure();
  results.push_back(RankedTensorType::get(*shape, input.getElementType()));
  return success();
}

LogicalResult ConvTransposeOp::verify() {
  return checkConvolvedType(
      *this, getResult().getType(), getWeight().getType(), getInput(), "input",
      "convolving the result under this geometry (the spatial sizes must be "
      "(in - 1)·stride - pad_low - pad_high + dilation·(k - 1) + 1, plus at "
      "most stride - 1: PyTorch's output_padding)");
}

LogicalResult ConvGradWeightOp::verify() {
  return checkConvolvedType(*this, getInput().getType(), getResult().getType(),
                            getGrad(), "grad",
                            "convolving the input with the result");
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  FailureOr<SmallVector<int64_t>> shape =
      poolResultShape(loc, getOperationName(), input, adaptor.getKernelAttr(),
                      adaptor.getStrideAttr(), adaptor.getPaddingAttr(),
                      adaptor.getDilationAttr());
  if (failed(shape))
    return failure();
  results.push_back(RankedTensorType::get(*shape, input.getElementType()));
  return success();
}

LogicalResult MaxPoolGradOp::verify() {
  RankedTensorType input = getInput().getType();
  if (getResult().getType() != input)
    return emitOpError("result type ")
           << getResult().getType() << " differs from the input's " << input;
  FailureOr<SmallVector<int64_t>> shape =
      poolResultShape(getLoc(), getOperationName(), input, getKernelAttr(),
                      getStrideAttr(), getPaddingAttr(), getDilationAttr());
  if (failed(shape))
    return failure();
  auto expected = RankedTensorType::get(*shape, input.getElementType());
  if (getGrad().getType() != expected)
    return emitOpError("grad has type ")
           << getGrad().getType() << " but the pooling produces " << expected;
  return success();
}
