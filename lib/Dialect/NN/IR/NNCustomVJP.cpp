//===- NNCustomVJP.cpp - a hand-written backward as the VJP ---------------===//
//
// nn.custom_vjp (NNCustomVJPOps.td): its result types, the checks of its
// backward region, and its VJP, which is that region inlined.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

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

/// `value` in the element type of `type` (an nn.cast when they differ).
Value castTo(OpBuilder &b, Location loc, Value value, Type type) {
  if (value.getType() == type)
    return value;
  return CastOp::create(b, loc, type, value);
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

// Only the inputs get a cotangent: the ops computing `outputs` are not
// differentiated, and the saved tensors are what the backward reads.
bool CustomVJPOp::isDifferentiableOperand(unsigned index) {
  auto [start, size] = getODSOperandIndexAndLength(1);
  return index >= start && index < start + size;
}

FailureOr<SmallVector<Value>> CustomVJPOp::buildVJP(OpBuilder &b,
                                                    ValueRange cotangents) {
  SmallVector<Value> operandCotangents(getNumOperands());
  if (llvm::all_of(cotangents, [](Value c) { return !c; }))
    return operandCotangents;
  Location loc = getLoc();
  Block &body = getBackward().front();
  IRMapping mapping;
  unsigned numSaved = getSaved().size();
  for (auto [arg, saved] :
       llvm::zip(body.getArguments().take_front(numSaved), getSaved()))
    mapping.map(arg, castTo(b, loc, saved, arg.getType()));
  for (auto [arg, result, cotangent] :
       llvm::zip(body.getArguments().drop_front(numSaved), getResults(),
                 cotangents)) {
    // torch hands the backward zeros for an output that reaches no loss.
    Value given = cotangent;
    if (!given) {
      auto type = cast<RankedTensorType>(result.getType());
      given = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(type, b.getZeroAttr(type.getElementType())));
    }
    mapping.map(arg, castTo(b, loc, given, arg.getType()));
  }
  for (Operation &op : body.without_terminator())
    b.clone(op, mapping);
  auto yield = cast<YieldOp>(body.getTerminator());
  unsigned first = getODSOperandIndexAndLength(1).first;
  for (auto [i, input] : llvm::enumerate(getInputs()))
    operandCotangents[first + i] =
        castTo(b, loc, mapping.lookup(yield.getValues()[i]), input.getType());
  return operandCotangents;
}
