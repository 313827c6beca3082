//===- AttentionTest.cpp - attention, rope, embedding, dropout ------------===//
#include "TestUtil.h"

#include "fsdp/rt/math/Half.h"
#include "fsdp/rt/math/Philox.h"

#include <cmath>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class SequenceConformance : public ::testing::TestWithParam<std::string> {};

struct AttentionCase {
  int64_t batch, tq, tk, heads, kvHeads, headDim;
  bool causal;
  double scale; // <= 0: default 1/sqrt(D)
  /// An additive bias [biasBatch, biasHeads, tq, tk]; 0: none.
  int64_t biasBatch = 0, biasHeads = 0;
  int64_t biasNumel() const { return biasBatch * biasHeads * tq * tk; }
  /// Index of bias element (i, j) for batch b, head h (broadcast).
  int64_t biasAt(int64_t b, int64_t h, int64_t i, int64_t j) const {
    return (((biasBatch == 1 ? 0 : b) * biasHeads + (biasHeads == 1 ? 0 : h)) *
                tq + i) * tk + j;
  }
};

/// The backend's attention forward and backward of one case, with f32
/// operands or (dt = bf16) the f32 values cast to bf16 on the device and
/// the results cast back.
struct AttentionResults {
  std::vector<float> out, dq, dk, dv, dbias;
};
AttentionResults runAttention(Device &dev, const AttentionCase &c,
                              const std::vector<float> &q,
                              const std::vector<float> &k,
                              const std::vector<float> &v,
                              const std::vector<float> &dout,
                              int32_t dt = FSDPRT_F32,
                              const std::vector<float> &bias = {}) {
  int64_t qn = q.size(), kvn = k.size(), es = dt == FSDPRT_F32 ? 4 : 2;
  auto in = [&](const std::vector<float> &x) {
    int64_t f = dev.upload(x);
    if (dt == FSDPRT_F32)
      return f;
    int64_t h = dev.alloc(x.size() * es);
    EXPECT_EQ(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, f, 0, dt, h, 0,
                          x.size()),
              FSDPRT_OK);
    return h;
  };
  auto out = [&](int64_t b, int64_t n) {
    if (dt == FSDPRT_F32)
      return dev.download(b, n);
    int64_t f = dev.alloc(n * 4);
    EXPECT_EQ(fsdprt_cast(dev.ctx, dev.stream, dt, b, 0, FSDPRT_F32, f, 0, n),
              FSDPRT_OK);
    return dev.download(f, n);
  };
  int64_t bq = in(q), bk = in(k), bv = in(v), bdo = in(dout),
          bo = dev.alloc(qn * es), bdq = dev.alloc(qn * es),
          bdk = dev.alloc(kvn * es), bdv = dev.alloc(kvn * es);
  int64_t bb = 0, bdb = 0, bn = int64_t(bias.size());
  if (bn) {
    bb = in(bias);
    bdb = dev.alloc(bn * es);
  }
  EXPECT_EQ(fsdprt_attention_forward(dev.ctx, dev.stream, dt, bq, 0, bk, 0, bv,
                                     0, bo, 0, 0, 0, c.batch, c.tq, c.tk,
                                     c.heads,
                                     c.kvHeads, c.headDim, 0, 0, c.causal,
                                     c.scale, bb, 0, c.biasBatch, c.biasHeads),
            FSDPRT_OK)
      << fsdprt_last_error();
  EXPECT_EQ(fsdprt_attention_backward(dev.ctx, dev.stream, dt, bq, 0, bk, 0,
                                      bv, 0, bdo, 0, 0, 0, 0, 0, bdq, 0, bdk,
                                      0, bdv, 0,
                                      c.batch, c.tq, c.tk, c.heads, c.kvHeads,
                                      c.headDim, 0, 0, c.causal, c.scale, bb,
                                      0, bdb, 0, c.biasBatch, c.biasHeads),
            FSDPRT_OK)
      << fsdprt_last_error();
  return {out(bo, qn), out(bdq, qn), out(bdk, kvn), out(bdv, kvn),
          bn ? out(bdb, bn) : std::vector<float>()};
}

/// runAttention on q, k, v packed per token into one [B, T, (H + 2·Hkv)·D]
/// buffer (nn.packed_attention's layout: token-strided slices), dq, dk, dv
/// written into one packed gradient the same way.
AttentionResults runPackedAttention(Device &dev, const AttentionCase &c,
                                    const std::vector<float> &q,
                                    const std::vector<float> &k,
                                    const std::vector<float> &v,
                                    const std::vector<float> &dout,
                                    int32_t dt) {
  int64_t es = dt == FSDPRT_F32 ? 4 : 2, tokens = c.batch * c.tq;
  int64_t qw = c.heads * c.headDim, kvw = c.kvHeads * c.headDim;
  int64_t row = qw + 2 * kvw, n = tokens * row;
  std::vector<float> packed;
  for (int64_t t = 0; t < tokens; ++t)
    for (auto [x, w] : {std::pair{&q, qw}, {&k, kvw}, {&v, kvw}})
      packed.insert(packed.end(), x->begin() + t * w, x->begin() + (t + 1) * w);
  auto narrow = [&](const std::vector<float> &x) -> int64_t {
    int64_t f = dev.upload(x), h = dev.alloc(x.size() * es);
    EXPECT_EQ(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, f, 0, dt, h, 0,
                          x.size()),
              FSDPRT_OK);
    return h;
  };
  // The forward keeps its statistics for the backward (as the compiler's
  // packed attention does).
  int64_t bqkv = narrow(packed), bdo = narrow(dout),
          bo = dev.alloc(tokens * qw * es), bd = dev.alloc(n * es),
          bs = dev.alloc(c.batch * c.heads * c.tq * 4);
  int64_t kOff = qw * es, vOff = (qw + kvw) * es;
  EXPECT_EQ(fsdprt_attention_forward(dev.ctx, dev.stream, dt, bqkv, 0, bqkv,
                                     kOff, bqkv, vOff, bo, 0, bs, 0, c.batch,
                                     c.tq, c.tk, c.heads, c.kvHeads, c.headDim,
                                     row, row, c.causal, c.scale, 0, 0, 0, 0),
            FSDPRT_OK)
      << fsdprt_last_error();
  EXPECT_EQ(fsdprt_attention_backward(dev.ctx, dev.stream, dt, bqkv, 0, bqkv,
                                      kOff, bqkv, vOff, bdo, 0, bo, 0, bs, 0,
                                      bd, 0, bd, kOff, bd, vOff, c.batch, c.tq,
                                      c.tk, c.heads, c.kvHeads, c.headDim, row,
                                      row, c.causal, c.scale, 0, 0, 0, 0, 0,
                                      0),
            FSDPRT_OK)
      << fsdprt_last_error();
  auto widened = [&](int64_t b, int64_t count) {
    int64_t f = dev.alloc(count * 4);
    EXPECT_EQ(fsdprt_cast(dev.ctx, dev.stream, dt, b, 0, FSDPRT_F32, f, 0,
                          count),
              FSDPRT_OK);
    return dev.download(f, count);
  };
  AttentionResults r;
  r.out = widened(bo, tokens * qw);
  std::vector<float> grads = widened(bd, n);
  for (int64_t t = 0; t < tokens; ++t) {
    auto at = grads.begin() + t * row;
    r.dq.insert(r.dq.end(), at, at + qw);
    r.dk.insert(r.dk.end(), at + qw, at + qw + kvw);
    r.dv.insert(r.dv.end(), at + qw + kvw, at + row);
  }
  return r;
}

void checkAttention(const std::string &backend, const AttentionCase &c) {
  Device dev(backend);
  int64_t qn = c.batch * c.tq * c.heads * c.headDim;
  int64_t kvn = c.batch * c.tk * c.kvHeads * c.headDim;
  auto q = randomVector(qn, 91), k = randomVector(kvn, 92),
       v = randomVector(kvn, 93), dout = randomVector(qn, 94),
       bias = randomVector(c.biasNumel(), 95);
  double scale = c.scale > 0 ? c.scale : 1.0 / std::sqrt(double(c.headDim));
  // Direct float64 transcription of softmax(QK^T * scale + bias + mask) V
  // per head.
  Reference ref = [&](const Inputs &in) {
    std::vector<double> out(qn, 0.0);
    int64_t group = c.heads / c.kvHeads;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads; ++h) {
        int64_t g = h / group;
        for (int64_t i = 0; i < c.tq; ++i) {
          std::vector<double> s(c.tk);
          double mx = -INFINITY;
          for (int64_t j = 0; j < c.tk; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < c.headDim; ++d)
              dot += in[0][((b * c.tq + i) * c.heads + h) * c.headDim + d] *
                     in[1][((b * c.tk + j) * c.kvHeads + g) * c.headDim + d];
            double bij = c.biasBatch ? in[3][c.biasAt(b, h, i, j)] : 0.0;
            s[j] = (c.causal && j > i) ? -INFINITY : dot * scale + bij;
            mx = std::max(mx, s[j]);
          }
          double sum = 0;
          for (double &e : s)
            sum += (e = std::exp(e - mx));
          for (int64_t j = 0; j < c.tk; ++j)
            for (int64_t d = 0; d < c.headDim; ++d)
              out[((b * c.tq + i) * c.heads + h) * c.headDim + d] +=
                  s[j] / sum *
                  in[2][((b * c.tk + j) * c.kvHeads + g) * c.headDim + d];
        }
      }
    return out;
  };
  AttentionResults got = runAttention(dev, c, q, k, v, dout, FSDPRT_F32, bias);
  Inputs in{toDouble(q), toDouble(k), toDouble(v)};
  if (c.biasBatch) {
    in.push_back(toDouble(bias));
    expectClose(got.out, ref(in), "out");
    expectGradients(ref, in, toDouble(dout),
                    {got.dq, got.dk, got.dv, got.dbias},
                    {"dq", "dk", "dv", "dbias"});
    return;
  }
  expectClose(got.out, ref(in), "out");
  expectGradients(ref, in, toDouble(dout), {got.dq, got.dk, got.dv},
                  {"dq", "dk", "dv"});
}

TEST_P(SequenceConformance, AttentionMultiHead) {
  checkAttention(GetParam(), {2, 4, 4, 2, 2, 3, false, 0});
}
TEST_P(SequenceConformance, AttentionCausal) {
  checkAttention(GetParam(), {1, 5, 5, 2, 2, 4, true, 0});
}
TEST_P(SequenceConformance, AttentionGroupedQueryCausalRectangular) {
  // Tq != Tk with a top-left aligned causal mask, 4 query heads on 2 kv heads.
  checkAttention(GetParam(), {2, 3, 5, 4, 2, 2, true, 0});
}
TEST_P(SequenceConformance, AttentionExplicitScale) {
  checkAttention(GetParam(), {1, 3, 4, 3, 1, 2, false, 0.7});
}
// An additive bias (a padding mask, T5's relative-position bias): one per
// batch element and head; broadcast over the batch with grouped heads and
// a causal mask; one for everything (its gradient sums them all).
TEST_P(SequenceConformance, AttentionBiasPerBatchAndHead) {
  checkAttention(GetParam(), {2, 4, 5, 2, 2, 3, false, 0, 2, 2});
}
TEST_P(SequenceConformance, AttentionBiasOverTheBatchCausalGrouped) {
  checkAttention(GetParam(), {2, 4, 4, 4, 2, 2, true, 0, 1, 4});
}
TEST_P(SequenceConformance, AttentionBiasSharedByAll) {
  checkAttention(GetParam(), {2, 3, 3, 2, 1, 2, false, 0.5, 1, 1});
}

/// Rows longer than a GPU block (256 threads) against float64 attention and
/// its analytic gradients (dV = P^T dO, dS = P (dP - rowsum(dP P)) with
/// dP = dO V^T, dQ = scale dS K, dK = scale dS^T Q): finite differences
/// would cost a forward per input element at this size.
struct AttentionReference {
  std::vector<double> out, dq, dk, dv, dbias;
};
AttentionReference longAttentionReference(const AttentionCase &c,
                                          const std::vector<float> &q,
                                          const std::vector<float> &k,
                                          const std::vector<float> &v,
                                          const std::vector<float> &dout,
                                          const std::vector<float> &bias = {}) {
  int64_t qn = q.size(), kvn = k.size();
  std::vector<double> dbias(bias.size(), 0.0);
  double scale = 1.0 / std::sqrt(double(c.headDim));
  int64_t group = c.heads / c.kvHeads, hd = c.headDim;
  auto qi = [&](int64_t b, int64_t i, int64_t h) {
    return ((b * c.tq + i) * c.heads + h) * hd;
  };
  auto ki = [&](int64_t b, int64_t j, int64_t g) {
    return ((b * c.tk + j) * c.kvHeads + g) * hd;
  };
  std::vector<double> out(qn, 0.0), dq(qn, 0.0), dk(kvn, 0.0), dv(kvn, 0.0);
  std::vector<double> p(c.tq * c.tk), ds(c.tq * c.tk);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h) {
      int64_t g = h / group;
      for (int64_t i = 0; i < c.tq; ++i) {
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < c.tk; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < hd; ++d)
            dot += double(q[qi(b, i, h) + d]) * k[ki(b, j, g) + d];
          double bij = bias.empty() ? 0.0 : bias[c.biasAt(b, h, i, j)];
          p[i * c.tk + j] = (c.causal && j > i) ? -INFINITY : dot * scale + bij;
          mx = std::max(mx, p[i * c.tk + j]);
        }
        for (int64_t j = 0; j < c.tk; ++j)
          sum += (p[i * c.tk + j] = std::exp(p[i * c.tk + j] - mx));
        double rowDot = 0.0;
        for (int64_t j = 0; j < c.tk; ++j) {
          double &pij = p[i * c.tk + j];
          pij /= sum;
          double dpij = 0.0;
          for (int64_t d = 0; d < hd; ++d) {
            out[qi(b, i, h) + d] += pij * v[ki(b, j, g) + d];
            dv[ki(b, j, g) + d] += pij * dout[qi(b, i, h) + d];
            dpij += double(dout[qi(b, i, h) + d]) * v[ki(b, j, g) + d];
          }
          ds[i * c.tk + j] = dpij;
          rowDot += dpij * pij;
        }
        for (int64_t j = 0; j < c.tk; ++j) {
          double dscore = p[i * c.tk + j] * (ds[i * c.tk + j] - rowDot);
          if (!bias.empty())
            dbias[c.biasAt(b, h, i, j)] += dscore;
          double dsij = dscore * scale;
          for (int64_t d = 0; d < hd; ++d) {
            dq[qi(b, i, h) + d] += dsij * k[ki(b, j, g) + d];
            dk[ki(b, j, g) + d] += dsij * q[qi(b, i, h) + d];
          }
        }
      }
    }
  return {out, dq, dk, dv, dbias};
}

void checkLongAttention(const std::string &backend, const AttentionCase &c) {
  Device dev(backend, 2, int64_t(256) << 20);
  int64_t qn = c.batch * c.tq * c.heads * c.headDim;
  int64_t kvn = c.batch * c.tk * c.kvHeads * c.headDim;
  auto q = randomVector(qn, 81), k = randomVector(kvn, 82),
       v = randomVector(kvn, 83), dout = randomVector(qn, 84),
       bias = randomVector(c.biasNumel(), 85);
  AttentionReference want = longAttentionReference(c, q, k, v, dout, bias);
  AttentionResults got = runAttention(dev, c, q, k, v, dout, FSDPRT_F32, bias);
  if (c.biasBatch)
    expectClose(got.dbias, want.dbias, "dbias");
  expectClose(got.out, want.out, "out");
  expectClose(got.dq, want.dq, "dq");
  expectClose(got.dk, want.dk, "dk");
  expectClose(got.dv, want.dv, "dv");
}

/// bf16 attention (on CUDA: cuDNN's fused kernels, which also round the
/// probabilities to bf16 before P V) against the float64 attention of the
/// same bf16 inputs: within a few bf16 roundings (2^-8 each) of the scale.
void checkBf16Attention(const std::string &backend, const AttentionCase &c) {
  Device dev(backend, 2, int64_t(256) << 20);
  int64_t qn = c.batch * c.tq * c.heads * c.headDim;
  int64_t kvn = c.batch * c.tk * c.kvHeads * c.headDim;
  auto bf16 = [](std::vector<float> x) {
    for (float &e : x)
      e = bf16ToFloat(floatToBf16(e));
    return x;
  };
  auto q = bf16(randomVector(qn, 71)), k = bf16(randomVector(kvn, 72)),
       v = bf16(randomVector(kvn, 73)), dout = bf16(randomVector(qn, 74)),
       bias = bf16(randomVector(c.biasNumel(), 75));
  AttentionReference want = longAttentionReference(c, q, k, v, dout, bias);
  AttentionResults got =
      runAttention(dev, c, q, k, v, dout, FSDPRT_BF16, bias);
  if (c.biasBatch)
    expectClose(got.dbias, want.dbias, "dbias", 3e-2, 2e-2);
  expectClose(got.out, want.out, "out", 3e-2, 2e-2);
  expectClose(got.dq, want.dq, "dq", 3e-2, 2e-2);
  expectClose(got.dk, want.dk, "dk", 3e-2, 2e-2);
  expectClose(got.dv, want.dv, "dv", 3e-2, 2e-2);
  // Deterministic: the same call again gives the same bits.
  AttentionResults again =
      runAttention(dev, c, q, k, v, dout, FSDPRT_BF16, bias);
  EXPECT_EQ(got.out, again.out);
  EXPECT_EQ(got.dq, again.dq);
  EXPECT_EQ(got.dk, again.dk);
  EXPECT_EQ(got.dv, again.dv);
}

// q, k, v as slices of one packed projection (and their gradients into one
// packed gradient) give the contiguous call's results bit for bit: causal
// grouped-query heads, f32 and bf16.
TEST_P(SequenceConformance, AttentionOnPackedQkvEqualsContiguous) {
  Device dev(GetParam());
  AttentionCase c{2, 24, 24, 4, 2, 8, true, 0.0};
  int64_t qn = c.batch * c.tq * c.heads * c.headDim;
  int64_t kvn = c.batch * c.tk * c.kvHeads * c.headDim;
  auto q = randomVector(qn, 96), k = randomVector(kvn, 97),
       v = randomVector(kvn, 98), dout = randomVector(qn, 99);
  for (int32_t dt : {FSDPRT_F32, FSDPRT_BF16}) {
    SCOPED_TRACE(::testing::Message() << "dtype " << dt);
    AttentionResults want = runAttention(dev, c, q, k, v, dout, dt);
    AttentionResults got = runPackedAttention(dev, c, q, k, v, dout, dt);
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.dq, want.dq);
    EXPECT_EQ(got.dk, want.dk);
    EXPECT_EQ(got.dv, want.dv);
    EXPECT_NE(got.dk, std::vector<float>(kvn, 0.0f));
  }
}

/// Each query row's log-sum-exp of its scaled, masked (and biased) scores in
/// float64: the softmax statistics, [batch, heads, tq].
std::vector<double> logSumExpRows(const AttentionCase &c,
                                  const std::vector<float> &q,
                                  const std::vector<float> &k,
                                  const std::vector<float> &bias) {
  double scale = 1.0 / std::sqrt(double(c.headDim));
  std::vector<double> out;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < c.tq; ++i) {
        int64_t g = h / (c.heads / c.kvHeads);
        int64_t live = c.causal ? std::min(i + 1, c.tk) : c.tk;
        std::vector<double> row;
        for (int64_t j = 0; j < live; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < c.headDim; ++e)
            dot += double(q[((b * c.tq + i) * c.heads + h) * c.headDim + e]) *
                   k[((b * c.tk + j) * c.kvHeads + g) * c.headDim + e];
          row.push_back(dot * scale +
                        (bias.empty() ? 0.0 : bias[c.biasAt(b, h, i, j)]));
        }
        double m = *std::max_element(row.begin(), row.end()), sum = 0;
        for (double x : row)
          sum += std::exp(x - m);
        out.push_back(m + std::log(sum));
      }
  return out;
}

// The forward's softmax statistics are each query row's log-sum-exp of its
// scaled, masked, biased scores (float64 reference on the values the device
// holds), and a backward given them with the forward's out computes what
// it computes without them, bit for bit: f32 and bf16, causal GQA, with a
// bias broadcast over the batch (the cuBLAS path on a GPU) and without
// (bf16: cuDNN's fused kernels where the device has them).
TEST_P(SequenceConformance, AttentionKeptStatisticsAreLogSumExpChangeNothing) {
  Device dev(GetParam());
  for (bool biased : {true, false}) {
    AttentionCase c{2, 5, 7, 4, 2, 8, true, 0.0, biased ? 1 : 0,
                    biased ? 4 : 0};
    int64_t qn = c.batch * c.tq * c.heads * c.headDim,
            kvn = c.batch * c.tk * c.kvHeads * c.headDim,
            sn = c.batch * c.heads * c.tq;
    auto q = randomVector(qn, 131), k = randomVector(kvn, 132),
         v = randomVector(kvn, 133), dout = randomVector(qn, 134),
         bias = randomVector(c.biasNumel(), 135);
    for (int32_t dt : {FSDPRT_F32, FSDPRT_BF16}) {
      SCOPED_TRACE(::testing::Message()
                   << "dtype " << dt << " bias " << biased);
      int64_t es = dt == FSDPRT_F32 ? 4 : 2;
      // The values as stored in dt, for the reference.
      auto held = [&](std::vector<float> x) {
        if (dt == FSDPRT_BF16)
          for (float &f : x)
            f = bf16ToFloat(floatToBf16(f));
        return x;
      };
      auto in = [&](const std::vector<float> &x) -> int64_t {
        if (x.empty())
          return 0;
        int64_t f = dev.upload(x), h = dev.alloc(x.size() * es);
        RT_EXPECT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, f, 0, dt, h,
                                 0, x.size()));
        return h;
      };
      int64_t bq = in(q), bk = in(k), bv = in(v), bdo = in(dout),
              bb = in(biased ? bias : std::vector<float>()),
              bo = dev.alloc(qn * es), bs = dev.alloc(sn * 4);
      RT_EXPECT_OK(fsdprt_attention_forward(
          dev.ctx, dev.stream, dt, bq, 0, bk, 0, bv, 0, bo, 0, bs, 0, c.batch,
          c.tq, c.tk, c.heads, c.kvHeads, c.headDim, 0, 0, c.causal, c.scale,
          bb, 0, c.biasBatch, c.biasHeads));
      expectClose(dev.download(bs, sn),
                  logSumExpRows(c, held(q), held(k),
                                biased ? held(bias) : std::vector<float>()),
                  "stats");
      std::vector<std::vector<uint8_t>> grads[2];
      for (bool kept : {false, true}) {
        int64_t bdq = dev.alloc(qn * es), bdk = dev.alloc(kvn * es),
                bdv = dev.alloc(kvn * es),
                bdb = biased ? dev.alloc(c.biasNumel() * es) : 0;
        RT_EXPECT_OK(fsdprt_attention_backward(
            dev.ctx, dev.stream, dt, bq, 0, bk, 0, bv, 0, bdo, 0,
            kept ? bo : 0, 0, kept ? bs : 0, 0, bdq, 0, bdk, 0, bdv, 0,
            c.batch, c.tq, c.tk, c.heads, c.kvHeads, c.headDim, 0, 0,
            c.causal, c.scale, bb, 0, bdb, 0, c.biasBatch, c.biasHeads));
        for (auto [b, n] : {std::pair{bdq, qn}, {bdk, kvn}, {bdv, kvn},
                            {bdb, c.biasNumel()}})
          if (b)
            grads[kept].push_back(dev.download<uint8_t>(b, n * es));
      }
      EXPECT_EQ(grads[true], grads[false]);
    }
  }
  // Out and statistics go together.
  int64_t b4 = dev.alloc(64 * 4);
  EXPECT_EQ(fsdprt_attention_backward(
                dev.ctx, dev.stream, FSDPRT_F32, b4, 0, b4, 0, b4, 0, b4, 0,
                b4, 0, 0, 0, b4, 0, 0, 0, 0, 0, 1, 2, 2, 2, 2, 2, 0, 0, 0, 0.0,
                0, 0, 0, 0, 0, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_last_error()).find("given together"),
            std::string::npos)
      << fsdprt_last_error();
}

TEST_P(SequenceConformance, AttentionLongRowsGroupedCausal) {
  checkLongAttention(GetParam(), {2, 300, 300, 4, 2, 16, true, 0});
}
TEST_P(SequenceConformance, AttentionLongRowsRectangular) {
  checkLongAttention(GetParam(), {1, 130, 600, 2, 1, 8, false, 0});
}
// Head dims of GPT-2 (64) and Llama (128) at the sizes fused kernels tile.
TEST_P(SequenceConformance, AttentionBf16GroupedCausal) {
  checkBf16Attention(GetParam(), {2, 256, 256, 4, 2, 64, true, 0});
}
TEST_P(SequenceConformance, AttentionBf16Rectangular) {
  checkBf16Attention(GetParam(), {1, 64, 200, 2, 2, 128, false, 0});
}
// A bias on rows longer than a GPU block (the per-head path on CUDA):
// one per head broadcast over the batch, causal, grouped; in bf16 one
// per batch element broadcast over the heads (a padding mask's shape).
TEST_P(SequenceConformance, AttentionLongRowsBiasOverTheBatch) {
  checkLongAttention(GetParam(), {2, 300, 300, 4, 2, 16, true, 0, 1, 4});
}
TEST_P(SequenceConformance, AttentionBf16BiasOverTheHeads) {
  checkBf16Attention(GetParam(), {2, 64, 200, 2, 2, 64, false, 0, 2, 1});
}

TEST_P(SequenceConformance, RopeInterleavedPairs) {
  Device dev(GetParam());
  const int64_t b = 2, t = 5, h = 2, d = 6;
  const double theta = 10000.0;
  const int64_t n = b * t * h * d;
  auto x = randomVector(n, 101), dy = randomVector(n, 102);
  Reference ref = [&](const Inputs &in) {
    std::vector<double> y(n);
    for (int64_t bt = 0; bt < b * t; ++bt)
      for (int64_t hh = 0; hh < h; ++hh)
        for (int64_t i = 0; i < d / 2; ++i) {
          double angle = (bt % t) * std::pow(theta, -2.0 * i / d);
          int64_t at = (bt * h + hh) * d + 2 * i;
          y[at] = in[0][at] * std::cos(angle) - in[0][at + 1] * std::sin(angle);
          y[at + 1] =
              in[0][at] * std::sin(angle) + in[0][at + 1] * std::cos(angle);
        }
    return y;
  };
  int64_t bx = dev.upload(x), bdy = dev.upload(dy), by = dev.alloc(n * 4),
          bdx = dev.alloc(n * 4);
  RT_OK(fsdprt_rope_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, by, 0, b, t,
                            h, d, theta));
  RT_OK(fsdprt_rope_backward(dev.ctx, dev.stream, FSDPRT_F32, bdy, 0, bdx, 0, b,
                             t, h, d, theta));
  Inputs in{toDouble(x)};
  expectClose(dev.download(by, n), ref(in), "y");
  expectGradients(ref, in, toDouble(dy), {dev.download(bdx, n)}, {"dx"});
}

template <typename Id>
void checkEmbedding(const std::string &backend, int32_t idsDtype) {
  Device dev(backend);
  const int64_t vocab = 7, dim = 5;
  // Repeated ids check the scatter-add of the backward.
  std::vector<Id> ids{3, 0, 6, 3, 3, 1};
  const int64_t num = ids.size();
  auto table = randomVector(vocab * dim, 111),
       dy = randomVector(num * dim, 112);
  Reference ref = [&](const Inputs &in) {
    std::vector<double> out(num * dim);
    for (int64_t i = 0; i < num; ++i)
      for (int64_t j = 0; j < dim; ++j)
        out[i * dim + j] = in[0][ids[i] * dim + j];
    return out;
  };
  int64_t bi = dev.upload(ids), bt = dev.upload(table), bdy = dev.upload(dy),
          bo = dev.alloc(num * dim * 4), bdt = dev.alloc(vocab * dim * 4);
  RT_OK(fsdprt_embedding_forward(dev.ctx, dev.stream, FSDPRT_F32, idsDtype, bi,
                                 0, bt, 0, bo, 0, num, vocab, dim));
  RT_OK(fsdprt_embedding_backward(dev.ctx, dev.stream, FSDPRT_F32, idsDtype, bi,
                                  0, bdy, 0, bdt, 0, num, vocab, dim));
  Inputs in{toDouble(table)};
  expectClose(dev.download(bo, num * dim), ref(in), "out");
  expectGradients(ref, in, toDouble(dy), {dev.download(bdt, vocab * dim)},
                  {"dtable"});
}

TEST_P(SequenceConformance, EmbeddingInt32Ids) {
  checkEmbedding<int32_t>(GetParam(), FSDPRT_I32);
}
TEST_P(SequenceConformance, EmbeddingInt64Ids) {
  checkEmbedding<int64_t>(GetParam(), FSDPRT_I64);
}

// Every backend sums an id's gradient rows in position order in f32 (the
// CPU's scatter-add): with ~40 repeats per id the bits show the order.
TEST_P(SequenceConformance, EmbeddingBackwardSumsInPositionOrder) {
  Device dev(GetParam());
  const int64_t vocab = 50, dim = 3, num = 2000;
  std::vector<int32_t> ids(num); // ids 48 and 49 never occur
  for (int64_t i = 0; i < num; ++i)
    ids[i] = static_cast<int32_t>((i * 7919 + i / 3) % (vocab - 2));
  auto dy = randomVector(num * dim, 117);
  std::vector<float> want(vocab * dim, 0.0f);
  for (int64_t i = 0; i < num; ++i)
    for (int64_t j = 0; j < dim; ++j)
      want[ids[i] * dim + j] += dy[i * dim + j];
  int64_t bi = dev.upload(ids), bdy = dev.upload(dy),
          bdt = dev.alloc(vocab * dim * 4);
  RT_OK(fsdprt_embedding_backward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_I32,
                                  bi, 0, bdy, 0, bdt, 0, num, vocab, dim));
  EXPECT_EQ(dev.download(bdt, vocab * dim), want);
}

// A bf16 table's gradient is the f32 one of the widened rows, rounded once,
// written without an f32 copy of the table (the device's high-water mark
// grows by less than the bf16 table during the call).
TEST_P(SequenceConformance, EmbeddingBackwardBf16IsTheF32SumRoundedOnce) {
  Device dev(GetParam());
  const int64_t vocab = 4000, dim = 64, num = 1500;
  std::vector<int32_t> ids(num); // repeats, and most ids never occur
  for (int64_t i = 0; i < num; ++i)
    ids[i] = static_cast<int32_t>((i * 7919) % 301 * 13);
  int64_t bi = dev.upload(ids), b32 = dev.upload(randomVector(num * dim, 118)),
          b16 = dev.alloc(num * dim * 2), wide = dev.alloc(num * dim * 4),
          dt16 = dev.alloc(vocab * dim * 2), dt32 = dev.alloc(vocab * dim * 4),
          want = dev.alloc(vocab * dim * 2);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, b32, 0, FSDPRT_BF16, b16,
                    0, num * dim));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_BF16, b16, 0, FSDPRT_F32, wide,
                    0, num * dim));
  RT_OK(fsdprt_embedding_backward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_I32,
                                  bi, 0, wide, 0, dt32, 0, num, vocab, dim));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, dt32, 0, FSDPRT_BF16,
                    want, 0, vocab * dim));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, dev.stream));
  int64_t held = 0, high = 0;
  RT_OK(fsdprt_device_high_water(dev.ctx, &held));
  RT_OK(fsdprt_embedding_backward(dev.ctx, dev.stream, FSDPRT_BF16, FSDPRT_I32,
                                  bi, 0, b16, 0, dt16, 0, num, vocab, dim));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, dev.stream));
  RT_OK(fsdprt_device_high_water(dev.ctx, &high));
  auto got = dev.download<uint16_t>(dt16, vocab * dim);
  EXPECT_EQ(got, dev.download<uint16_t>(want, vocab * dim));
  EXPECT_NE(got[ids[0] * dim], 0);
  if (held >= 0) // a device backend
    EXPECT_LT(high - held, vocab * dim * 2) << "scratch during the call";
}

TEST_P(SequenceConformance, EmbeddingOutOfRangeIdFailsAtSynchronize) {
  Device dev(GetParam());
  std::vector<int64_t> ids{1, 9, 0};
  auto table = randomVector(4 * 2, 113);
  int64_t bi = dev.upload(ids), bt = dev.upload(table),
          bo = dev.alloc(3 * 2 * 4);
  // Ids are data: the launch is accepted, the failure is reported by the
  // next synchronize and names the op and the bad id.
  RT_OK(fsdprt_embedding_forward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_I64,
                                 bi, 0, bt, 0, bo, 0, 3, 4, 2));
  EXPECT_EQ(fsdprt_stream_synchronize(dev.ctx, dev.stream),
            FSDPRT_ERR_OUT_OF_RANGE);
  std::string msg = fsdprt_last_error();
  EXPECT_NE(msg.find("embedding_forward"), std::string::npos) << msg;
  EXPECT_NE(msg.find("token id 9"), std::string::npos) << msg;
  // The error is reported once; the stream is usable afterwards.
  RT_OK(fsdprt_stream_synchronize(dev.ctx, dev.stream));
}

TEST_P(SequenceConformance, DropoutMatchesPhiloxMaskAndBackwardReusesIt) {
  Device dev(GetParam());
  const int64_t n = 1003;
  const double p = 0.3;
  const int64_t seed = 1234, step = 7, rngId = 2;
  auto x = randomVector(n, 121), dy = randomVector(n, 122);
  int64_t bx = dev.upload(x), bdy = dev.upload(dy), by = dev.alloc(n * 4),
          bdx = dev.alloc(n * 4);
  RT_OK(fsdprt_dropout_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, by, 0, n,
                               p, seed, step, rngId));
  RT_OK(fsdprt_dropout_backward(dev.ctx, dev.stream, FSDPRT_F32, bdy, 0, bdx, 0,
                                n, p, seed, step, rngId));
  // Mask from the counter RNG directly: element i is kept iff its uniform
  // number is >= p.
  std::vector<double> mask(n);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    mask[i] = philoxUniform(seed, step, rngId, i) >= static_cast<float>(p)
                  ? 1.0 / (1.0 - p)
                  : 0.0;
    kept += mask[i] != 0;
  }
  // 1003 Bernoulli(0.7) draws: mean 702, sd 14.5; 6 sd bounds.
  EXPECT_GT(kept, 615);
  EXPECT_LT(kept, 790);
  Reference ref = [&](const Inputs &in) {
    std::vector<double> y(n);
    for (int64_t i = 0; i < n; ++i)
      y[i] = in[0][i] * mask[i];
    return y;
  };
  Inputs in{toDouble(x)};
  expectClose(dev.download(by, n), ref(in), "y");
  expectGradients(ref, in, toDouble(dy), {dev.download(bdx, n)}, {"dx"});
  // A different step gives a different mask.
  RT_OK(fsdprt_dropout_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, by, 0, n,
                               p, seed, step + 1, rngId));
  EXPECT_NE(dev.download(by, n), dev.download(bdx, n));
}

TEST_P(SequenceConformance, RngFillUniformAndNormalMoments) {
  Device dev(GetParam());
  const int64_t n = 40000;
  int64_t buf = dev.alloc(n * 4);
  RT_OK(fsdprt_rng_fill(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_RNG_UNIFORM,
                        buf, 0, n, -2.0, 3.0, 5, 0, 0));
  auto u = dev.download(buf, n);
  double mean = 0;
  for (float v : u) {
    ASSERT_GE(v, -2.0f);
    ASSERT_LT(v, 3.0f);
    mean += v / n;
  }
  // Uniform(-2, 3): mean 0.5, sd of the mean 1.44/200 = 0.0072.
  EXPECT_NEAR(mean, 0.5, 0.05);
  RT_OK(fsdprt_rng_fill(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_RNG_NORMAL, buf,
                        0, n, 1.0, 2.0, 5, 0, 0));
  auto g = dev.download(buf, n);
  double m = 0, var = 0;
  for (float v : g)
    m += v / n;
  for (float v : g)
    var += (v - m) * (v - m) / n;
  EXPECT_NEAR(m, 1.0, 0.06);   // sd of the mean 0.01
  EXPECT_NEAR(var, 4.0, 0.25); // sd of the variance ~0.028
}

FSDPRT_INSTANTIATE_CONFORMANCE(SequenceConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
