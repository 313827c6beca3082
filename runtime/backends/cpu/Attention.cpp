//===- Attention.cpp - scaled dot-product attention with GQA --------------===//
//
// Per (batch, head): S = scale * Q K^T + bias, causal mask, row softmax,
// O = P V, all GEMMs through OpenBLAS on strided head slices (no packing
// copies).
// Query head h reads key/value head h / (H / Hkv), as PyTorch's
// enable_gqa / repeat_interleave. The backward recomputes P rather than
// storing [B, H, Tq, Tk] probabilities, as exp(S - lse) with each row's
// log-sum-exp kept by the forward (its `stats`) or computed again.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h"
#include "Parallel.h"

#include "fsdp/rt/math/Rows.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace fsdp {
namespace rt {
namespace cpu {

namespace {
struct HeadView {
  int64_t qOff, kvOff, qLd, kvLd, b, h;
};

HeadView headView(const AttentionDims &d, int64_t bh) {
  int64_t b = bh / d.heads, h = bh % d.heads, g = h / (d.heads / d.kvHeads);
  return {b * d.tq * d.heads * d.headDim + h * d.headDim,
          b * d.tk * d.kvHeads * d.headDim + g * d.headDim, d.heads * d.headDim,
          d.kvHeads * d.headDim, b, h};
}
} // namespace

/// S = mask(scale * Q K^T + bias) for one head into s[tq, tk] (masked
/// scores -inf).
static void scores(const float *q, const float *k, const float *bias,
                   const AttentionDims &d, const HeadView &v, float *s) {
  gemm(1, false, true, d.tq, d.tk, d.headDim, static_cast<float>(d.scale),
       q + v.qOff, v.qLd, k + v.kvOff, v.kvLd, 0.0f, s, d.tk);
  const float *b = bias ? bias + d.biasOffset(v.b, v.h) : nullptr;
  for (int64_t i = 0; i < d.tq; ++i) {
    float *row = s + i * d.tk;
    if (b)
      for (int64_t j = 0; j < d.tk; ++j)
        row[j] += b[i * d.tk + j];
    if (d.causal)
      std::fill(row + std::min(i + 1, d.tk), row + d.tk, -INFINITY);
  }
}

/// A row of scores' log-sum-exp: the softmax statistic.
static float logSumExp(const float *row, int64_t n) {
  float m, logSum;
  rowLogSumExp(row, n, 1, m, logSum);
  return m + logSum;
}

/// The forward's P = softmax(S) of one head into p[tq, tk], and each row's
/// log-sum-exp into stats[tq] when wanted.
static void probabilities(const float *q, const float *k, const float *bias,
                          const AttentionDims &d, const HeadView &v, float *p,
                          float *stats) {
  scores(q, k, bias, d, v, p);
  for (int64_t i = 0; i < d.tq; ++i) {
    float *row = p + i * d.tk;
    float m, logSum; // softmaxRow's, computed once for both
    rowLogSumExp(row, d.tk, 1, m, logSum);
    if (stats)
      stats[i] = m + logSum;
    for (int64_t j = 0; j < d.tk; ++j)
      row[j] = std::exp(row[j] - m - logSum);
  }
}

/// The backward's P = exp(S - lse) of one head, with each row's log-sum-exp
/// from the forward's stats, or computed as the forward does: the same
/// bits either way.
static void probabilitiesFromStats(const float *q, const float *k,
                                   const float *bias, const AttentionDims &d,
                                   const HeadView &v, const float *stats,
                                   float *p) {
  scores(q, k, bias, d, v, p);
  for (int64_t i = 0; i < d.tq; ++i) {
    float *row = p + i * d.tk;
    float lse = stats ? stats[i] : logSumExp(row, d.tk);
    for (int64_t j = 0; j < d.tk; ++j)
      row[j] = std::exp(row[j] - lse);
  }
}

/// The stats row of (batch, head) of a head view.
static int64_t statsOffset(const AttentionDims &d, const HeadView &v) {
  return (v.b * d.heads + v.h) * d.tq;
}

// Work is split over (batch, kv group): the query heads of a group share
// dK/dV slices and accumulate into them in head order within one thread.
void attentionForward(int threads, const float *q, const float *k,
                      const float *v, const float *bias, float *out,
                      float *stats, const AttentionDims &d) {
  parallelFor(threads, d.batch * d.heads, 1, [&](int64_t h0, int64_t h1) {
    std::vector<float> p(d.tq * d.tk);
    for (int64_t bh = h0; bh < h1; ++bh) {
      HeadView hv = headView(d, bh);
      probabilities(q, k, bias, d, hv, p.data(),
                    stats ? stats + statsOffset(d, hv) : nullptr);
      gemm(1, false, false, d.tq, d.headDim, d.tk, 1.0f, p.data(), d.tk,
           v + hv.kvOff, hv.kvLd, 0.0f, out + hv.qOff, hv.qLd);
    }
  });
}

void attentionBackward(int threads, const float *q, const float *k,
                       const float *v, const float *bias, const float *dout,
                       const float *stats, float *dq, float *dk, float *dv,
                       float *dbias, const AttentionDims &d) {
  int64_t kvNumel = d.batch * d.tk * d.kvHeads * d.headDim;
  if (dk)
    std::fill(dk, dk + kvNumel, 0.0f);
  if (dv)
    std::fill(dv, dv + kvNumel, 0.0f);
  if (dbias) {
    std::fill(dbias, dbias + d.biasNumel(), 0.0f);
    // A broadcast bias sums the gradients of several heads or batch
    // elements into one slice: in one fixed order, on one thread.
    if (d.biasBatch == 1 || d.biasHeads == 1)
      threads = 1;
  }
  float scale = static_cast<float>(d.scale);
  int64_t group = d.heads / d.kvHeads;
  parallelFor(threads, d.batch * d.kvHeads, 1, [&](int64_t g0, int64_t g1) {
    std::vector<float> p(d.tq * d.tk), dp(d.tq * d.tk);
    for (int64_t bg = g0; bg < g1; ++bg) {
      for (int64_t bh = bg * group; bh < (bg + 1) * group; ++bh) {
        HeadView hv = headView(d, bh);
        probabilitiesFromStats(q, k, bias, d, hv,
                               stats ? stats + statsOffset(d, hv) : nullptr,
                               p.data());
        const float *dO = dout + hv.qOff;
        if (dv) // dV += P^T dO
          gemm(1, true, false, d.tk, d.headDim, d.tq, 1.0f, p.data(), d.tk, dO,
               hv.qLd, 1.0f, dv + hv.kvOff, hv.kvLd);
        if (!dq && !dk && !dbias)
          continue;
        // dP = dO V^T, then dS = P * (dP - rowsum(dP * P)) in place.
        gemm(1, false, true, d.tq, d.tk, d.headDim, 1.0f, dO, hv.qLd,
             v + hv.kvOff, hv.kvLd, 0.0f, dp.data(), d.tk);
        for (int64_t i = 0; i < d.tq; ++i)
          softmaxRowBackward(p.data() + i * d.tk, dp.data() + i * d.tk,
                             dp.data() + i * d.tk, d.tk, 1);
        if (dbias) { // dBias += dS: the bias adds to the scaled scores
          float *db = dbias + d.biasOffset(hv.b, hv.h);
          for (int64_t i = 0; i < d.tq * d.tk; ++i)
            db[i] += dp[i];
        }
        if (dq) // dQ = scale * dS K
          gemm(1, false, false, d.tq, d.headDim, d.tk, scale, dp.data(), d.tk,
               k + hv.kvOff, hv.kvLd, 0.0f, dq + hv.qOff, hv.qLd);
        if (dk) // dK += scale * dS^T Q
          gemm(1, true, false, d.tk, d.headDim, d.tq, scale, dp.data(), d.tk,
               q + hv.qOff, hv.qLd, 1.0f, dk + hv.kvOff, hv.kvLd);
      }
    }
  });
}

} // namespace cpu
} // namespace rt
} // namespace fsdp
