//===- CApiAttention.cpp - C ABI: embedding, attention, rope --------------===//
//
// Entry points of the C ABI (fsdprt.h) for embedding, attention, rope: each
// validates dims and operand extents on the calling thread, then enqueues the
// backend call (CApiSupport.h).
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

#include <cmath>

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

AttentionDims attentionDims(int64_t batch, int64_t tq, int64_t tk,
                            int64_t heads, int64_t kvHeads, int64_t headDim,
                            int32_t causal, double scale) {
  nonNegative(batch, "batch");
  nonNegative(tq, "tq");
  requirePositive(tk, "tk");
  requirePositive(heads, "heads");
  requirePositive(kvHeads, "kv_heads");
  requirePositive(headDim, "head_dim");
  if (heads % kvHeads != 0)
    fail(Status::InvalidArgument, "kv_heads ", kvHeads,
         " does not divide heads ", heads);
  if (!std::isfinite(scale))
    fail(Status::InvalidArgument, "scale must be finite");
  double s = scale > 0 ? scale : 1.0 / std::sqrt(static_cast<double>(headDim));
  return AttentionDims{batch, tq, tk, heads, kvHeads, headDim, causal != 0, s};
}

/// The bias operand's broadcast sizes, checked against the attention's.
void biasDims(AttentionDims &d, int64_t biasBatch, int64_t biasHeads) {
  if (biasBatch != 1 && biasBatch != d.batch)
    fail(Status::InvalidArgument, "bias_batch ", biasBatch, " is neither 1 "
         "nor the batch ", d.batch);
  if (biasHeads != 1 && biasHeads != d.heads)
    fail(Status::InvalidArgument, "bias_heads ", biasHeads, " is neither 1 "
         "nor the heads ", d.heads);
  d.biasBatch = biasBatch;
  d.biasHeads = biasHeads;
}

/// The token strides of q and k / v: 0 (contiguous) or at least a token's
/// heads.
void rowStrides(AttentionDims &d, int64_t qRow, int64_t kvRow) {
  if (qRow != 0 && qRow < d.heads * d.headDim)
    fail(Status::InvalidArgument, "q_row ", qRow, " is less than heads x "
         "head_dim = ", d.heads * d.headDim);
  if (kvRow != 0 && kvRow < d.kvHeads * d.headDim)
    fail(Status::InvalidArgument, "kv_row ", kvRow, " is less than kv_heads "
         "x head_dim = ", d.kvHeads * d.headDim);
  d.qRow = qRow;
  d.kvRow = kvRow;
  mul(mul(d.batch, d.tq), d.qRowStride()); // extents fit in 64 bits
  mul(mul(d.batch, d.tk), d.kvRowStride());
}

/// The softmax statistics (f32, one per batch, head and query), or null.
float *statsOperand(Launch &l, int64_t buf, int64_t off,
                    const AttentionDims &d) {
  if (!buf)
    return nullptr;
  return static_cast<float *>(l.operand(
      buf, off, mul(mul(d.batch, d.heads), d.tq), DType::F32, "stats"));
}

} // namespace

extern "C" {

int32_t fsdprt_embedding_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int32_t ids_dtype, int64_t ids,
                                 int64_t ids_off, int64_t table,
                                 int64_t table_off, int64_t out,
                                 int64_t out_off, int64_t num_ids,
                                 int64_t vocab, int64_t dim) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "embedding_forward");
    DType it = indexDType(ids_dtype, "ids_dtype");
    nonNegative(num_ids, "num_ids"), nonNegative(vocab, "vocab");
    nonNegative(dim, "dim");
    const void *pi = l.operand(ids, ids_off, num_ids, it, "ids");
    const void *pt = l.operand(table, table_off, mul(vocab, dim), "table");
    void *po = l.operand(out, out_off, mul(num_ids, dim), "out");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.embeddingForward(dt, it, pi, pt, po, num_ids, vocab, dim);
    });
  });
}

int32_t fsdprt_embedding_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int32_t ids_dtype, int64_t ids,
                                  int64_t ids_off, int64_t dy, int64_t dy_off,
                                  int64_t dtable, int64_t dtable_off,
                                  int64_t num_ids, int64_t vocab, int64_t dim) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "embedding_backward");
    DType it = indexDType(ids_dtype, "ids_dtype");
    nonNegative(num_ids, "num_ids"), nonNegative(vocab, "vocab");
    nonNegative(dim, "dim");
    const void *pi = l.operand(ids, ids_off, num_ids, it, "ids");
    const void *pdy = l.operand(dy, dy_off, mul(num_ids, dim), "dy");
    void *pdt = l.operand(dtable, dtable_off, mul(vocab, dim), "dtable");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.embeddingBackward(dt, it, pi, pdy, pdt, num_ids, vocab, dim);
    });
  });
}

int32_t fsdprt_attention_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t q, int64_t q_off, int64_t k,
                                 int64_t k_off, int64_t v, int64_t v_off,
                                 int64_t out, int64_t out_off, int64_t stats,
                                 int64_t stats_off, int64_t batch,
                                 int64_t tq, int64_t tk, int64_t heads,
                                 int64_t kv_heads, int64_t head_dim,
                                 int64_t q_row, int64_t kv_row,
                                 int32_t causal, double scale, int64_t bias,
                                 int64_t bias_off, int64_t bias_batch,
                                 int64_t bias_heads) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "attention_forward");
    AttentionDims d =
        attentionDims(batch, tq, tk, heads, kv_heads, head_dim, causal, scale);
    rowStrides(d, q_row, kv_row);
    if (bias)
      biasDims(d, bias_batch, bias_heads);
    const void *pb = l.optional(bias, bias_off, d.biasNumel(), "bias");
    int64_t qn = mul(mul(batch, tq), mul(heads, head_dim));
    const void *pq = l.operand(q, q_off, d.qExtent(), "q");
    const void *pk = l.operand(k, k_off, d.kvExtent(), "k");
    const void *pv = l.operand(v, v_off, d.kvExtent(), "v");
    void *po = l.operand(out, out_off, qn, "out");
    float *ps = statsOperand(l, stats, stats_off, d);
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.attentionForward(dt, pq, pk, pv, pb, po, ps, d); });
  });
}

int32_t fsdprt_attention_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t q, int64_t q_off, int64_t k,
                                  int64_t k_off, int64_t v, int64_t v_off,
                                  int64_t dout, int64_t dout_off, int64_t out,
                                  int64_t out_off, int64_t stats,
                                  int64_t stats_off, int64_t dq,
                                  int64_t dq_off, int64_t dk, int64_t dk_off,
                                  int64_t dv, int64_t dv_off, int64_t batch,
                                  int64_t tq, int64_t tk, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim,
                                  int64_t q_row, int64_t kv_row,
                                  int32_t causal, double scale, int64_t bias,
                                  int64_t bias_off, int64_t dbias,
                                  int64_t dbias_off, int64_t bias_batch,
                                  int64_t bias_heads) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "attention_backward");
    AttentionDims d =
        attentionDims(batch, tq, tk, heads, kv_heads, head_dim, causal, scale);
    rowStrides(d, q_row, kv_row);
    if (bias)
      biasDims(d, bias_batch, bias_heads);
    else if (dbias)
      fail(Status::InvalidArgument, "dbias without a bias");
    const void *pb = l.optional(bias, bias_off, d.biasNumel(), "bias");
    void *pdb = l.optional(dbias, dbias_off, d.biasNumel(), "dbias");
    int64_t qn = mul(mul(batch, tq), mul(heads, head_dim));
    const void *pq = l.operand(q, q_off, d.qExtent(), "q");
    const void *pk = l.operand(k, k_off, d.kvExtent(), "k");
    const void *pv = l.operand(v, v_off, d.kvExtent(), "v");
    const void *pdo = l.operand(dout, dout_off, qn, "dout");
    if ((out == 0) != (stats == 0))
      fail(Status::InvalidArgument, "out and stats are given together or "
                                    "not at all");
    const void *po = l.optional(out, out_off, qn, "out");
    const float *ps = statsOperand(l, stats, stats_off, d);
    void *pdq = l.optional(dq, dq_off, d.qExtent(), "dq");
    void *pdk = l.optional(dk, dk_off, d.kvExtent(), "dk");
    void *pdv = l.optional(dv, dv_off, d.kvExtent(), "dv");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.attentionBackward(dt, pq, pk, pv, pb, pdo, po, ps, pdq, pdk, pdv,
                           pdb, d);
    });
  });
}

static int32_t ropeImpl(const char *fn, const char *op, bool inverse,
                        int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                        int64_t x_off, int64_t y, int64_t y_off, int64_t batch,
                        int64_t seq, int64_t heads, int64_t head_dim,
                        double theta) {
  return guarded(fn, [&] {
    Launch l(ctx, stream, dtype, op);
    nonNegative(batch, "batch"), nonNegative(seq, "seq");
    requirePositive(heads, "heads");
    requirePositive(head_dim, "head_dim");
    if (head_dim % 2 != 0)
      fail(Status::InvalidArgument, "head_dim ", head_dim,
           " must be even (rotary pairs)");
    if (!(theta > 0) || !std::isfinite(theta))
      fail(Status::InvalidArgument, "theta must be positive and finite");
    int64_t n = mul(mul(batch, seq), mul(heads, head_dim));
    const void *px = l.operand(x, x_off, n, inverse ? "dy" : "x");
    void *py = l.operand(y, y_off, n, inverse ? "dx" : "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.rope(dt, px, py, batch, seq, heads, head_dim, theta, inverse);
    });
  });
}

int32_t fsdprt_rope_forward(int64_t ctx, int64_t stream, int32_t dtype,
                            int64_t x, int64_t x_off, int64_t y, int64_t y_off,
                            int64_t batch, int64_t seq, int64_t heads,
                            int64_t head_dim, double theta) {
  return ropeImpl(__func__, "rope_forward", false, ctx, stream, dtype, x, x_off,
                  y, y_off, batch, seq, heads, head_dim, theta);
}

int32_t fsdprt_rope_backward(int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t dy, int64_t dy_off, int64_t dx,
                             int64_t dx_off, int64_t batch, int64_t seq,
                             int64_t heads, int64_t head_dim, double theta) {
  return ropeImpl(__func__, "rope_backward", true, ctx, stream, dtype, dy,
                  dy_off, dx, dx_off, batch, seq, heads, head_dim, theta);
}

} // extern "C"
