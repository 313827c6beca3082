//===- KernelCalls.cpp - the runtime call of each compute op -------------===//
//
// One case per op: which fsdprt_* entry point computes it, with the shapes
// the kernel wants (m/k/n of a GEMM, rows × d of a normalisation, ...).
//
//===----------------------------------------------------------------------===//

#include "CallBuilder.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/rt/fsdprt.h"

#include "llvm/ADT/TypeSwitch.h"

#include <optional>

using namespace mlir;
using namespace mlir::fsdp;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}
static ArrayRef<int64_t> shapeOf(Value v) { return tensorType(v).getShape(); }
static int64_t numel(Value v) { return tensorType(v).getNumElements(); }
/// Product of all dims but the last.
static int64_t rows(Value v) {
  ArrayRef<int64_t> s = shapeOf(v);
  return s.empty() ? 1 : numel(v) / s.back();
}
static int64_t lastDim(Value v) {
  ArrayRef<int64_t> s = shapeOf(v);
  return s.empty() ? 1 : s.back();
}
/// The product of the dims after N and C of a batch-norm input [N, C, ...].
static int64_t batchNormSpatial(Value input) {
  ArrayRef<int64_t> s = shapeOf(input);
  return numel(input) / (s[0] * s[1]);
}
static int32_t lossReduction(nn::Reduction r) {
  return r == nn::Reduction::sum ? FSDPRT_LOSS_SUM : FSDPRT_LOSS_MEAN;
}
static int32_t geluKind(nn::GeluApproximation a) {
  return a == nn::GeluApproximation::tanh ? FSDPRT_GELU_TANH : FSDPRT_GELU;
}
/// The fsdprt activation code of an activation op or of its gradient.
static int32_t activationKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, int32_t>(op)
      .Case<nn::ReluOp, nn::ReluGradOp>([](auto) { return FSDPRT_RELU; })
      .Case<nn::SiluOp, nn::SiluGradOp>([](auto) { return FSDPRT_SILU; })
      .Case<nn::GeluOp, nn::GeluGradOp>(
          [](auto o) { return geluKind(o.getApproximate()); })
      .Default([](Operation *) -> int32_t {
        llvm_unreachable("not an activation");
      });
}

/// nn::UnaryFn lists the functions in FSDPRT_UNARY_* order.
static int32_t unaryKind(nn::UnaryFn fn) {
  static_assert(static_cast<int32_t>(nn::UnaryFn::tanh) == FSDPRT_UNARY_TANH &&
                static_cast<int32_t>(nn::UnaryFn::sigmoid) ==
                    FSDPRT_UNARY_SIGMOID &&
                static_cast<int32_t>(nn::UnaryFn::exp) == FSDPRT_UNARY_EXP &&
                static_cast<int32_t>(nn::UnaryFn::log) == FSDPRT_UNARY_LOG &&
                static_cast<int32_t>(nn::UnaryFn::sqrt) == FSDPRT_UNARY_SQRT &&
                static_cast<int32_t>(nn::UnaryFn::rsqrt) ==
                    FSDPRT_UNARY_RSQRT &&
                static_cast<int32_t>(nn::UnaryFn::abs) == FSDPRT_UNARY_ABS &&
                static_cast<int32_t>(nn::UnaryFn::pow) == FSDPRT_UNARY_POW &&
                static_cast<int32_t>(nn::UnaryFn::clamp) ==
                    FSDPRT_UNARY_CLAMP);
  return static_cast<int32_t>(fn);
}

namespace {
/// Builds the operand list of one call: tensors as (buffer, offset).
struct Args {
  explicit Args(CallBuilder &l) : l(l) {}
  CallBuilder &l;
  SmallVector<Value> values;
  Args &t(Value tensor) {
    l.pushTensor(values, tensor);
    return *this;
  }
  /// The tensor `bytes` into its storage (a slice of it).
  Args &t(Value tensor, int64_t bytes) {
    TensorRef r = l.ref(tensor);
    values.push_back(r.buffer);
    values.push_back(l.i64(r.offset + bytes));
    return *this;
  }
  Args &opt(Value tensor) {
    if (tensor)
      l.pushTensor(values, tensor);
    else
      l.pushNull(values);
    return *this;
  }
  Args &i32(int64_t v) {
    values.push_back(l.i32(v));
    return *this;
  }
  Args &i64(int64_t v) {
    values.push_back(l.i64(v));
    return *this;
  }
  Args &f64(double v) {
    values.push_back(l.f64(v));
    return *this;
  }
  Args &shape(Value tensor) {
    values.push_back(l.i32(shapeOf(tensor).size()));
    values.push_back(l.array(shapeOf(tensor)));
    return *this;
  }
  Args &array(ArrayRef<int64_t> v) {
    values.push_back(l.array(v));
    return *this;
  }
  Args &value(Value v) {
    values.push_back(v);
    return *this;
  }
  void call(StringRef name) { l.call(name, values); }
};
} // namespace

/// matmul: [batch..., m, k] x [k, n] or [batch..., k, n].
static LogicalResult emitMatmul(CallBuilder &l, nn::MatmulOp op) {
  ArrayRef<int64_t> a = shapeOf(op.getLhs()), bShape = shapeOf(op.getRhs());
  if (a.size() < 2 || bShape.size() < 2 ||
      (bShape.size() > 2 && bShape.size() != a.size()))
    return op.emitOpError("has no runtime lowering for operand ranks ")
           << a.size() << " and " << bShape.size();
  int64_t batch = 1;
  for (int64_t d : a.drop_back(2))
    batch *= d;
  int64_t m = op.getTransposeLhs() ? a[a.size() - 1] : a[a.size() - 2];
  int64_t k = op.getTransposeLhs() ? a[a.size() - 2] : a[a.size() - 1];
  int64_t n = op.getTransposeRhs() ? bShape[bShape.size() - 2]
                                   : bShape[bShape.size() - 1];
  Args{l}
      .i32(dtypeOf(op.getResult()))
      .t(op.getLhs())
      .t(op.getRhs())
      .t(op.getResult())
      .i64(batch)
      .i64(m)
      .i64(k)
      .i64(n)
      .i32(op.getTransposeLhs())
      .i32(op.getTransposeRhs())
      .i32(bShape.size() > 2)
      .call("matmul_forward");
  return success();
}

/// The runtime's code of an elementwise binary op (fsdprt.h); none for
/// other ops.
static std::optional<int32_t> binaryCode(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<int32_t>>(op)
      .Case([](nn::AddOp) { return FSDPRT_ADD; })
      .Case([](nn::SubOp) { return FSDPRT_SUB; })
      .Case([](nn::MulOp) { return FSDPRT_MUL; })
      .Case([](nn::DivOp) { return FSDPRT_DIV; })
      .Case([](nn::MaximumOp) { return FSDPRT_MAX; })
      .Case([](nn::MinimumOp) { return FSDPRT_MIN; })
      .Case([](nn::MaxWeightOp) { return FSDPRT_MAX_WEIGHT; })
      .Case([](nn::MinWeightOp) { return FSDPRT_MIN_WEIGHT; })
      .Case([](nn::KeepOp) { return FSDPRT_KEEP; })
      .Case([](nn::LtOp) { return FSDPRT_LT; })
      .Case([](nn::LeOp) { return FSDPRT_LE; })
      .Case([](nn::GtOp) { return FSDPRT_GT; })
      .Case([](nn::GeOp) { return FSDPRT_GE; })
      .Case([](nn::EqOp) { return FSDPRT_EQ; })
      .Case([](nn::NeOp) { return FSDPRT_NE; })
      .Default([](Operation *) { return std::nullopt; });
}

/// out = lhs (code) rhs with broadcasting: binary_forward.
static void emitBinary(CallBuilder &l, Operation *op, int32_t code) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Args{l}
      .i32(dtypeOf(op->getResult(0)))
      .i32(code)
      .t(lhs)
      .shape(lhs)
      .t(rhs)
      .shape(rhs)
      .t(op->getResult(0))
      .call("binary_forward");
}

/// nn.broadcast is the backward of a sum over the broadcast dimensions.
static void emitBroadcast(CallBuilder &l, nn::BroadcastOp op) {
  ArrayRef<int64_t> in = shapeOf(op.getInput()), out = shapeOf(op.getResult());
  SmallVector<int64_t> dims;
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d)
    if (d < lead || (in[d - lead] == 1 && out[d] != 1))
      dims.push_back(d);
  Args{l}
      .i32(dtypeOf(op.getResult()))
      .i32(FSDPRT_REDUCE_SUM)
      .t(op.getInput())
      .shape(op.getResult())
      .i32(dims.size())
      .array(dims)
      .t(op.getResult())
      .call("reduce_backward");
}

template <typename ReduceOp>
static void emitReduce(CallBuilder &l, ReduceOp op, int32_t kind) {
  ArrayRef<int64_t> dims = op.getDims();
  Args{l}
      .i32(dtypeOf(op.getResult()))
      .i32(kind)
      .t(op.getInput())
      .shape(op.getInput())
      .i32(dims.size())
      .array(dims)
      .t(op.getResult())
      .call("reduce_forward");
}

/// One attention call: q, k, v (and dq, dk, dv) are tensors, or token-
/// strided slices of one (nn.packed_attention's qkv: `bytes` into each
/// token, tokens `row` elements apart).
struct AttentionCall {
  struct Slice {
    Value tensor;
    int64_t bytes = 0;
  };
  Slice q, k, v;
  Value bias, grad;              // grad: the backward's dout
  SmallVector<Slice, 3> results; // out, or dq, dk, dv (null: not wanted)
  /// The softmax statistics: the forward's to write, the backward's to
  /// read with the forward's out (null: none kept).
  Value stats, out;
  Value dbias;
  int64_t batch, tq, tk, heads, kvHeads, headDim, qRow = 0, kvRow = 0;
  bool causal;
  std::optional<APFloat> scale;

  void emit(CallBuilder &l) const {
    Args a{l};
    a.i32(dtypeOf(q.tensor)).t(q.tensor, q.bytes).t(k.tensor, k.bytes)
        .t(v.tensor, v.bytes);
    if (grad)
      a.t(grad).opt(out);
    else
      a.t(results[0].tensor, results[0].bytes);
    a.opt(stats);
    for (const Slice &r : ArrayRef<Slice>(results).drop_front(grad ? 0 : 1))
      r.tensor ? a.t(r.tensor, r.bytes) : a.opt(Value());
    a.i64(batch).i64(tq).i64(tk).i64(heads).i64(kvHeads).i64(headDim)
        .i64(qRow).i64(kvRow).i32(causal)
        .f64(scale ? scale->convertToDouble() : 0.0)
        .opt(bias);
    if (grad)
      a.opt(dbias);
    ArrayRef<int64_t> bs = bias ? shapeOf(bias) : ArrayRef<int64_t>();
    a.i64(bias ? bs[0] : 0).i64(bias ? bs[1] : 0)
        .call(grad ? "attention_backward" : "attention_forward");
  }
};

/// nn.attention / nn.attention_grad: separate q, k, v.
template <typename Op>
static AttentionCall attentionCall(Op op, Value grad, ValueRange results) {
  ArrayRef<int64_t> qs = shapeOf(op.getQuery()), ks = shapeOf(op.getKey());
  AttentionCall c;
  c.q = {op.getQuery()}, c.k = {op.getKey()}, c.v = {op.getValue()};
  c.bias = op.getBias(), c.grad = grad;
  for (Value r : results.take_front(grad ? 3 : 1))
    c.results.push_back({r});
  if (grad && c.bias)
    c.dbias = results.back();
  c.batch = qs[0], c.tq = qs[1], c.tk = ks[1], c.heads = op.getNumHeads();
  c.kvHeads = static_cast<int64_t>(op.getNumKvHeads().value_or(c.heads));
  c.headDim = qs[2] / c.heads;
  c.causal = op.getCausal(), c.scale = op.getScale();
  return c;
}

/// nn.packed_attention / its grad: q, k, v the slices of one qkv (and dq,
/// dk, dv of one gradient), each token (H + 2·Hkv)·D elements.
template <typename Op>
static AttentionCall packedAttentionCall(Op op, Value grad, Value result) {
  ArrayRef<int64_t> s = shapeOf(op.getQkv());
  AttentionCall c;
  c.heads = op.getNumHeads(), c.kvHeads = op.getKeyValueHeads();
  c.qRow = c.kvRow = s[2];
  c.headDim = s[2] / (c.heads + 2 * c.kvHeads);
  int64_t es = elementBytes(getElementTypeOrSelf(op.getQkv().getType())),
          kAt = c.heads * c.headDim * es,
          vAt = kAt + c.kvHeads * c.headDim * es;
  Value qkv = op.getQkv();
  c.q = {qkv, 0}, c.k = {qkv, kAt}, c.v = {qkv, vAt}, c.grad = grad;
  c.results = grad ? SmallVector<AttentionCall::Slice, 3>{{result, 0},
                                                          {result, kAt},
                                                          {result, vAt}}
                   : SmallVector<AttentionCall::Slice, 3>{{result, 0}};
  c.batch = s[0], c.tq = c.tk = s[1];
  c.causal = op.getCausal(), c.scale = op.getScale();
  return c;
}

LogicalResult fsdp::emitKernel(CallBuilder &calls, Operation *op) {
  if (emitOptimizer(calls, op))
    return success();
  if (std::optional<int32_t> code = binaryCode(op)) {
    emitBinary(calls, op, *code);
    return success();
  }
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](nn::LinearOp o) {
        Args{calls}
            .i32(dtypeOf(o.getResult()))
            .t(o.getInput())
            .t(o.getWeight())
            .opt(o.getBias())
            .t(o.getResult())
            .i64(rows(o.getInput()))
            .i64(lastDim(o.getInput()))
            .i64(shapeOf(o.getWeight())[0])
            .call("linear_forward");
        return success();
      })
      .Case([&](nn::LinearGradOp o) {
        Args{calls}
            .i32(dtypeOf(o.getGrad()))
            .t(o.getInput())
            .t(o.getWeight())
            .t(o.getGrad())
            .t(o.getInputGrad())
            .t(o.getWeightGrad())
            .t(o.getBiasGrad())
            .i64(rows(o.getInput()))
            .i64(lastDim(o.getInput()))
            .i64(shapeOf(o.getWeight())[0])
            .call("linear_backward");
        return success();
      })
      .Case([&](nn::MatmulOp o) { return emitMatmul(calls, o); })
      .Case<nn::TanhOp, nn::SigmoidOp, nn::ExpOp, nn::LogOp, nn::SqrtOp,
            nn::RsqrtOp, nn::AbsOp, nn::PowOp, nn::ClampOp>([&](auto o) {
        Args{calls}.i32(dtypeOf(o.getResult())).i32(unaryKind(o.getFn()))
            .t(o.getInput()).t(o.getResult()).i64(numel(o.getResult()))
            .f64(o.getParamA()).f64(o.getParamB()).call("unary_forward");
        return success();
      })
      .Case([&](nn::UnaryGradOp o) {
        Args{calls}.i32(dtypeOf(o.getResult())).i32(unaryKind(o.getFn()))
            .t(o.getInput()).t(o.getGrad()).t(o.getResult())
            .i64(numel(o.getResult())).f64(o.getA().convertToDouble())
            .f64(o.getB().convertToDouble()).call("unary_backward");
        return success();
      })
      .Case([&](nn::SliceOp o) {
        Args{calls}.i32(dtypeOf(o.getInput())).t(o.getInput())
            .shape(o.getInput()).i32(o.getDim()).i64(o.getStart())
            .i64(o.getEnd() - o.getStart()).t(o.getResult()).call("slice");
        return success();
      })
      .Case([&](nn::PadOp o) {
        Args{calls}.i32(dtypeOf(o.getInput())).t(o.getInput())
            .shape(o.getInput()).i32(o.getDim()).i64(o.getLow())
            .i64(o.getHigh()).f64(o.getValue().convertToDouble())
            .t(o.getResult()).call("pad");
        return success();
      })
      .Case([&](nn::ScaleOp o) {
        Args{calls}
            .i32(dtypeOf(o.getResult()))
            .t(o.getInput())
            .t(o.getResult())
            .i64(numel(o.getResult()))
            .f64(o.getFactor().convertToDouble())
            .call("scale_forward");
        return success();
      })
      .Case([&](nn::BroadcastOp o) {
        emitBroadcast(calls, o);
        return success();
      })
      .Case<nn::ReluOp, nn::SiluOp, nn::GeluOp>([&](auto o) {
        Args{calls}.i32(dtypeOf(o.getResult())).i32(activationKind(o))
            .t(o.getInput()).t(o.getResult()).i64(numel(o.getResult()))
            .call("activation_forward");
        return success();
      })
      .Case<nn::ReluGradOp, nn::SiluGradOp, nn::GeluGradOp>([&](auto o) {
        Args{calls}.i32(dtypeOf(o.getResult())).i32(activationKind(o))
            .t(o.getInput()).t(o.getGrad()).t(o.getResult())
            .i64(numel(o.getResult())).call("activation_backward");
        return success();
      })
      .Case([&](nn::LayerNormOp o) {
        Args{calls}.i32(dtypeOf(o.getResult())).t(o.getInput())
            .opt(o.getWeight()).opt(o.getBias()).t(o.getResult())
            .i64(rows(o.getInput())).i64(lastDim(o.getInput()))
            .f64(o.getEpsilon().convertToDouble()).call("layer_norm_forward");
        return success();
      })
      .Case([&](nn::LayerNormGradOp o) {
        Args{calls}.i32(dtypeOf(o.getInputGrad())).t(o.getInput())
            .opt(o.getWeight()).t(o.getGrad()).t(o.getInputGrad())
            .t(o.getWeightGrad()).t(o.getBiasGrad())
            .i64(rows(o.getInput())).i64(lastDim(o.getInput()))
            .f64(o.getEpsilon().convertToDouble()).call("layer_norm_backward");
        return success();
      })
      .Case([&](nn::RMSNormOp o) {
        Args{calls}.i32(dtypeOf(o.getResult())).t(o.getInput())
            .opt(o.getWeight()).t(o.getResult())
            .i64(rows(o.getInput())).i64(lastDim(o.getInput()))
            .f64(o.getEpsilon().convertToDouble()).call("rms_norm_forward");
        return success();
      })
      .Case([&](nn::RMSNormGradOp o) {
        Args{calls}.i32(dtypeOf(o.getInputGrad())).t(o.getInput())
            .opt(o.getWeight()).t(o.getGrad()).t(o.getInputGrad())
            .t(o.getWeightGrad())
            .i64(rows(o.getInput())).i64(lastDim(o.getInput()))
            .f64(o.getEpsilon().convertToDouble()).call("rms_norm_backward");
        return success();
      })
      .Case([&](nn::DropoutOp o) {
        // The backward is the same op on the cotangent: same key, same mask.
        Args{calls}.i32(dtypeOf(o.getResult())).t(o.getInput())
            .t(o.getResult()).i64(numel(o.getResult()))
            .f64(o.getP().convertToDouble())
            .value(calls.seed())
            .value(calls.stepCount())
            .value(calls.dropoutKey(int64_t(o.getRngId())))
            .call("dropout_forward");
        return success();
      })
      .Case([&](nn::BatchNormOp o) {
        // Training updates the running statistics in place: the op's new
        // statistics alias them (storageAliasOf).
        Args{calls}.i32(dtypeOf(o.getResult())).t(o.getInput())
            .t(o.getWeight()).t(o.getBias()).t(o.getRunningMean())
            .t(o.getRunningVar()).t(o.getResult())
            .i64(shapeOf(o.getInput())[0]).i64(shapeOf(o.getInput())[1])
            .i64(batchNormSpatial(o.getInput()))
            .f64(o.getEpsilon().convertToDouble())
            .f64(o.getMomentum().convertToDouble()).i32(o.getTraining())
            .call("batch_norm_forward");
        return success();
      })
      .Case([&](nn::BatchNormGradOp o) {
        Args{calls}.i32(dtypeOf(o.getInputGrad())).t(o.getInput())
            .t(o.getWeight()).t(o.getRunningMean()).t(o.getRunningVar())
            .t(o.getGrad()).t(o.getInputGrad()).t(o.getWeightGrad())
            .t(o.getBiasGrad()).i64(shapeOf(o.getInput())[0])
            .i64(shapeOf(o.getInput())[1])
            .i64(batchNormSpatial(o.getInput()))
            .f64(o.getEpsilon().convertToDouble()).i32(o.getTraining())
            .call("batch_norm_backward");
        return success();
      })
      .Case([&](nn::SoftmaxOp o) {
        int64_t rank = shapeOf(o.getInput()).size();
        int64_t dim = o.getDim() < 0 ? o.getDim() + rank : o.getDim();
        Args{calls}.i32(dtypeOf(o.getResult())).t(o.getInput()).t(o.getResult())
            .shape(o.getInput()).i32(dim).call("softmax_forward");
        return success();
      })
      .Case([&](nn::EmbeddingOp o) {
        ArrayRef<int64_t> table = shapeOf(o.getTable());
        Args{calls}.i32(dtypeOf(o.getResult())).i32(dtypeOf(o.getIndices()))
            .t(o.getIndices()).t(o.getTable()).t(o.getResult())
            .i64(numel(o.getIndices())).i64(table[0]).i64(table[1])
            .call("embedding_forward");
        return success();
      })
      .Case([&](nn::EmbeddingGradOp o) {
        Args{calls}.i32(dtypeOf(o.getResult())).i32(dtypeOf(o.getIndices()))
            .t(o.getIndices()).t(o.getGrad()).t(o.getResult())
            .i64(numel(o.getIndices())).i64(shapeOf(o.getResult())[0])
            .i64(shapeOf(o.getResult())[1]).call("embedding_backward");
        return success();
      })
      .Case([&](nn::AttentionOp o) {
        AttentionCall c = attentionCall(o, Value(), o.getResult());
        c.stats = o.getStats();
        c.emit(calls);
        return success();
      })
      .Case([&](nn::AttentionGradOp o) {
        AttentionCall c = attentionCall(o, o.getGrad(), o->getResults());
        if (!o.getSaved().empty())
          c.out = o.getSaved()[0], c.stats = o.getSaved()[1];
        c.emit(calls);
        return success();
      })
      .Case([&](nn::PackedAttentionOp o) {
        AttentionCall c = packedAttentionCall(o, Value(), o.getResult());
        c.stats = o.getStats();
        c.emit(calls);
        return success();
      })
      .Case([&](nn::PackedAttentionGradOp o) {
        AttentionCall c = packedAttentionCall(o, o.getGrad(), o.getQkvGrad());
        if (!o.getSaved().empty())
          c.out = o.getSaved()[0], c.stats = o.getSaved()[1];
        c.emit(calls);
        return success();
      })
      .Case([&](nn::RoPEOp o) {
        ArrayRef<int64_t> s = shapeOf(o.getInput());
        int64_t heads = o.getNumHeads();
        Args{calls}.i32(dtypeOf(o.getResult())).t(o.getInput()).t(o.getResult())
            .i64(s[0]).i64(s[1]).i64(heads).i64(s[2] / heads)
            .f64(o.getTheta().convertToDouble())
            .call(o.getInverse() ? "rope_backward" : "rope_forward");
        return success();
      })
      .Case([&](nn::CastOp o) {
        Args{calls}.i32(dtypeOf(o.getInput())).t(o.getInput())
            .i32(dtypeOf(o.getResult())).t(o.getResult())
            .i64(numel(o.getResult())).call("cast");
        return success();
      })
      .Case([&](nn::TransposeOp o) {
        Args{calls}.i32(dtypeOf(o.getResult())).t(o.getInput()).t(o.getResult())
            .shape(o.getInput()).array(o.getPermutation())
            .call("transpose_forward");
        return success();
      })
      .Case([&](nn::SplitOp o) {
        SmallVector<Value> outs, offs;
        for (Value r : o.getResults()) {
          TensorRef t = calls.ref(r);
          outs.push_back(t.buffer);
          offs.push_back(calls.i64(t.offset));
        }
        Args{calls}.i32(dtypeOf(o.getInput())).t(o.getInput())
            .shape(o.getInput()).i32(o.getDim())
            .i32(o.getResults().size()).array(o.getSizes())
            .value(calls.array(ArrayRef<Value>(outs)))
            .value(calls.array(ArrayRef<Value>(offs))).call("split");
        return success();
      })
      .Case([&](nn::ConcatOp o) {
        SmallVector<Value> ins, offs;
        SmallVector<int64_t> sizes;
        for (Value in : o.getInputs()) {
          TensorRef t = calls.ref(in);
          ins.push_back(t.buffer);
          offs.push_back(calls.i64(t.offset));
          sizes.push_back(shapeOf(in)[o.getDim()]);
        }
        Args{calls}.i32(dtypeOf(o.getResult())).i32(ins.size())
            .value(calls.array(ArrayRef<Value>(ins)))
            .value(calls.array(ArrayRef<Value>(offs))).array(sizes)
            .shape(o.getResult()).i32(o.getDim()).t(o.getResult())
            .call("concat");
        return success();
      })
      .Case([&](nn::ReduceSumOp o) {
        emitReduce(calls, o, FSDPRT_REDUCE_SUM);
        return success();
      })
      .Case([&](nn::ReduceMeanOp o) {
        emitReduce(calls, o, FSDPRT_REDUCE_MEAN);
        return success();
      })
      .Case([&](nn::CrossEntropyOp o) {
        Args{calls}.i32(dtypeOf(o.getLogits())).i32(dtypeOf(o.getTargets()))
            .t(o.getLogits()).t(o.getTargets()).t(o.getResult())
            .i64(rows(o.getLogits())).i64(o.getClassCount())
            .i64(lastDim(o.getLogits())).i32(lossReduction(o.getReduction())).i64(o.getIgnoreIndex())
            .call("cross_entropy_forward");
        return success();
      })
      .Case([&](nn::CrossEntropyGradOp o) {
        Args{calls}.i32(dtypeOf(o.getLogits())).i32(dtypeOf(o.getTargets()))
            .t(o.getLogits()).t(o.getTargets()).t(o.getGrad()).t(o.getResult())
            .i64(rows(o.getLogits())).i64(o.getClassCount())
            .i64(lastDim(o.getLogits())).i32(lossReduction(o.getReduction())).i64(o.getIgnoreIndex())
            .call("cross_entropy_backward");
        return success();
      })
      .Case([&](nn::CrossEntropyWithGradOp o) {
        Args{calls}.i32(dtypeOf(o.getLogits())).i32(dtypeOf(o.getTargets()))
            .t(o.getLogits()).t(o.getTargets()).t(o.getGrad()).t(o.getLoss())
            .t(o.getLogitsGrad())
            .i64(rows(o.getLogits())).i64(o.getClassCount())
            .i64(lastDim(o.getLogits())).i32(lossReduction(o.getReduction())).i64(o.getIgnoreIndex())
            .call("cross_entropy_forward_backward");
        return success();
      })
      .Case([&](nn::MSELossOp o) {
        Args{calls}.i32(dtypeOf(o.getInput())).t(o.getInput()).t(o.getTarget())
            .t(o.getResult()).i64(numel(o.getInput()))
            .i32(lossReduction(o.getReduction())).call("mse_loss_forward");
        return success();
      })
      .Case([&](arith::AddIOp o) -> LogicalResult {
        if (!isCounterIncrement(o))
          return o.emitOpError(
              "has no runtime lowering: integer additions lower only as the "
              "in-place increment of a counter (x + splat constant, x used "
              "nowhere else)");
        auto c = cast<DenseIntElementsAttr>(
            o.getRhs().getDefiningOp<arith::ConstantOp>().getValue());
        Args{calls}.i32(dtypeOf(o.getResult())).t(o.getResult())
            .i64(numel(o.getResult()))
            .i64(c.getSplatValue<APInt>().getSExtValue())
            .call("add_integer");
        return success();
      })
      .Case([&](arith::ConstantOp o) -> LogicalResult {
        auto value = dyn_cast<DenseElementsAttr>(o.getValue());
        if (!value)
          return o.emitOpError("has no runtime lowering (not dense elements)");
        TensorRef t = calls.ref(o.getResult());
        OpBuilder &b = calls.builder();
        rt::CopyConstantOp::create(b, o.getLoc(), calls.context(),
                                   calls.stream(), t.buffer,
                                   b.getI64IntegerAttr(t.offset), value);
        return success();
      })
      .Case([&](FlattenOp o) {
        // Inputs back to back, then zeros up to the padded size.
        TensorRef flat = calls.ref(o.getResult());
        int64_t offset = 0;
        for (Value in : o.getInputs()) {
          TensorRef src = calls.ref(in);
          bool inPlace = src.buffer == flat.buffer &&
                         src.offset == flat.offset + offset;
          if (!inPlace) // gradients written in their slot need no copy
            calls.call("copy", {flat.buffer, calls.i64(flat.offset + offset),
                                src.buffer, calls.i64(src.offset),
                                calls.i64(tensorBytes(in))});
          offset += tensorBytes(in);
        }
        int64_t elementBytes = tensorBytes(o.getResult()) / numel(o.getResult());
        int64_t padding = numel(o.getResult()) - offset / elementBytes;
        if (padding > 0)
          calls.call("fill", {calls.i32(dtypeOf(o.getResult())), flat.buffer,
                              calls.i64(flat.offset + offset),
                              calls.i64(padding), calls.f64(0.0)});
        return success();
      })
      .Case<ToDeviceOp, ToHostOp>([&](Operation *o) {
        // CPU offload: the copy between host and device memory, on its
        // stream.
        Args{calls}.t(o->getResult(0)).t(o->getOperand(0))
            .i64(tensorBytes(o->getOperand(0))).call("copy");
        return success();
      })
      .Case([&](LossScaleOp o) {
        Args{calls}.t(o.getScale()).i32(o.getInverse()).call("loss_scale");
        return success();
      })
      .Case([&](FoundNonfiniteOp o) {
        for (auto [i, grad] : llvm::enumerate(o.getGrads()))
          Args{calls}.i32(dtypeOf(grad)).t(grad).i64(numel(grad))
              .t(o.getFound()).i32(i > 0).call("nonfinite_flag");
        return success();
      })
      .Case([&](ClipGradNormOp o) {
        Args{calls}.t(o.getSumOfSquares()).t(o.getNorm()).t(o.getCoefficient())
            .f64(o.getMaxNorm().convertToDouble()).call("clip_coefficient");
        return success();
      })
      .Default([&](Operation *o) {
        return o->emitOpError(
            "has no runtime lowering in convert-fsdp-to-rt yet");
      });
}
