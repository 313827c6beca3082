//===- NNRoutingOps.cpp - mixture-of-experts routing ops: shape rules -----===//
//
// Result types of the router's top-k and sort, the histogram, and the
// grouped GEMM with its weight gradient (NNRoutingOps.td); their VJPs are in
// NNDifferentiation.cpp.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "ShapeRules.h"

using namespace mlir;
using namespace mlir::nn;
using namespace mlir::nn::rules;

/// values (input's element type) and i64 indices, both `shape`.
static void valuesAndIndices(RankedTensorType in, ArrayRef<int64_t> shape,
                             SmallVectorImpl<Type> &results) {
  results.push_back(RankedTensorType::get(shape, in.getElementType()));
  results.push_back(
      RankedTensorType::get(shape, IntegerType::get(in.getContext(), 64)));
}

LogicalResult TopkOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType in = tensorOf(adaptor.getInput());
  if (!in || in.getRank() < 1)
    return fail(loc, name, "input must have rank >= 1");
  int64_t k = adaptor.getK();
  if (k > in.getShape().back())
    return fail(loc, name, "k = ", k, " exceeds the last dimension ",
                in.getShape().back());
  SmallVector<int64_t> shape(in.getShape());
  shape.back() = k;
  valuesAndIndices(in, shape, results);
  return success();
}

LogicalResult SortOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &results) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  if (!in || in.getRank() < 1)
    return fail(loc, getOperationName(), "input must have rank >= 1");
  valuesAndIndices(in, in.getShape(), results);
  return success();
}

LogicalResult HistcOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  RankedTensorType in = tensorOf(adaptor.getInput());
  if (!in)
    return fail(loc, getOperationName(), "expects a ranked tensor");
  results.push_back(RankedTensorType::get(
      {static_cast<int64_t>(adaptor.getBins())}, in.getElementType()));
  return success();
}

LogicalResult HistcOp::verify() {
  // torch.histc with min == max takes the data's range: not static.
  if (!(getMin().convertToDouble() < getMax().convertToDouble()))
    return emitOpError("needs min < max, got [")
           << getMin().convertToDouble() << ", " << getMax().convertToDouble()
           << "]";
  return success();
}

LogicalResult InvertPermutationOp::verify() {
  if (getInput().getType().getRank() != 1)
    return emitOpError("input must be 1-D, got ") << getInput().getType();
  return success();
}

/// Checks grouped-matmul operands: `rows2d` [R, C] and `offsets` [G].
static LogicalResult checkGrouped(std::optional<Location> loc, StringRef name,
                                  RankedTensorType input,
                                  RankedTensorType offsets) {
  if (!input || input.getRank() != 2)
    return fail(loc, name, "input must be 2-D [rows, features]");
  if (!offsets || offsets.getRank() != 1)
    return fail(loc, name, "offsets must be 1-D [groups]");
  return success();
}

LogicalResult
GroupedMatmulOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                  Adaptor adaptor,
                                  SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType x = tensorOf(adaptor.getInput()),
                   w = tensorOf(adaptor.getWeight()),
                   offs = tensorOf(adaptor.getOffsets());
  if (failed(checkGrouped(loc, name, x, offs)))
    return failure();
  if (!w || w.getRank() != 3)
    return fail(loc, name, "weight must be 3-D [groups, K, N]");
  if (w.getDimSize(0) != offs.getDimSize(0))
    return fail(loc, name, "weight has ", w.getDimSize(0),
                " groups but offsets ", offs.getDimSize(0));
  if (w.getDimSize(1) != x.getDimSize(1))
    return fail(loc, name, "input rows have ", x.getDimSize(1),
                " features but the weights take ", w.getDimSize(1));
  if (w.getElementType() != x.getElementType())
    return fail(loc, name, "input and weight element types differ");
  results.push_back(RankedTensorType::get({x.getDimSize(0), w.getDimSize(2)},
                                          x.getElementType()));
  return success();
}

LogicalResult GroupedMatmulGradWeightOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType g = tensorOf(adaptor.getGrad()),
                   x = tensorOf(adaptor.getInput()),
                   offs = tensorOf(adaptor.getOffsets());
  if (failed(checkGrouped(loc, name, x, offs)))
    return failure();
  if (!g || g.getRank() != 2 || g.getDimSize(0) != x.getDimSize(0))
    return fail(loc, name, "grad must be 2-D with the input's ",
                x.getDimSize(0), " rows");
  if (g.getElementType() != x.getElementType())
    return fail(loc, name, "grad and input element types differ");
  results.push_back(RankedTensorType::get(
      {offs.getDimSize(0), x.getDimSize(1), g.getDimSize(1)},
      x.getElementType()));
  return success();
}
