//===- NNOps.cpp - nn dialect operations: shape and dtype rules ------------===//
//
// Result types are inferred (and thereby verified) here. The inference
// functions also run on unverified IR from builders, so they check every
// assumption and report it at the op's location instead of asserting.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "ShapeRules.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

using namespace mlir;
using namespace mlir::nn;

using namespace mlir::nn::rules;

/// Maps a possibly negative dimension into [0, rank); fails when out of range.
static FailureOr<int64_t> normalizeDim(int64_t dim, int64_t rank) {
  if (dim < -rank || dim >= rank)
    return failure();
  return dim < 0 ? dim + rank : dim;
}

LogicalResult rules::checkVector(std::optional<Location> loc,
                                  StringRef opName, StringRef what,
                                  Value value, int64_t size, Type element) {
  RankedTensorType type = tensorOf(value);
  if (!type || type.getRank() != 1 || type.getDimSize(0) != size)
    return fail(loc, opName, what, " must be a tensor of shape [", size,
                "], got ", value.getType());
  if (type.getElementType() != element)
    return fail(loc, opName, what, " element type ", type.getElementType(),
                " differs from the input's ", element);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise with broadcasting
//===----------------------------------------------------------------------===//

static LogicalResult inferBroadcast(std::optional<Location> loc,
                                    StringRef opName, Value lhs, Value rhs,
                                    SmallVectorImpl<Type> &results) {
  RankedTensorType a = tensorOf(lhs), b = tensorOf(rhs);
  if (!a || !b)
    return fail(loc, opName, "expects ranked tensor operands");
  if (a.getElementType() != b.getElementType())
    return fail(loc, opName, "operand element types differ: ",
                a.getElementType(), " vs ", b.getElementType());
  SmallVector<int64_t> shape;
  if (!OpTrait::util::getBroadcastedShape(a.getShape(), b.getShape(), shape))
    return fail(loc, opName, "shapes ", lhs.getType(), " and ", rhs.getType(),
                " do not broadcast");
  results.push_back(RankedTensorType::get(shape, a.getElementType()));
  return success();
}

#define NN_BROADCAST_INFERENCE(OP)                                             \
  LogicalResult OP::inferReturnTypes(MLIRContext *, std::optional<Location> loc, \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &results) {         \
    return inferBroadcast(loc, getOperationName(), adaptor.getLhs(),           \
                          adaptor.getRhs(), results);                          \
  }
NN_BROADCAST_INFERENCE(AddOp)
NN_BROADCAST_INFERENCE(SubOp)
NN_BROADCAST_INFERENCE(MulOp)
NN_BROADCAST_INFERENCE(DivOp)
NN_BROADCAST_INFERENCE(FmodOp)
NN_BROADCAST_INFERENCE(MaximumOp)
NN_BROADCAST_INFERENCE(MinimumOp)
NN_BROADCAST_INFERENCE(MaxWeightOp)
NN_BROADCAST_INFERENCE(MinWeightOp)
NN_BROADCAST_INFERENCE(KeepOp)
NN_BROADCAST_INFERENCE(LtOp)
NN_BROADCAST_INFERENCE(LeOp)
NN_BROADCAST_INFERENCE(GtOp)
NN_BROADCAST_INFERENCE(GeOp)
NN_BROADCAST_INFERENCE(EqOp)
NN_BROADCAST_INFERENCE(NeOp)
NN_BROADCAST_INFERENCE(FloorDivOp)
#undef NN_BROADCAST_INFERENCE

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType x = tensorOf(adaptor.getInput());
  RankedTensorType w = tensorOf(adaptor.getWeight());
  if (!x || !w)
    return fail(loc, name, "expects ranked tensor operands");
  if (x.getRank() < 1)
    return fail(loc, name, "input must have at least one dimension");
  if (w.getRank() != 2)
    return fail(loc, name,
                "weight must be 2-D [out_features, in_features], got ", w);
  if (x.getElementType() != w.getElementType())
    return fail(loc, name, "input and weight element types differ: ",
                x.getElementType(), " vs ", w.getElementType());
  int64_t inFeatures = x.getShape().back();
  if (w.getDimSize(1) != inFeatures)
    return fail(loc, name, "weight has ", w.getDimSize(1),
                " input features but the input's last dimension is ",
                inFeatures);
  int64_t outFeatures = w.getDimSize(0);
  if (Value bias = adaptor.getBias())
    if (failed(checkVector(loc, name, "bias", bias, outFeatures,
                           x.getElementType())))
      return failure();
  SmallVector<int64_t> shape(x.getShape());
  shape.back() = outFeatures;
  results.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType a = tensorOf(adaptor.getLhs()), b = tensorOf(adaptor.getRhs());
  if (!a || !b)
    return fail(loc, name, "expects ranked tensor operands");
  if (a.getRank() < 2 || b.getRank() < 2)
    return fail(loc, name, "operands must have rank >= 2, got ", a, " and ", b);
  if (a.getElementType() != b.getElementType())
    return fail(loc, name, "operand element types differ: ",
                a.getElementType(), " vs ", b.getElementType());
  auto lastTwo = [](RankedTensorType t, bool transposed) {
    int64_t rows = t.getDimSize(t.getRank() - 2);
    int64_t cols = t.getDimSize(t.getRank() - 1);
    return transposed ? std::make_pair(cols, rows) : std::make_pair(rows, cols);
  };
  auto [m, k] = lastTwo(a, adaptor.getTransposeLhs());
  auto [k2, n] = lastTwo(b, adaptor.getTransposeRhs());
  if (k != k2)
    return fail(loc, name, "contraction sizes differ: lhs has ", k,
                " columns, rhs has ", k2, " rows");
  SmallVector<int64_t> batch;
  if (!OpTrait::util::getBroadcastedShape(a.getShape().drop_back(2),
                                          b.getShape().drop_back(2), batch))
    return fail(loc, name, "batch dimensions of ", a, " and ", b,
                " do not broadcast");
  batch.push_back(m);
  batch.push_back(n);
  results.push_back(RankedTensorType::get(batch, a.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

LogicalResult
rules::inferLastDimNorm(std::optional<Location> loc, StringRef name,
                         Value input,
                         ArrayRef<std::pair<StringRef, Value>> vectors,
                         SmallVectorImpl<Type> &results) {
  RankedTensorType x = tensorOf(input);
  if (!x || x.getRank() < 1)
    return fail(loc, name, "input must be a tensor of rank >= 1");
  for (auto [what, value] : vectors)
    if (value && failed(checkVector(loc, name, what, value, x.getShape().back(),
                                    x.getElementType())))
      return failure();
  results.push_back(x);
  return success();
}

LogicalResult LayerNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  return inferLastDimNorm(
      loc, getOperationName(), adaptor.getInput(),
      {{"weight", adaptor.getWeight()}, {"bias", adaptor.getBias()}}, results);
}

LogicalResult AddLayerNormOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  // The fused add does not broadcast: the rewrite fuses only same-typed sums.
  if (adaptor.getLhs().getType() != adaptor.getRhs().getType())
    return fail(loc, getOperationName(), "lhs and rhs must have one type");
  if (failed(inferLastDimNorm(
          loc, getOperationName(), adaptor.getLhs(),
          {{"weight", adaptor.getWeight()}, {"bias", adaptor.getBias()}},
          results)))
    return failure();
  Type normalised = results.front();
  results.push_back(normalised);
  return success();
}

LogicalResult RMSNormOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  return inferLastDimNorm(loc, getOperationName(), adaptor.getInput(),
                          {{"weight", adaptor.getWeight()}}, results);
}

LogicalResult BatchNormOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType x = tensorOf(adaptor.getInput());
  if (!x || x.getRank() < 2)
    return fail(loc, name, "input must be [N, C, ...] with rank >= 2");
  int64_t channels = x.getDimSize(1);
  std::pair<StringRef, Value> vectors[] = {
      {"weight", adaptor.getWeight()},
      {"bias", adaptor.getBias()},
      {"running_mean", adaptor.getRunningMean()},
      {"running_var", adaptor.getRunningVar()}};
  for (auto [what, value] : vectors)
    if (failed(checkVector(loc, name, what, value, channels,
                           x.getElementType())))
      return failure();
  results.push_back(x);
  results.push_back(adaptor.getRunningMean().getType());
  results.push_back(adaptor.getRunningVar().getType());
  return success();
}

LogicalResult SoftmaxOp::verify() {
  int64_t rank = getInput().getType().getRank();
  if (rank < 1)
    return emitOpError("input must have rank >= 1");
  auto dim = static_cast<int64_t>(getDim());
  if (failed(normalizeDim(dim, rank)))
    return emitOpError("dim ") << dim << " is out of range for rank " << rank;
  return success();
}

//===----------------------------------------------------------------------===//
// Transformer building blocks
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType ids = tensorOf(adaptor.getIndices());
  RankedTensorType table = tensorOf(adaptor.getTable());
  if (!ids || !table)
    return fail(loc, name, "expects ranked tensor operands");
  if (table.getRank() != 2)
    return fail(loc, name, "table must be 2-D [num_embeddings, dim], got ",
                table);
  if (std::optional<uint64_t> pad = adaptor.getPaddingIdx();
      pad && (int64_t(*pad) < 0 || int64_t(*pad) >= table.getDimSize(0)))
    return fail(loc, name, "padding_idx ", int64_t(*pad),
                " is not a row of the ", table.getDimSize(0), "-row table");
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  results.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType q = tensorOf(adaptor.getQuery());
  RankedTensorType k = tensorOf(adaptor.getKey());
  RankedTensorType v = tensorOf(adaptor.getValue());
  if (!q || !k || !v || q.getRank() != 3 || k.getRank() != 3 ||
      v.getRank() != 3)
    return fail(loc, name,
                "query, key and value must be 3-D [batch, seq, heads*dim]");
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return fail(loc, name, "query, key and value element types differ");
  if (k.getDimSize(0) != q.getDimSize(0) || v.getDimSize(0) != q.getDimSize(0))
    return fail(loc, name, "batch sizes differ: query ", q.getDimSize(0),
                ", key ", k.getDimSize(0), ", value ", v.getDimSize(0));
  if (k.getShape() != v.getShape())
    return fail(loc, name, "key ", k, " and value ", v,
                " must have the same shape");
  auto heads = static_cast<int64_t>(adaptor.getNumHeads());
  auto kvHeads = static_cast<int64_t>(adaptor.getNumKvHeads().value_or(heads));
  if (heads <= 0 || kvHeads <= 0)
    return fail(loc, name, "head counts must be positive");
  if (heads % kvHeads != 0)
    return fail(loc, name, "num_heads ", heads,
                " is not a multiple of num_kv_heads ", kvHeads);
  int64_t width = q.getDimSize(2);
  if (width % heads != 0)
    return fail(loc, name, "query width ", width,
                " is not divisible by num_heads ", heads);
  int64_t headDim = width / heads;
  if (k.getDimSize(2) != kvHeads * headDim)
    return fail(loc, name, "key width ", k.getDimSize(2), " must be ",
                kvHeads, " kv heads x head dim ", headDim, " = ",
                kvHeads * headDim);
  if (Value biasValue = adaptor.getBias()) {
    RankedTensorType bias = tensorOf(biasValue);
    int64_t batch = q.getDimSize(0);
    if (!bias || bias.getRank() != 4 || bias.getDimSize(2) != q.getDimSize(1) ||
        bias.getDimSize(3) != k.getDimSize(1) ||
        (bias.getDimSize(0) != 1 && bias.getDimSize(0) != batch) ||
        (bias.getDimSize(1) != 1 && bias.getDimSize(1) != heads))
      return fail(loc, name, "bias ", biasValue.getType(), " must be [1 or ",
                  batch, ", 1 or ", heads, ", ", q.getDimSize(1), ", ",
                  k.getDimSize(1), "]");
    if (bias.getElementType() != q.getElementType())
      return fail(loc, name, "bias element type ", bias.getElementType(),
                  " differs from the query's ", q.getElementType());
  }
  results.push_back(q);
  if (adaptor.getKeepStats())
    results.push_back(attentionStats(q, adaptor.getNumHeads()));
  return success();
}

FailureOr<RankedTensorType>
rules::packedAttentionResult(std::optional<Location> loc, StringRef opName,
                             Value qkvValue, uint64_t numHeads,
                             std::optional<uint64_t> numKvHeads) {
  auto heads = static_cast<int64_t>(numHeads);
  auto kvHeads = static_cast<int64_t>(numKvHeads.value_or(numHeads));
  RankedTensorType qkv = tensorOf(qkvValue);
  if (heads <= 0 || kvHeads <= 0)
    return fail(loc, opName, "head counts must be positive");
  if (!qkv || qkv.getRank() != 3)
    return fail(loc, opName, "qkv must be 3-D [batch, seq, (heads + 2 x "
                             "kv_heads) x head_dim]");
  if (heads % kvHeads != 0)
    return fail(loc, opName, "num_heads ", heads,
                " is not a multiple of num_kv_heads ", kvHeads);
  int64_t width = qkv.getDimSize(2), slices = heads + 2 * kvHeads;
  if (width % slices != 0)
    return fail(loc, opName, "qkv width ", width, " is not (num_heads + 2 x "
                "num_kv_heads) = ", slices, " heads of one head dim");
  return RankedTensorType::get(
      {qkv.getDimSize(0), qkv.getDimSize(1), heads * (width / slices)},
      qkv.getElementType());
}

RankedTensorType rules::attentionStats(RankedTensorType result,
                                       uint64_t numHeads) {
  return RankedTensorType::get({result.getDimSize(0),
                                static_cast<int64_t>(numHeads),
                                result.getDimSize(1)},
                               Float32Type::get(result.getContext()));
}

LogicalResult rules::checkSavedStats(std::optional<Location> loc,
                                     StringRef opName, ValueRange saved,
                                     RankedTensorType result,
                                     uint64_t numHeads) {
  RankedTensorType stats = attentionStats(result, numHeads);
  if (!saved.empty() &&
      (saved.size() != 2 || saved[0].getType() != result ||
       saved[1].getType() != stats))
    return fail(loc, opName, "saved must be the forward's result ", result,
                " and its statistics ", stats);
  return success();
}

LogicalResult PackedAttentionOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  FailureOr<RankedTensorType> result =
      packedAttentionResult(loc, getOperationName(), adaptor.getQkv(),
                            adaptor.getNumHeads(), adaptor.getNumKvHeads());
  if (failed(result))
    return failure();
  results.push_back(*result);
  if (adaptor.getKeepStats())
    results.push_back(attentionStats(*result, adaptor.getNumHeads()));
  return success();
}

LogicalResult RoPEOp::verify() {
  RankedTensorType x = getInput().getType();
  if (x.getRank() != 3)
    return emitOpError("input must be 3-D [batch, seq, heads*dim], got ") << x;
  int64_t width = x.getDimSize(2);
  auto heads = static_cast<int64_t>(getNumHeads());
  if (width % heads != 0)
    return emitOpError("width ") << width << " is not divisible by num_heads "
                                 << heads;
  if ((width / heads) % 2 != 0)
    return emitOpError("head dim ")
           << width / heads << " must be even to rotate pairs";
  return success();
}

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

LogicalResult RandomOp::verify() {
  double a = getA().convertToDouble(), b = getB().convertToDouble();
  if (!std::isfinite(a) || !std::isfinite(b))
    return emitOpError("needs finite a and b, got ") << a << " and " << b;
  if (getDistribution() == Distribution::uniform && a > b)
    return emitOpError("uniform range [") << a << ", " << b << ") is empty";
  if (getDistribution() == Distribution::normal && b < 0)
    return emitOpError("normal standard deviation ") << b << " is negative";
  return success();
}

//===----------------------------------------------------------------------===//
// Shape and type manipulation
//===----------------------------------------------------------------------===//

LogicalResult ClampOp::verify() {
  if (!getMin() && !getMax())
    return emitOpError("needs a min, a max or both");
  if (getMin() && getMax() &&
      getMin()->convertToDouble() > getMax()->convertToDouble())
    return emitOpError("min ") << getMin()->convertToDouble()
                               << " is above max "
                               << getMax()->convertToDouble();
  return success();
}

/// nn.slice and nn.pad: `result` is `input` with dimension `dim` of size
/// `size` (all else equal, same element type).
static LogicalResult verifyWindow(Operation *op, RankedTensorType in,
                                  RankedTensorType out, int64_t dim,
                                  int64_t size) {
  if (dim < 0 || dim >= in.getRank())
    return op->emitOpError("dim ") << dim << " is out of range for rank "
                                   << in.getRank();
  SmallVector<int64_t> shape(in.getShape());
  shape[dim] = size;
  auto expected = RankedTensorType::get(shape, in.getElementType());
  if (out != expected)
    return op->emitOpError("result type ") << out << " should be " << expected;
  return success();
}

LogicalResult SliceOp::verify() {
  RankedTensorType in = getInput().getType();
  int64_t dim = getDim(), start = getStart(), end = getEnd(), step = getStep();
  if (dim >= 0 && dim < in.getRank() &&
      (start < 0 || end <= start || end > in.getDimSize(dim)))
    return emitOpError("window [")
           << start << ", " << end << ") is empty or outside dimension " << dim
           << " of size " << in.getDimSize(dim);
  return verifyWindow(*this, in, getResult().getType(), dim,
                      llvm::divideCeil(end - start, step));
}

LogicalResult PadOp::verify() {
  RankedTensorType in = getInput().getType();
  int64_t dim = getDim(), low = getLow(), high = getHigh();
  if (low < 0 || high < 0)
    return emitOpError("low and high must be non-negative, got ")
           << low << " and " << high;
  int64_t size = dim >= 0 && dim < in.getRank() ? in.getDimSize(dim) : 0;
  return verifyWindow(*this, in, getResult().getType(), dim,
                      size + low + high);
}

LogicalResult CumsumOp::verify() {
  int64_t rank = getInput().getType().getRank();
  auto dim = static_cast<int64_t>(getDim());
  if (rank < 1 || failed(normalizeDim(dim, rank)))
    return emitOpError("dim ") << dim << " is out of range for rank " << rank;
  return success();
}

LogicalResult CastOp::verify() {
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError("changes the shape: ")
           << getInput().getType() << " to " << getResult().getType();
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getInput().getType(), out = getResult().getType();
  if (in.getElementType() != out.getElementType())
    return emitOpError("changes the element type (use nn.cast): ")
           << in.getElementType() << " to " << out.getElementType();
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("changes the number of elements: ")
           << in.getNumElements() << " to " << out.getNumElements();
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType x = tensorOf(adaptor.getInput());
  if (!x)
    return fail(loc, name, "expects a ranked tensor operand");
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  if (static_cast<int64_t>(perm.size()) != x.getRank())
    return fail(loc, name, "permutation has ", perm.size(),
                " entries for rank ", x.getRank());
  llvm::SmallBitVector seen(perm.size());
  SmallVector<int64_t> shape;
  for (int64_t p : perm) {
    if (p < 0 || p >= x.getRank() || seen.test(p))
      return fail(loc, name, "permutation [", perm,
                  "] is not a permutation of 0..", x.getRank() - 1);
    seen.set(p);
    shape.push_back(x.getDimSize(p));
  }
  results.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult SplitOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType x = tensorOf(adaptor.getInput());
  if (!x)
    return fail(loc, name, "expects a ranked tensor operand");
  auto dimAttr = static_cast<int64_t>(adaptor.getDim());
  FailureOr<int64_t> dim = normalizeDim(dimAttr, x.getRank());
  if (failed(dim))
    return fail(loc, name, "dim ", dimAttr,
                " is out of range for rank ", x.getRank());
  ArrayRef<int64_t> sizes = adaptor.getSizes();
  if (sizes.empty())
    return fail(loc, name, "needs at least one size");
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0)
      return fail(loc, name, "sizes must be non-negative");
    total += size;
    SmallVector<int64_t> shape(x.getShape());
    shape[*dim] = size;
    results.push_back(RankedTensorType::get(shape, x.getElementType()));
  }
  if (total != x.getDimSize(*dim))
    return fail(loc, name, "sizes add up to ", total, " but dimension ", *dim,
                " has size ", x.getDimSize(*dim));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return fail(loc, name, "needs at least one input");
  RankedTensorType first = tensorOf(inputs.front());
  if (!first)
    return fail(loc, name, "expects ranked tensor operands");
  auto dimAttr = static_cast<int64_t>(adaptor.getDim());
  FailureOr<int64_t> dim = normalizeDim(dimAttr, first.getRank());
  if (failed(dim))
    return fail(loc, name, "dim ", dimAttr,
                " is out of range for rank ", first.getRank());
  SmallVector<int64_t> shape(first.getShape());
  shape[*dim] = 0;
  for (auto [index, value] : llvm::enumerate(inputs)) {
    RankedTensorType t = tensorOf(value);
    if (!t || t.getRank() != first.getRank() ||
        t.getElementType() != first.getElementType())
      return fail(loc, name, "input #", index, " has type ", value.getType(),
                  ", incompatible with ", first);
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != *dim && t.getDimSize(d) != first.getDimSize(d))
        return fail(loc, name, "input #", index, " differs in dimension ", d,
                    ": ", t.getDimSize(d), " vs ", first.getDimSize(d));
    shape[*dim] += t.getDimSize(*dim);
  }
  results.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

/// Shared by reduce_sum and reduce_mean.
static LogicalResult inferReduction(std::optional<Location> loc,
                                    StringRef name, Value input,
                                    ArrayRef<int64_t> dims, bool keepdim,
                                    SmallVectorImpl<Type> &results) {
  RankedTensorType x = tensorOf(input);
  if (!x)
    return fail(loc, name, "expects a ranked tensor operand");
  llvm::SmallBitVector reduced(x.getRank());
  for (int64_t dim : dims) {
    FailureOr<int64_t> d = normalizeDim(dim, x.getRank());
    if (failed(d))
      return fail(loc, name, "dim ", dim, " is out of range for rank ",
                  x.getRank());
    if (reduced.test(*d))
      return fail(loc, name, "dim ", dim, " is listed twice");
    reduced.set(*d);
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < x.getRank(); ++d) {
    if (!reduced.test(d))
      shape.push_back(x.getDimSize(d));
    else if (keepdim)
      shape.push_back(1);
  }
  results.push_back(RankedTensorType::get(shape, x.getElementType()));
  return success();
}

LogicalResult ReduceSumOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &results) {
  return inferReduction(loc, getOperationName(), adaptor.getInput(),
                        adaptor.getDims(), adaptor.getKeepdim(), results);
}

LogicalResult ReduceMeanOp::inferReturnTypes(MLIRContext *,
                                             std::optional<Location> loc,
                                             Adaptor adaptor,
                                             SmallVectorImpl<Type> &results) {
  return inferReduction(loc, getOperationName(), adaptor.getInput(),
                        adaptor.getDims(), adaptor.getKeepdim(), results);
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &results) {
  StringRef name = getOperationName();
  RankedTensorType logits = tensorOf(adaptor.getLogits());
  RankedTensorType targets = tensorOf(adaptor.getTargets());
  if (!logits || !targets)
    return fail(loc, name, "expects ranked tensor operands");
  if (logits.getRank() < 1)
    return fail(loc, name, "logits must be [..., num_classes]");
  if (targets.getShape() != logits.getShape().drop_back())
    return fail(loc, name, "targets ", targets,
                " must have the shape of logits without the class dimension");
  if (failed(checkNumClasses(loc, name, adaptor.getLogits(),
                             adaptor.getNumClasses())))
    return failure();
  results.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

LogicalResult rules::checkNumClasses(std::optional<Location> loc,
                                     StringRef opName, Value logits,
                                     std::optional<uint64_t> numClasses) {
  RankedTensorType type = tensorOf(logits);
  if (!numClasses || !type || type.getRank() < 1)
    return success();
  int64_t width = type.getShape().back();
  if (static_cast<int64_t>(*numClasses) > width)
    return fail(loc, opName, "num_classes = ", *numClasses,
                " exceeds the logits' last dimension (", width, ")");
  return success();
}

LogicalResult MSELossOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &results) {
  RankedTensorType input = tensorOf(adaptor.getInput());
  RankedTensorType target = tensorOf(adaptor.getTarget());
  if (!input || !target || input != target)
    return fail(loc, getOperationName(), "input and target types differ: ",
                adaptor.getInput().getType(), " vs ",
                adaptor.getTarget().getType());
  results.push_back(RankedTensorType::get({}, input.getElementType()));
  return success();
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/NN/IR/NNOps.cpp.inc"
