//===- BlasAttention.cpp - Attention head by head on cuBLAS ---------------===//
//
// BlasAttention.h. Host code only: GEMMs (Gemm.h) and the row kernels'
// launchers (Kernels.h) queued on the call's stream.
//
//===----------------------------------------------------------------------===//
#include "BlasAttention.h"

#include "fsdp/rt/backend/PackedAttention.h"

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// Device memory and slab copies for ContiguousAttention.
struct DeviceRows {
  struct Buffer {
    Scratch bytes;
    void *data() const { return bytes.as<void>(); }
  };
  Buffer allocate(int64_t bytes) { return Buffer{Scratch(s, bytes)}; }
  void copyRows(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
                int64_t rowBytes, int64_t rows) {
    cuda::copySlab(s, 1, src, srcPitch, 0, dst, dstPitch, 0, rows, rowBytes, 1);
  }
  Stream s;
};

/// Head h of Q/K/V/O ([batch, t, heads, headDim] row-major) as a strided
/// batch of [t, headDim] matrices, one per batch element.
struct HeadView {
  int64_t qOff, kvOff, qLd, kvLd, qStride, kvStride;
};
HeadView headView(const AttentionDims &d, int64_t h) {
  int64_t g = h / (d.heads / d.kvHeads);
  return {h * d.headDim,
          g * d.headDim,
          d.heads * d.headDim,
          d.kvHeads * d.headDim,
          d.tq * d.heads * d.headDim,
          d.tk * d.kvHeads * d.headDim};
}

/// S = scale * Q K^T + bias of head h for every batch element into
/// p[batch, tq, tk] (the mask is applied with the softmax).
void scores(Exec &e, const float *q, const float *k, const float *bias,
            const AttentionDims &d, int64_t h, const HeadView &v, float *p) {
  gemm(e, DType::F32, false, true, d.tq, d.tk, d.headDim,
       static_cast<float>(d.scale), q + v.qOff, v.qLd, v.qStride, k + v.kvOff,
       v.kvLd, v.kvStride, 0.0f, p, DType::F32, d.tk, d.tq * d.tk, d.batch);
  if (bias)
    addBatches(e.s, p, bias + d.biasOffset(0, h), d.batch, d.tq * d.tk,
               d.biasBatchStride());
}

/// Attention head by head on cuBLAS, q, k and v contiguous.
void forwardContiguous(Exec &e, DType dt, const void *q, const void *k,
                       const void *v, const void *bias, void *out, float *stats,
                       const AttentionDims &d) {
  int64_t qn = d.batch * d.tq * d.heads * d.headDim;
  int64_t kvn = d.batch * d.tk * d.kvHeads * d.headDim;
  DeviceStaging st({e.s});
  const float *fq = st.in(dt, q, qn), *fk = st.in(dt, k, kvn),
              *fv = st.in(dt, v, kvn), *fb = st.in(dt, bias, d.biasNumel());
  float *fo = st.out(dt, out, qn);
  Scratch p(e.s, d.batch * d.tq * d.tk * 4);
  for (int64_t h = 0; h < d.heads; ++h) {
    HeadView hv = headView(d, h);
    scores(e, fq, fk, fb, d, h, hv, p.as<float>());
    maskedSoftmaxRows(e.s, p.as<float>(), d.batch * d.tq, d.tq, d.tk, d.causal,
                      stats ? stats + h * d.tq : nullptr, d.heads * d.tq);
    gemm(e, DType::F32, false, false, d.tq, d.headDim, d.tk, 1.0f,
         p.as<float>(), d.tk, d.tq * d.tk, fv + hv.kvOff, hv.kvLd, hv.kvStride,
         0.0f, fo + hv.qOff, DType::F32, hv.qLd, hv.qStride, d.batch);
  }
  st.commit();
}

/// Its backward, q, k and v contiguous.
void backwardContiguous(Exec &e, DType dt, const void *q, const void *k,
                        const void *v, const void *bias, const void *dout,
                        const float *stats, void *dq, void *dk, void *dv,
                        void *dbias, const AttentionDims &d) {
  int64_t qn = d.batch * d.tq * d.heads * d.headDim;
  int64_t kvn = d.batch * d.tk * d.kvHeads * d.headDim;
  DeviceStaging st({e.s});
  const float *fq = st.in(dt, q, qn), *fk = st.in(dt, k, kvn),
              *fv = st.in(dt, v, kvn), *fdo = st.in(dt, dout, qn),
              *fb = st.in(dt, bias, d.biasNumel());
  float *fdq = st.out(dt, dq, qn), *fdk = st.out(dt, dk, kvn),
        *fdv = st.out(dt, dv, kvn), *fdb = st.out(dt, dbias, d.biasNumel());
  if (dk)
    cuda::fill(e.s, DType::F32, fdk, kvn, 0.0);
  if (dv)
    cuda::fill(e.s, DType::F32, fdv, kvn, 0.0);
  if (dbias)
    cuda::fill(e.s, DType::F32, fdb, d.biasNumel(), 0.0);
  float scale = static_cast<float>(d.scale);
  int64_t rows = d.batch * d.tq, pStride = d.tq * d.tk;
  Scratch p(e.s, rows * d.tk * 4), dp(e.s, rows * d.tk * 4);
  // Without the forward's statistics, each head's are made first, as the
  // forward makes them: P is exp(S - lse) either way, the same bits.
  Scratch made(e.s, stats ? 0 : rows * 4);
  float *pp = p.as<float>(), *pdp = dp.as<float>();
  for (int64_t h = 0; h < d.heads; ++h) {
    HeadView hv = headView(d, h);
    scores(e, fq, fk, fb, d, h, hv, pp);
    const float *lse = stats ? stats + h * d.tq : made.as<float>();
    int64_t lseBatchStride = stats ? d.heads * d.tq : d.tq;
    if (!stats)
      maskedLogSumExpRows(e.s, pp, rows, d.tq, d.tk, d.causal, made.as<float>(),
                          lseBatchStride);
    maskedExpRows(e.s, pp, rows, d.tq, d.tk, d.causal, lse, lseBatchStride);
    const float *dO = fdo + hv.qOff;
    if (dv) // dV += P^T dO
      gemm(e, DType::F32, true, false, d.tk, d.headDim, d.tq, 1.0f, pp, d.tk,
           pStride, dO, hv.qLd, hv.qStride, 1.0f, fdv + hv.kvOff, DType::F32,
           hv.kvLd, hv.kvStride, d.batch);
    if (!dq && !dk && !dbias)
      continue;
    // dP = dO V^T, then dS = P * (dP - rowsum(dP * P)) in place.
    gemm(e, DType::F32, false, true, d.tq, d.tk, d.headDim, 1.0f, dO, hv.qLd,
         hv.qStride, fv + hv.kvOff, hv.kvLd, hv.kvStride, 0.0f, pdp, DType::F32,
         d.tk, pStride, d.batch);
    softmaxBackwardRows(e.s, pp, pdp, rows, d.tk);
    if (dbias) // dBias += dS, summed over a broadcast batch
      accumulateBatches(e.s, fdb + d.biasOffset(0, h), pdp, d.batch, pStride,
                        d.biasBatchStride());
    if (dq) // dQ = scale * dS K
      gemm(e, DType::F32, false, false, d.tq, d.headDim, d.tk, scale, pdp, d.tk,
           pStride, fk + hv.kvOff, hv.kvLd, hv.kvStride, 0.0f, fdq + hv.qOff,
           DType::F32, hv.qLd, hv.qStride, d.batch);
    if (dk) // dK += scale * dS^T Q
      gemm(e, DType::F32, true, false, d.tk, d.headDim, d.tq, scale, pdp, d.tk,
           pStride, fq + hv.qOff, hv.qLd, hv.qStride, 1.0f, fdk + hv.kvOff,
           DType::F32, hv.kvLd, hv.kvStride, d.batch);
  }
  st.commit();
}

} // namespace

void blasAttentionForward(Exec &e, DType dt, const void *q, const void *k,
                          const void *v, const void *bias, void *out,
                          float *stats, const AttentionDims &d) {
  if (d.contiguous())
    return forwardContiguous(e, dt, q, k, v, bias, out, stats, d);
  // Slices of a packed projection: cuBLAS runs on contiguous copies.
  ContiguousAttention<DeviceRows> c(DeviceRows{e.s}, dt, d);
  const void *cq = c.q(q), *ck = c.kv(k), *cv = c.kv(v);
  forwardContiguous(e, dt, cq, ck, cv, bias, out, stats, c.dims());
}

void blasAttentionBackward(Exec &e, DType dt, const void *q, const void *k,
                           const void *v, const void *bias, const void *dout,
                           const float *stats, void *dq, void *dk, void *dv,
                           void *dbias, const AttentionDims &d) {
  if (d.contiguous())
    return backwardContiguous(e, dt, q, k, v, bias, dout, stats, dq, dk, dv,
                              dbias, d);
  ContiguousAttention<DeviceRows> c(DeviceRows{e.s}, dt, d);
  const void *cq = c.q(q), *ck = c.kv(k), *cv = c.kv(v);
  void *cdq = c.dq(dq), *cdk = c.dkv(dk), *cdv = c.dkv(dv);
  backwardContiguous(e, dt, cq, ck, cv, bias, dout, stats, cdq, cdk, cdv, dbias,
                     c.dims());
  c.finish();
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
