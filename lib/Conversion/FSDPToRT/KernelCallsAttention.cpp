//===- KernelCallsAttention.cpp - sequence-model calls --------------------===//
//
// The attention family (CApiAttention.cpp): attention with separate or packed
// q, k, v (one call shape for both: tensors, or token-strided slices of one
// qkv), its softmax statistics kept for the backward, token embeddings and
// rotary position embeddings.
//
//===----------------------------------------------------------------------===//

#include "KernelCalls.h"

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include <optional>

using namespace mlir;
using namespace mlir::fsdp;
using namespace mlir::fsdp::kernel_calls;

namespace {
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
    a.i32(dtypeOf(q.tensor))
        .t(q.tensor, q.bytes)
        .t(k.tensor, k.bytes)
        .t(v.tensor, v.bytes);
    if (grad)
      a.t(grad).opt(out);
    else
      a.t(results[0].tensor, results[0].bytes);
    a.opt(stats);
    for (const Slice &r : ArrayRef<Slice>(results).drop_front(grad ? 0 : 1))
      r.tensor ? a.t(r.tensor, r.bytes) : a.opt(Value());
    a.i64(batch)
        .i64(tq)
        .i64(tk)
        .i64(heads)
        .i64(kvHeads)
        .i64(headDim)
        .i64(qRow)
        .i64(kvRow)
        .i32(causal)
        .f64(scale ? scale->convertToDouble() : 0.0)
        .opt(bias);
    if (grad)
      a.opt(dbias);
    ArrayRef<int64_t> bs = bias ? shapeOf(bias) : ArrayRef<int64_t>();
    a.i64(bias ? bs[0] : 0)
        .i64(bias ? bs[1] : 0)
        .call(grad ? "attention_backward" : "attention_forward");
  }
};
} // namespace

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

void fsdp::addAttentionKernels(KernelEmitters &k) {
  k.add<nn::EmbeddingOp>([](CallBuilder &calls, nn::EmbeddingOp o) {
    ArrayRef<int64_t> table = shapeOf(o.getTable());
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .i32(dtypeOf(o.getIndices()))
        .t(o.getIndices())
        .t(o.getTable())
        .t(o.getResult())
        .i64(numel(o.getIndices()))
        .i64(table[0])
        .i64(table[1])
        .call("embedding_forward");
    return success();
  });
  k.add<nn::EmbeddingGradOp>([](CallBuilder &calls, nn::EmbeddingGradOp o) {
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .i32(dtypeOf(o.getIndices()))
        .t(o.getIndices())
        .t(o.getGrad())
        .t(o.getResult())
        .i64(numel(o.getIndices()))
        .i64(shapeOf(o.getResult())[0])
        .i64(shapeOf(o.getResult())[1])
        .call("embedding_backward");
    return success();
  });
  k.add<nn::AttentionOp>([](CallBuilder &calls, nn::AttentionOp o) {
    AttentionCall c = attentionCall(o, Value(), o.getResult());
    c.stats = o.getStats();
    c.emit(calls);
    return success();
  });
  k.add<nn::AttentionGradOp>([](CallBuilder &calls, nn::AttentionGradOp o) {
    AttentionCall c = attentionCall(o, o.getGrad(), o->getResults());
    if (!o.getSaved().empty())
      c.out = o.getSaved()[0], c.stats = o.getSaved()[1];
    c.emit(calls);
    return success();
  });
  k.add<nn::PackedAttentionOp>([](CallBuilder &calls, nn::PackedAttentionOp o) {
    AttentionCall c = packedAttentionCall(o, Value(), o.getResult());
    c.stats = o.getStats();
    c.emit(calls);
    return success();
  });
  k.add<nn::PackedAttentionGradOp>(
      [](CallBuilder &calls, nn::PackedAttentionGradOp o) {
        AttentionCall c = packedAttentionCall(o, o.getGrad(), o.getQkvGrad());
        if (!o.getSaved().empty())
          c.out = o.getSaved()[0], c.stats = o.getSaved()[1];
        c.emit(calls);
        return success();
      });
  k.add<nn::RoPEOp>([](CallBuilder &calls, nn::RoPEOp o) {
    ArrayRef<int64_t> s = shapeOf(o.getInput());
    int64_t heads = o.getNumHeads();
    Args{calls}
        .i32(dtypeOf(o.getResult()))
        .t(o.getInput())
        .t(o.getResult())
        .i64(s[0])
        .i64(s[1])
        .i64(heads)
        .i64(s[2] / heads)
        .f64(o.getTheta().convertToDouble())
        .call(o.getInverse() ? "rope_backward" : "rope_forward");
    return success();
  });
}
