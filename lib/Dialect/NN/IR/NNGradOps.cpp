//===- NNGradOps.cpp - shape rules of the gradient kernels -----------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "ShapeRules.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::nn;

using namespace mlir::nn::rules;

namespace {
/// The gradient of an op's output must have that output's shape; the
/// forward's own inference gives that shape, so the rule is checked once.
LogicalResult checkGrad(std::optional<Location> loc, StringRef name,
                        Value grad, Type expected) {
  if (grad.getType() != expected)
    return fail(loc, name, "grad has type ", grad.getType(),
                " but the forward op produces ", expected);
  return success();
}

/// A [D] tensor of the element type of `like`.
RankedTensorType vectorLike(RankedTensorType like, int64_t size) {
  return RankedTensorType::get({size}, like.getElementType());
}
} // namespace

LogicalResult BroadcastOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type: ")
           << in.getElementType() << " to " << out.getElementType();
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(in.getShape(), out.getShape(),
                                          shape) ||
      ArrayRef<int64_t>(shape) != out.getShape())
    return emitOpError("cannot broadcast ") << in << " to " << out;
  return success();
}

/// The gradients of a normalization over the last dimension [D]: the
/// input's, then `vectors` per-feature [D] ones (weight, bias).
LogicalResult SliceGradOp::verify() {
  RankedTensorType grad = getGrad().getType(), out = getResult().getType();
  int64_t dim = getDim();
  if (dim < 0 || dim >= out.getRank())
    return emitOpError("dim ") << dim << " is out of range for rank "
                               << out.getRank();
  // grad holds `count` slices start, start + step, ... of dimension `dim`
  // (a slice with an end takes fewer than the dimension holds) and
  // otherwise the result's shape.
  int64_t size = out.getDimSize(dim), start = getStart();
  int64_t most = start < size ? llvm::divideCeil(size - start, getStep()) : 0;
  SmallVector<int64_t> others(out.getShape());
  others[dim] = grad.getRank() == out.getRank() ? grad.getDimSize(dim) : 0;
  if (grad.getElementType() != out.getElementType() ||
      grad.getShape() != ArrayRef<int64_t>(others) || others[dim] > most)
    return emitOpError("grad has type ")
           << grad << " but slicing " << out << " from " << start
           << " by step " << getStep() << " gives at most " << most
           << " slices of dim " << dim << " and the result's other dims";
  return success();
}

static LogicalResult inferNormGrad(std::optional<Location> loc, StringRef name,
                                   Value grad, Value input, Value weight,
                                   unsigned vectors,
                                   SmallVectorImpl<Type> &results) {
  SmallVector<Type> forward;
  if (failed(inferLastDimNorm(loc, name, input, {{"weight", weight}},
                              forward)) ||
      failed(checkGrad(loc, name, grad, forward.front())))
    return failure();
  auto x = cast<RankedTensorType>(forward.front());
  results.push_back(x);
  results.append(vectors, vectorLike(x, x.getShape().back()));
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  return inferNormGrad(loc, getOperationName(), adaptor.getGrad(),
                       adaptor.getInput(), adaptor.getWeight(),
                       /*vectors=*/2, results);
}

LogicalResult
AddLayerNormGradOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                     Adaptor adaptor,
                                     SmallVectorImpl<Type> &results) {
  if (failed(inferNormGrad(loc, getOperationName(), adaptor.getGrad(),
                           adaptor.getInput(), adaptor.getWeight(),
                           /*vectors=*/2, results)))
    return failure();
  // The fused sum does not broadcast: the rewrite fuses same-typed adds.
  if (adaptor.getAddend().getType() != results.front())
    return fail(loc, getOperationName(), "addend has type ",
                adaptor.getAddend().getType(), " but the input gradient has ",
                results.front());
  return success();
}

LogicalResult RMSNormGradOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &results) {
  return inferNormGrad(loc, getOperationName(), adaptor.getGrad(),
                       adaptor.getInput(), adaptor.getWeight(),
                       /*vectors=*/1, results);
}

LogicalResult BatchNormGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  SmallVector<Type> forward;
  // The bias does not influence the gradients; the weight stands in for it
  // in the forward's shape check.
  SmallVector<Value> operands = {adaptor.getInput(), adaptor.getWeight(),
                                 adaptor.getWeight(), adaptor.getRunningMean(),
                                 adaptor.getRunningVar()};
  if (failed(BatchNormOp::inferReturnTypes(
          context, loc, BatchNormOp::Adaptor(operands, nullptr, {}),
          forward)) ||
      failed(checkGrad(loc, getOperationName(), adaptor.getGrad(),
                       forward.front())))
    return failure();
  results.push_back(forward.front());
  results.push_back(adaptor.getWeight().getType());
  results.push_back(adaptor.getWeight().getType());
  return success();
}

LogicalResult EmbeddingGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType grad = tensorOf(adaptor.getGrad());
  RankedTensorType ids = tensorOf(adaptor.getIndices());
  if (!grad || !ids)
    return fail(loc, name, "expects ranked tensor operands");
  if (grad.getRank() != ids.getRank() + 1 ||
      grad.getShape().drop_back() != ids.getShape())
    return fail(loc, name, "grad ", grad, " must be the indices' shape ",
                ids, " plus the embedding dim");
  results.push_back(RankedTensorType::get(
      {static_cast<int64_t>(adaptor.getNumEmbeddings()),
       grad.getShape().back()},
      grad.getElementType()));
  return success();
}

LogicalResult LinearGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType x = tensorOf(adaptor.getInput());
  if (!x || x.getRank() != 2)
    return fail(loc, name, "input must be 2-D [rows, in_features]");
  SmallVector<Value> operands = {adaptor.getInput(), adaptor.getWeight()};
  SmallVector<Type> forward;
  if (failed(LinearOp::inferReturnTypes(
          context, loc, LinearOp::Adaptor(operands, nullptr, {}), forward)) ||
      failed(checkGrad(loc, name, adaptor.getGrad(), forward.front())))
    return failure();
  RankedTensorType w = tensorOf(adaptor.getWeight());
  results.push_back(x);
  results.push_back(w);
  results.push_back(
      RankedTensorType::get({w.getDimSize(0)}, w.getElementType()));
  return success();
}

LogicalResult LinearGeluOp::inferReturnTypes(MLIRContext *context,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  if (failed(LinearOp::inferReturnTypes(
          context, loc, LinearOp::Adaptor(adaptor.getOperands(), nullptr, {}),
          results)))
    return failure();
  results.push_back(results.front()); // the GELU keeps the linear's type
  return success();
}

LogicalResult
LinearGeluGradOp::inferReturnTypes(MLIRContext *context,
                                   std::optional<Location> loc, Adaptor adaptor,
                                   SmallVectorImpl<Type> &results) {
  SmallVector<Value> operands = {adaptor.getGrad(), adaptor.getInput(),
                                 adaptor.getWeight()};
  if (failed(LinearGradOp::inferReturnTypes(
          context, loc, LinearGradOp::Adaptor(operands, nullptr, {}), results)))
    return failure();
  if (adaptor.getPre().getType() != results.front())
    return fail(loc, getOperationName(), "pre has type ",
                adaptor.getPre().getType(), " but the input gradient is ",
                results.front());
  return success();
}

LogicalResult PackedAttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> forward =
      packedAttentionResult(loc, getOperationName(), adaptor.getQkv(),
                            adaptor.getNumHeads(), adaptor.getNumKvHeads());
  if (failed(forward) ||
      failed(checkGrad(loc, getOperationName(), adaptor.getGrad(), *forward)))
    return failure();
  if (failed(checkSavedStats(loc, getOperationName(), adaptor.getSaved(),
                             *forward, adaptor.getNumHeads())))
    return failure();
  results.push_back(adaptor.getQkv().getType());
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  AttentionOp::Properties properties;
  properties.num_heads = adaptor.getNumHeadsAttr();
  properties.num_kv_heads = adaptor.getNumKvHeadsAttr();
  SmallVector<Value> operands = {adaptor.getQuery(), adaptor.getKey(),
                                 adaptor.getValue()};
  if (Value bias = adaptor.getBias())
    operands.push_back(bias); // its gradient is the last result
  SmallVector<Type> forward;
  if (failed(AttentionOp::inferReturnTypes(
          context, loc, AttentionOp::Adaptor(operands, nullptr, properties),
          forward)) ||
      failed(checkGrad(loc, getOperationName(), adaptor.getGrad(),
                       forward.front())) ||
      failed(checkSavedStats(loc, getOperationName(), adaptor.getSaved(),
                             cast<RankedTensorType>(forward.front()),
                             adaptor.getNumHeads())))
    return failure();
  for (Value operand : operands)
    results.push_back(operand.getType());
  return success();
}

/// nn.cross_entropy's loss type for (logits, targets), with `grad` (its
/// cotangent) checked against it.
static FailureOr<Type> crossEntropyLoss(MLIRContext *context,
                                        std::optional<Location> loc,
                                        StringRef name, Value logits,
                                        Value targets, Value grad) {
  SmallVector<Value> operands = {logits, targets};
  SmallVector<Type> forward;
  if (failed(CrossEntropyOp::inferReturnTypes(
          context, loc, CrossEntropyOp::Adaptor(operands, nullptr, {}),
          forward)) ||
      failed(checkGrad(loc, name, grad, forward.front())))
    return failure();
  return forward.front();
}

LogicalResult CrossEntropyWithGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  FailureOr<Type> loss =
      crossEntropyLoss(context, loc, getOperationName(), adaptor.getLogits(),
                       adaptor.getTargets(), adaptor.getGrad());
  if (failed(loss) ||
      failed(checkNumClasses(loc, getOperationName(), adaptor.getLogits(),
                             adaptor.getNumClasses())))
    return failure();
  results.push_back(*loss);
  results.push_back(adaptor.getLogits().getType());
  return success();
}

LogicalResult CrossEntropyGradOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  if (failed(crossEntropyLoss(context, loc, getOperationName(),
                              adaptor.getLogits(), adaptor.getTargets(),
                              adaptor.getGrad())) ||
      failed(checkNumClasses(loc, getOperationName(), adaptor.getLogits(),
                             adaptor.getNumClasses())))
    return failure();
  results.push_back(adaptor.getLogits().getType());
  return success();
}
