//===- NNDifferentiation.cpp - the VJP of every forward nn op --------------===//
//
// Each buildVJP builds, at the builder's insertion point, the cotangents of
// the op's operands from the cotangents of its results (null for a result
// that does not reach the loss). Compositions of forward ops where they are
// as cheap as a fused kernel; the *_grad kernels elsewhere, as PyTorch does.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::nn;

namespace {

RankedTensorType typeOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// `value` with the shape of `type` (same elements): a reshape when needed.
Value reshapeTo(OpBuilder &b, Location loc, Value value, ArrayRef<int64_t> shape) {
  RankedTensorType type = typeOf(value);
  if (type.getShape() == shape)
    return value;
  return ReshapeOp::create(
      b, loc, RankedTensorType::get(shape, type.getElementType()), value);
}

/// A zero tensor of `type`.
Value zerosOf(OpBuilder &b, Location loc, RankedTensorType type) {
  auto zero = b.getFloatAttr(type.getElementType(), 0.0);
  return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, zero));
}

/// Sums `grad` over the dimensions that broadcasting added or expanded, so
/// that it gets the shape of the operand that was broadcast (`target`).
Value sumToShape(OpBuilder &b, Location loc, Value grad,
                 RankedTensorType target) {
  RankedTensorType type = typeOf(grad);
  if (type.getShape() == target.getShape())
    return grad;
  int64_t lead = type.getRank() - target.getRank();
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < lead || (target.getDimSize(d - lead) == 1 && type.getDimSize(d) != 1))
      dims.push_back(d);
  Value sum = ReduceSumOp::create(b, loc, grad, b.getDenseI64ArrayAttr(dims),
                                  /*keepdim=*/false);
  return reshapeTo(b, loc, sum, target.getShape());
}

Value scale(OpBuilder &b, Location loc, Value value, double factor) {
  return ScaleOp::create(b, loc, value, b.getF64FloatAttr(factor));
}

/// Product of the sizes of `dims` of `type`.
int64_t countOf(RankedTensorType type, ArrayRef<int64_t> dims) {
  int64_t count = 1;
  for (int64_t d : dims)
    count *= type.getDimSize(d < 0 ? d + type.getRank() : d);
  return count;
}

} // namespace

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> LinearOp::buildVJP(OpBuilder &b,
                                                 ValueRange cotangents) {
  Location loc = getLoc();
  RankedTensorType x = getInput().getType(), w = getWeight().getType();
  int64_t in = w.getDimSize(1), out = w.getDimSize(0);
  int64_t rows = x.getNumElements() / std::max<int64_t>(in, 1);
  // Flatten the leading dims: y[M, out] = x[M, in] · Wᵀ.
  Value g = reshapeTo(b, loc, cotangents[0], {rows, out});
  Value x2 = reshapeTo(b, loc, getInput(), {rows, in});
  if (getBias()) { // one call: the bias gradient rides on the dW GEMM
    auto grads = LinearGradOp::create(b, loc, g, x2, getWeight());
    return SmallVector<Value>{
        reshapeTo(b, loc, grads.getInputGrad(), x.getShape()),
        grads.getWeightGrad(), grads.getBiasGrad()};
  }
  Value gradInput = reshapeTo(
      b, loc, MatmulOp::create(b, loc, g, getWeight(), false, false),
      x.getShape());
  Value gradWeight = MatmulOp::create(b, loc, g, x2, /*transpose_lhs=*/true,
                                      /*transpose_rhs=*/false);
  return SmallVector<Value>{gradInput, gradWeight, Value()};
}

FailureOr<SmallVector<Value>> ConvOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  // dx: the transposed convolution of g; dW: x correlated with g; db: g
  // summed over N and the spatial dims (as cuDNN's backward bias).
  Location loc = getLoc();
  Value g = cotangents[0];
  auto gradInput = ConvTransposeOp::create(
      b, loc, getInput().getType(), g, getWeight(), getStrideAttr(),
      getPadLowAttr(), getPadHighAttr(), getDilationAttr(), getGroupsAttr());
  auto gradWeight = ConvGradWeightOp::create(
      b, loc, getWeight().getType(), g, getInput(), getStrideAttr(),
      getPadLowAttr(), getPadHighAttr(), getDilationAttr(), getGroupsAttr());
  Value gradBias;
  if (getBias()) {
    SmallVector<int64_t> dims{0};
    for (int64_t d = 2; d < typeOf(g).getRank(); ++d)
      dims.push_back(d);
    gradBias = ReduceSumOp::create(b, loc, g, b.getDenseI64ArrayAttr(dims),
                                   /*keepdim=*/false);
  }
  return SmallVector<Value>{gradInput, gradWeight, gradBias};
}

FailureOr<SmallVector<Value>>
ConvTransposeOp::buildVJP(OpBuilder &b, ValueRange cotangents) {
  // The op is x ↦ Cᵀx for the convolution C of the result, so dx = C g;
  // its weight enters as in the convolution of g whose output gradient is
  // x: dW = conv_grad_weight(x, g).
  Location loc = getLoc();
  Value g = cotangents[0];
  auto gradInput = ConvOp::create(
      b, loc, getInput().getType(), g, getWeight(), /*bias=*/Value(),
      getStrideAttr(), getPadLowAttr(), getPadHighAttr(), getDilationAttr(),
      getGroupsAttr());
  auto gradWeight = ConvGradWeightOp::create(
      b, loc, getWeight().getType(), getInput(), g, getStrideAttr(),
      getPadLowAttr(), getPadHighAttr(), getDilationAttr(), getGroupsAttr());
  return SmallVector<Value>{gradInput, gradWeight};
}

FailureOr<SmallVector<Value>> MaxPoolOp::buildVJP(OpBuilder &b,
                                                  ValueRange cotangents) {
  // Each cotangent to its window's first maximum, recomputed from x.
  return SmallVector<Value>{MaxPoolGradOp::create(
      b, getLoc(), getInput().getType(), cotangents[0], getInput(),
      getKernelAttr(), getStrideAttr(), getPaddingAttr(), getDilationAttr())};
}

FailureOr<SmallVector<Value>> MatmulOp::buildVJP(OpBuilder &b,
                                                 ValueRange cotangents) {
  Location loc = getLoc();
  Value g = cotangents[0], lhs = getLhs(), rhs = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  // With A' = op(A), B' = op(B): dA' = g·B'ᵀ and dB' = A'ᵀ·g; a transposed
  // operand takes the transpose of its gradient.
  Value gradLhs = ta ? MatmulOp::create(b, loc, rhs, g, tb, true)
                     : MatmulOp::create(b, loc, g, rhs, false, !tb);
  Value gradRhs = tb ? MatmulOp::create(b, loc, g, lhs, true, ta)
                     : MatmulOp::create(b, loc, lhs, g, !ta, false);
  return SmallVector<Value>{sumToShape(b, loc, gradLhs, typeOf(lhs)),
                            sumToShape(b, loc, gradRhs, typeOf(rhs))};
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Integer arithmetic (ids, counts) carries no gradient.
static bool isInteger(Value v) {
  return isa<IntegerType>(getElementTypeOrSelf(v.getType()));
}

FailureOr<SmallVector<Value>> AddOp::buildVJP(OpBuilder &b,
                                              ValueRange cotangents) {
  if (isInteger(getResult()))
    return SmallVector<Value>{Value(), Value()};
  Value g = cotangents[0];
  return SmallVector<Value>{sumToShape(b, getLoc(), g, getLhs().getType()),
                            sumToShape(b, getLoc(), g, getRhs().getType())};
}

FailureOr<SmallVector<Value>> SubOp::buildVJP(OpBuilder &b,
                                              ValueRange cotangents) {
  if (isInteger(getResult()))
    return SmallVector<Value>{Value(), Value()};
  Value g = cotangents[0];
  Value negated = scale(b, getLoc(), g, -1.0);
  return SmallVector<Value>{sumToShape(b, getLoc(), g, getLhs().getType()),
                            sumToShape(b, getLoc(), negated, getRhs().getType())};
}

FailureOr<SmallVector<Value>> MulOp::buildVJP(OpBuilder &b,
                                              ValueRange cotangents) {
  if (isInteger(getResult()))
    return SmallVector<Value>{Value(), Value()};
  Location loc = getLoc();
  Value g = cotangents[0];
  Value gradLhs = MulOp::create(b, loc, g, getRhs());
  Value gradRhs = MulOp::create(b, loc, g, getLhs());
  return SmallVector<Value>{sumToShape(b, loc, gradLhs, getLhs().getType()),
                            sumToShape(b, loc, gradRhs, getRhs().getType())};
}

FailureOr<SmallVector<Value>> DivOp::buildVJP(OpBuilder &b,
                                              ValueRange cotangents) {
  // d/dlhs = g / rhs; d/drhs = -g * lhs / rhs^2 = -(g * result) / rhs.
  Location loc = getLoc();
  Value g = cotangents[0];
  Value gradLhs = DivOp::create(b, loc, g, getRhs());
  Value gradRhs = scale(
      b, loc, DivOp::create(b, loc, MulOp::create(b, loc, g, getResult()),
                            getRhs()),
      -1.0);
  return SmallVector<Value>{sumToShape(b, loc, gradLhs, getLhs().getType()),
                            sumToShape(b, loc, gradRhs, getRhs().getType())};
}

FailureOr<SmallVector<Value>> FmodOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  // torch's: d/dlhs = g; d/drhs = -g * trunc(lhs / rhs), the quotient
  // taken as (lhs - result) / rhs (an integer, exact where it is one).
  Location loc = getLoc();
  Value g = cotangents[0];
  Value quotient = DivOp::create(
      b, loc, SubOp::create(b, loc, getLhs(), getResult()), getRhs());
  Value gradRhs = scale(b, loc, MulOp::create(b, loc, g, quotient), -1.0);
  return SmallVector<Value>{sumToShape(b, loc, g, getLhs().getType()),
                            sumToShape(b, loc, gradRhs, getRhs().getType())};
}

/// g times the winner's weight for each operand (WeightOp: nn.max_weight
/// or nn.min_weight), summed to the operand's shape.
template <typename WeightOp>
static SmallVector<Value> winnerVJP(OpBuilder &b, Location loc, Value g,
                                    Value lhs, Value rhs) {
  Value gradLhs = MulOp::create(b, loc, g, WeightOp::create(b, loc, lhs, rhs));
  Value gradRhs = MulOp::create(b, loc, g, WeightOp::create(b, loc, rhs, lhs));
  return SmallVector<Value>{sumToShape(b, loc, gradLhs, typeOf(lhs)),
                            sumToShape(b, loc, gradRhs, typeOf(rhs))};
}

FailureOr<SmallVector<Value>> MaximumOp::buildVJP(OpBuilder &b,
                                                  ValueRange cotangents) {
  return winnerVJP<MaxWeightOp>(b, getLoc(), cotangents[0], getLhs(),
                                getRhs());
}

FailureOr<SmallVector<Value>> MinimumOp::buildVJP(OpBuilder &b,
                                                  ValueRange cotangents) {
  return winnerVJP<MinWeightOp>(b, getLoc(), cotangents[0], getLhs(),
                                getRhs());
}

FailureOr<SmallVector<Value>> KeepOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  // The kept values' gradient where the mask holds; none for the mask.
  Location loc = getLoc();
  Value grad = KeepOp::create(b, loc, cotangents[0], getRhs());
  return SmallVector<Value>{sumToShape(b, loc, grad, typeOf(getLhs())),
                            Value()};
}

// A comparison is piecewise constant: no gradient for either operand.
#define NN_NO_GRADIENT_VJP(OP)                                                 \
  FailureOr<SmallVector<Value>> OP::buildVJP(OpBuilder &, ValueRange) {       \
    return SmallVector<Value>{Value(), Value()};                               \
  }
NN_NO_GRADIENT_VJP(LtOp)
NN_NO_GRADIENT_VJP(LeOp)
NN_NO_GRADIENT_VJP(GtOp)
NN_NO_GRADIENT_VJP(GeOp)
NN_NO_GRADIENT_VJP(EqOp)
NN_NO_GRADIENT_VJP(NeOp)
#undef NN_NO_GRADIENT_VJP

// Integer ids: no gradient.
FailureOr<SmallVector<Value>> IdRangeOp::buildVJP(OpBuilder &, ValueRange) {
  return SmallVector<Value>{Value()};
}

// detach(): the operand gets no gradient.
FailureOr<SmallVector<Value>> StopGradientOp::buildVJP(OpBuilder &,
                                                       ValueRange) {
  return SmallVector<Value>{Value()};
}

// Only the inputs get a cotangent: the ops computing `outputs` are not
// differentiated, and the saved tensors are what the backward reads.
bool CustomVJPOp::isDifferentiableOperand(unsigned index) {
  auto [start, size] = getODSOperandIndexAndLength(1);
  return index >= start && index < start + size;
}

/// `value` in the element type of `type` (an nn.cast when they differ):
/// the region keeps the dtypes it declares under mixed precision.
static Value castTo(OpBuilder &b, Location loc, Value value, Type type) {
  if (value.getType() == type)
    return value;
  return CastOp::create(b, loc, type, value);
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
    Value given = cotangent ? cotangent : zerosOf(b, loc, typeOf(result));
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

/// The VJP of a pointwise math op: one nn.unary_grad of its function.
template <typename MathOp>
static SmallVector<Value> unaryVJP(MathOp op, OpBuilder &b,
                                   ValueRange cotangents) {
  return SmallVector<Value>{UnaryGradOp::create(
      b, op.getLoc(), cotangents[0], op.getInput(),
      UnaryFnAttr::get(b.getContext(), MathOp::getFn()),
      b.getF64FloatAttr(op.getParamA()), b.getF64FloatAttr(op.getParamB()))};
}

#define NN_UNARY_VJP(OP)                                                       \
  FailureOr<SmallVector<Value>> OP::buildVJP(OpBuilder &b,                     \
                                             ValueRange cotangents) {          \
    return unaryVJP(*this, b, cotangents);                                     \
  }
NN_UNARY_VJP(TanhOp)
NN_UNARY_VJP(SigmoidOp)
NN_UNARY_VJP(ExpOp)
NN_UNARY_VJP(LogOp)
NN_UNARY_VJP(SqrtOp)
NN_UNARY_VJP(RsqrtOp)
NN_UNARY_VJP(AbsOp)
NN_UNARY_VJP(PowOp)
NN_UNARY_VJP(ClampOp)
NN_UNARY_VJP(ErfOp)
NN_UNARY_VJP(SinOp)
NN_UNARY_VJP(CosOp)
NN_UNARY_VJP(AcosOp)
NN_UNARY_VJP(AsinOp)
NN_UNARY_VJP(AtanOp)
#undef NN_UNARY_VJP

FailureOr<SmallVector<Value>> BroadcastOp::buildVJP(OpBuilder &b,
                                                    ValueRange cotangents) {
  return SmallVector<Value>{
      sumToShape(b, getLoc(), cotangents[0], getInput().getType())};
}

FailureOr<SmallVector<Value>> ScaleOp::buildVJP(OpBuilder &b,
                                                ValueRange cotangents) {
  return SmallVector<Value>{
      scale(b, getLoc(), cotangents[0], getFactor().convertToDouble())};
}

FailureOr<SmallVector<Value>> ReluOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  return SmallVector<Value>{
      ReluGradOp::create(b, getLoc(), cotangents[0], getInput())};
}

FailureOr<SmallVector<Value>> GeluOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  return SmallVector<Value>{GeluGradOp::create(
      b, getLoc(), cotangents[0], getInput(), getApproximate())};
}

FailureOr<SmallVector<Value>> SiluOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  return SmallVector<Value>{
      SiluGradOp::create(b, getLoc(), cotangents[0], getInput())};
}

FailureOr<SmallVector<Value>> DropoutOp::buildVJP(OpBuilder &b,
                                                  ValueRange cotangents) {
  // The mask is a function of (seed, step, rng_id, index): dropping the
  // cotangent with the same rng_id applies the same mask and scale.
  return SmallVector<Value>{DropoutOp::create(b, getLoc(), cotangents[0],
                                              getPAttr(), getRngIdAttr())};
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> LayerNormOp::buildVJP(OpBuilder &b,
                                                    ValueRange cotangents) {
  auto grads = LayerNormGradOp::create(b, getLoc(), cotangents[0], getInput(),
                                       getWeight(), getEpsilonAttr());
  return SmallVector<Value>{grads.getInputGrad(),
                            getWeight() ? grads.getWeightGrad() : Value(),
                            getBias() ? grads.getBiasGrad() : Value()};
}

FailureOr<SmallVector<Value>> RMSNormOp::buildVJP(OpBuilder &b,
                                                  ValueRange cotangents) {
  auto grads = RMSNormGradOp::create(b, getLoc(), cotangents[0], getInput(),
                                     getWeight(), getEpsilonAttr());
  return SmallVector<Value>{grads.getInputGrad(),
                            getWeight() ? grads.getWeightGrad() : Value()};
}

FailureOr<SmallVector<Value>> BatchNormOp::buildVJP(OpBuilder &b,
                                                    ValueRange cotangents) {
  // The new running statistics carry no gradient (as in PyTorch).
  SmallVector<Value> grads(getNumOperands());
  if (!cotangents[0])
    return grads;
  auto op = BatchNormGradOp::create(b, getLoc(), cotangents[0], getInput(),
                                    getWeight(), getRunningMean(),
                                    getRunningVar(), getEpsilonAttr(),
                                    getTrainingAttr());
  grads[0] = op.getInputGrad();
  grads[1] = op.getWeightGrad();
  grads[2] = op.getBiasGrad();
  return grads;
}

FailureOr<SmallVector<Value>> SoftmaxOp::buildVJP(OpBuilder &b,
                                                  ValueRange cotangents) {
  // dx = y · (g − Σ_dim g·y)
  Location loc = getLoc();
  Value g = cotangents[0], y = getResult();
  Value gy = MulOp::create(b, loc, g, y);
  Value sum = ReduceSumOp::create(b, loc, gy,
                                  b.getDenseI64ArrayAttr({static_cast<int64_t>(getDim())}),
                                  /*keepdim=*/true);
  Value centered = SubOp::create(b, loc, g, sum);
  return SmallVector<Value>{MulOp::create(b, loc, y, centered)};
}

//===----------------------------------------------------------------------===//
// Transformer building blocks
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> EmbeddingOp::buildVJP(OpBuilder &b,
                                                    ValueRange cotangents) {
  RankedTensorType table = getTable().getType();
  int64_t rows = table.getDimSize(0);
  Value gradTable = EmbeddingGradOp::create(b, getLoc(), cotangents[0],
                                            getIndices(), rows);
  if (std::optional<uint64_t> pad = getPaddingIdx()) {
    // nn.Embedding(padding_idx=p): row p gets no gradient (a [V, 1] 0/1 mask).
    Type element = table.getElementType();
    auto maskType = RankedTensorType::get({rows, 1}, element);
    SmallVector<Attribute> keep(rows, b.getFloatAttr(element, 1.0));
    keep[*pad] = b.getFloatAttr(element, 0.0);
    Value mask = arith::ConstantOp::create(
        b, getLoc(), DenseElementsAttr::get(maskType, keep));
    gradTable = MulOp::create(b, getLoc(), gradTable, mask);
  }
  return SmallVector<Value>{Value(), gradTable};
}

/// What an attention's backward reads of a forward that keeps its softmax
/// statistics: its result and the statistics (none otherwise). They are the
/// backward's input, not a value the loss may be differentiated through.
template <typename Op>
static FailureOr<SmallVector<Value, 2>> savedForBackward(Op op,
                                                         ValueRange cotangents) {
  if (cotangents.size() > 1 && cotangents[1])
    return op.emitOpError("the loss depends on its softmax statistics, which "
                          "have no gradient");
  if (!op.getKeepStats())
    return SmallVector<Value, 2>();
  return SmallVector<Value, 2>{op.getResult(), op.getStats()};
}

FailureOr<SmallVector<Value>> AttentionOp::buildVJP(OpBuilder &b,
                                                    ValueRange cotangents) {
  FailureOr<SmallVector<Value, 2>> saved = savedForBackward(*this, cotangents);
  if (failed(saved))
    return failure();
  auto grads = AttentionGradOp::create(
      b, getLoc(), cotangents[0], getQuery(), getKey(), getValue(), getBias(),
      *saved, getNumHeadsAttr(), getNumKvHeadsAttr(), getCausalAttr(),
      getScaleAttr());
  return SmallVector<Value>(grads.getResults());
}

FailureOr<SmallVector<Value>>
PackedAttentionOp::buildVJP(OpBuilder &b, ValueRange cotangents) {
  FailureOr<SmallVector<Value, 2>> saved = savedForBackward(*this, cotangents);
  if (failed(saved))
    return failure();
  return SmallVector<Value>{PackedAttentionGradOp::create(
      b, getLoc(), cotangents[0], getQkv(), *saved, getNumHeadsAttr(),
      getNumKvHeadsAttr(), getCausalAttr(), getScaleAttr())};
}

FailureOr<SmallVector<Value>> RoPEOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  // A rotation's transpose is the rotation by the opposite angle.
  return SmallVector<Value>{RoPEOp::create(b, getLoc(), cotangents[0],
                                           getNumHeadsAttr(), getThetaAttr(),
                                           getInverse() ? UnitAttr() : b.getUnitAttr())};
}

//===----------------------------------------------------------------------===//
// Shape and type manipulation
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> CastOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  RankedTensorType in = getInput().getType();
  if (isInteger(getInput()) || isInteger(getResult()))
    return SmallVector<Value>{Value()};
  return SmallVector<Value>{CastOp::create(b, getLoc(), in, cotangents[0])};
}

FailureOr<SmallVector<Value>> ReshapeOp::buildVJP(OpBuilder &b,
                                                  ValueRange cotangents) {
  RankedTensorType in = getInput().getType();
  if (!isa<FloatType>(in.getElementType()))
    return SmallVector<Value>{Value()};
  return SmallVector<Value>{
      reshapeTo(b, getLoc(), cotangents[0], in.getShape())};
}

FailureOr<SmallVector<Value>> TransposeOp::buildVJP(OpBuilder &b,
                                                    ValueRange cotangents) {
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  return SmallVector<Value>{TransposeOp::create(
      b, getLoc(), cotangents[0], b.getDenseI64ArrayAttr(inverse))};
}

FailureOr<SmallVector<Value>> SplitOp::buildVJP(OpBuilder &b,
                                                ValueRange cotangents) {
  SmallVector<Value> pieces;
  for (auto [result, cotangent] : llvm::zip(getResults(), cotangents))
    pieces.push_back(cotangent ? cotangent
                               : zerosOf(b, getLoc(), typeOf(result)));
  return SmallVector<Value>{
      ConcatOp::create(b, getLoc(), pieces, getDimAttr())};
}

FailureOr<SmallVector<Value>> ConcatOp::buildVJP(OpBuilder &b,
                                                 ValueRange cotangents) {
  RankedTensorType first = typeOf(getInputs().front());
  int64_t dim = static_cast<int64_t>(getDim());
  if (dim < 0)
    dim += first.getRank();
  SmallVector<int64_t> sizes;
  for (Value input : getInputs())
    sizes.push_back(typeOf(input).getDimSize(dim));
  auto split = SplitOp::create(b, getLoc(), cotangents[0], getDimAttr(),
                               b.getDenseI64ArrayAttr(sizes));
  return SmallVector<Value>(split.getResults());
}

FailureOr<SmallVector<Value>> SliceOp::buildVJP(OpBuilder &b,
                                                ValueRange cotangents) {
  if (getStep() != 1)
    return SmallVector<Value>{SliceGradOp::create(
        b, getLoc(), getInput().getType(), cotangents[0], getDimAttr(),
        getStartAttr(), getStepAttr())};
  int64_t size = getInput().getType().getDimSize(getDim());
  return SmallVector<Value>{PadOp::create(
      b, getLoc(), getInput().getType(), cotangents[0], getDimAttr(),
      getStartAttr(), b.getI64IntegerAttr(size - getEnd()),
      b.getF64FloatAttr(0.0))};
}

FailureOr<SmallVector<Value>> PadOp::buildVJP(OpBuilder &b,
                                              ValueRange cotangents) {
  int64_t size = getInput().getType().getDimSize(getDim());
  return SmallVector<Value>{SliceOp::create(
      b, getLoc(), getInput().getType(), cotangents[0], getDimAttr(),
      getLowAttr(), b.getI64IntegerAttr(getLow() + size))};
}

FailureOr<SmallVector<Value>> CumsumOp::buildVJP(OpBuilder &b,
                                                 ValueRange cotangents) {
  if (!isa<FloatType>(getInput().getType().getElementType()))
    return SmallVector<Value>{Value()};
  // Each input element reaches every output at or after it along dim.
  return SmallVector<Value>{CumsumOp::create(
      b, getLoc(), cotangents[0], getDimAttr(),
      getReverse() ? UnitAttr() : b.getUnitAttr())};
}

/// The cotangent of a reduction, repeated over the reduced dimensions.
static Value broadcastReduced(OpBuilder &b, Location loc, Value grad,
                              RankedTensorType input, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> kept(input.getShape());
  for (int64_t d : dims)
    kept[d < 0 ? d + input.getRank() : d] = 1;
  Value keptGrad = reshapeTo(b, loc, grad, kept);
  return BroadcastOp::create(b, loc, input, keptGrad);
}

FailureOr<SmallVector<Value>> ReduceSumOp::buildVJP(OpBuilder &b,
                                                    ValueRange cotangents) {
  return SmallVector<Value>{broadcastReduced(
      b, getLoc(), cotangents[0], getInput().getType(), getDims())};
}

FailureOr<SmallVector<Value>> ReduceMeanOp::buildVJP(OpBuilder &b,
                                                     ValueRange cotangents) {
  RankedTensorType in = getInput().getType();
  Value spread = broadcastReduced(b, getLoc(), cotangents[0], in, getDims());
  return SmallVector<Value>{
      scale(b, getLoc(), spread, 1.0 / countOf(in, getDims()))};
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> CrossEntropyOp::buildVJP(OpBuilder &b,
                                                       ValueRange cotangents) {
  Value gradLogits = CrossEntropyGradOp::create(
      b, getLoc(), cotangents[0], getLogits(), getTargets(),
      getReductionAttr(), getIgnoreIndexAttr(), getNumClassesAttr());
  return SmallVector<Value>{gradLogits, Value()};
}

FailureOr<SmallVector<Value>> MSELossOp::buildVJP(OpBuilder &b,
                                                  ValueRange cotangents) {
  // d/dx mean((x − t)²) = 2(x − t)/N; the target gets the negation.
  Location loc = getLoc();
  RankedTensorType in = getInput().getType();
  double factor = getReduction() == Reduction::mean
                      ? 2.0 / std::max<int64_t>(in.getNumElements(), 1)
                      : 2.0;
  Value diff = SubOp::create(b, loc, getInput(), getTarget());
  Value gradInput =
      MulOp::create(b, loc, scale(b, loc, diff, factor), cotangents[0]);
  return SmallVector<Value>{gradInput, scale(b, loc, gradInput, -1.0)};
}

//===----------------------------------------------------------------------===//
// Mixture-of-experts routing
//===----------------------------------------------------------------------===//

FailureOr<SmallVector<Value>> TopkOp::buildVJP(OpBuilder &b,
                                               ValueRange cotangents) {
  // The values' cotangent goes back to the chosen entries: row r's index i
  // is entry r·n + i of the flattened input, a scatter-add into zeros.
  Location loc = getLoc();
  RankedTensorType in = getInput().getType(), idx = getIndices().getType();
  int64_t n = in.getShape().back(), k = getK();
  int64_t rows = in.getNumElements() / n;
  SmallVector<int64_t> base;
  base.reserve(rows * k);
  for (int64_t r = 0; r < rows; ++r)
    base.append(k, r * n);
  Value rowStart = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(idx, ArrayRef<int64_t>(base)));
  Value flat = reshapeTo(b, loc, AddOp::create(b, loc, getIndices(), rowStart),
                         {rows * k});
  Value grad = reshapeTo(b, loc, cotangents[0], {rows * k, 1});
  Value scattered =
      EmbeddingGradOp::create(b, loc, grad, flat, in.getNumElements());
  return SmallVector<Value>{reshapeTo(b, loc, scattered, in.getShape())};
}

FailureOr<SmallVector<Value>> HistcOp::buildVJP(OpBuilder &,
                                                ValueRange) {
  // Counts are piecewise constant in the input: zero almost everywhere.
  return SmallVector<Value>{Value()};
}

FailureOr<SmallVector<Value>> GroupedMatmulOp::buildVJP(OpBuilder &b,
                                                        ValueRange cotangents) {
  // dX[seg g] = dY[seg g] · W[g]ᵀ; dW[g] = X[seg g]ᵀ · dY[seg g].
  Location loc = getLoc();
  Value weightT = TransposeOp::create(b, loc, getWeight(),
                                      b.getDenseI64ArrayAttr({0, 2, 1}));
  Value gradInput =
      GroupedMatmulOp::create(b, loc, cotangents[0], weightT, getOffsets());
  Value gradWeight = GroupedMatmulGradWeightOp::create(
      b, loc, cotangents[0], getInput(), getOffsets());
  return SmallVector<Value>{gradInput, gradWeight, Value()};
}
