//===- NNCustomVJP.cpp - a hand-written backward as the VJP ---------------===//
//
// nn.custom_vjp (NNCustomVJPOps.td): its result types and the checks of
// its backward region; its VJP, that region inlined, is in
// NNDifferentiation.cpp with the others.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

using namespace mlir;
using namespace mlir::nn;

LogicalResult CustomVJPOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location>,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  for (Value output : adaptor.getOutputs())
    results.push_back(output.getType());
  return success();
}

namespace {

/// Whether `declared` (the region's) can stand for `actual` (the op's): the
/// same shape, and the same element type unless both are floats (mixed
/// precision recasts the forward, not the region; the VJP casts).
bool standsFor(Type declared, Type actual) {
  auto d = cast<RankedTensorType>(declared);
  auto a = cast<RankedTensorType>(actual);
  if (d.getShape() != a.getShape())
    return false;
  return d.getElementType() == a.getElementType() ||
         (isa<FloatType>(d.getElementType()) &&
          isa<FloatType>(a.getElementType()));
}

} // namespace

LogicalResult CustomVJPOp::verifyRegions() {
  Block &body = getBackward().front();
  SmallVector<Type> expected(getSaved().getTypes());
  llvm::append_range(expected, getOutputs().getTypes());
  if (body.getNumArguments() != expected.size())
    return emitOpError("backward takes ")
           << body.getNumArguments() << " arguments; expected "
           << expected.size() << " (the saved tensors, then one cotangent "
           << "per output)";
  for (auto [i, arg, type] : llvm::enumerate(body.getArgumentTypes(), expected))
    if (!standsFor(arg, type))
      return emitOpError("backward argument #")
             << i << " is " << arg << " for " << type;
  auto yield = cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != getInputs().size())
    return yield.emitOpError("yields ")
           << yield.getValues().size() << " cotangents for "
           << getInputs().size() << " inputs";
  for (auto [i, cotangent, input] :
       llvm::enumerate(yield.getValues().getTypes(), getInputs().getTypes()))
    if (!standsFor(cotangent, input) ||
        !isa<FloatType>(getElementTypeOrSelf(cotangent)))
      return yield.emitOpError("cotangent #")
             << i << " is " << cotangent << " for the input " << input;
  WalkResult nested = body.walk([&](Operation *op) {
    if (isa<RandomSiteOpInterface, CustomVJPOp>(op) ||
        !isa<NNDialect, arith::ArithDialect>(op->getDialect())) {
      op->emitOpError("cannot be in nn.custom_vjp's backward: it holds nn "
                      "and arith ops that draw no random numbers");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(nested.wasInterrupted());
}
