//===- FusedAttention.cpp - Attention through cuDNN's fused SDPA ----------===//
#include "FusedAttention.h"
#include "Cudnn.h"
#include "Device.h"

#include <cudnn_frontend.h>

#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDO, kDQ, kDK, kDV };

enum class Kind { Forward, ForwardWithStats, Backward };

/// A [batch, heads, seq, headDim] view of the runtime's [batch, seq, heads,
/// headDim] storage, tokens `row` elements apart (heads * hd, or more for
/// the slices of a packed q / k / v projection).
fe::graph::Tensor_attributes &bshd(fe::graph::Tensor_attributes &t,
                                   int64_t b, int64_t heads, int64_t seq,
                                   int64_t hd, int64_t row) {
  return t.set_dim({b, heads, seq, hd}).set_stride({seq * row, hd, row, 1});
}

TensorPtr input(fe::graph::Graph &g, const char *name, Uid uid, int64_t b,
                int64_t heads, int64_t seq, int64_t hd, int64_t row) {
  fe::graph::Tensor_attributes t;
  bshd(t.set_name(name).set_uid(uid), b, heads, seq, hd, row);
  return g.tensor(t);
}

/// The softmax statistics (log-sum-exp per query row), f32 [b, h, tq, 1].
void setStats(fe::graph::Tensor_attributes &t, const AttentionDims &d) {
  t.set_uid(kStats)
      .set_data_type(fe::DataType_t::FLOAT)
      .set_dim({d.batch, d.heads, d.tq, 1})
      .set_stride({d.heads * d.tq, d.tq, 1, 1});
}

std::shared_ptr<fe::graph::Graph> describe(Kind kind, DType dt,
                                           const AttentionDims &d) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(dt == DType::BF16 ? fe::DataType_t::BFLOAT16
                                        : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  int64_t b = d.batch, h = d.heads, kvh = d.kvHeads, hd = d.headDim;
  int64_t qRow = d.qRowStride(), kvRow = d.kvRowStride(), oRow = h * hd;
  TensorPtr q = input(*g, "q", kQ, b, h, d.tq, hd, qRow);
  TensorPtr k = input(*g, "k", kK, b, kvh, d.tk, hd, kvRow);
  TensorPtr v = input(*g, "v", kV, b, kvh, d.tk, hd, kvRow);
  float scale = static_cast<float>(d.scale);
  if (kind != Kind::Backward) {
    auto attrs = fe::graph::SDPA_attributes()
                     .set_name("attention")
                     .set_generate_stats(kind == Kind::ForwardWithStats)
                     .set_causal_mask(d.causal)
                     .set_attn_scale(scale);
    auto [o, stats] = g->sdpa(q, k, v, attrs);
    bshd(o->set_output(true).set_uid(kO), b, h, d.tq, hd, oRow);
    if (kind == Kind::ForwardWithStats)
      setStats(stats->set_output(true), d);
    return g;
  }
  TensorPtr o = input(*g, "o", kO, b, h, d.tq, hd, oRow);
  TensorPtr dO = input(*g, "dO", kDO, b, h, d.tq, hd, oRow);
  fe::graph::Tensor_attributes statsAttrs;
  setStats(statsAttrs.set_name("stats"), d);
  TensorPtr stats = g->tensor(statsAttrs);
  // The deterministic backward (the default) keeps dQ's partial sums in a
  // workspace of 8 x B.H.T.D f32 (201 MB for GPT-2 124M at batch 8 x 1024);
  // the other adds them atomically, as PyTorch's default SDPA backward.
  auto attrs = fe::graph::SDPA_backward_attributes()
                   .set_name("attention_backward")
                   .set_causal_mask(d.causal)
                   .set_attn_scale(scale)
                   .set_deterministic_algorithm(cudnnDeterministic());
  auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, attrs);
  bshd(dq->set_output(true).set_uid(kDQ), b, h, d.tq, hd, qRow);
  bshd(dk->set_output(true).set_uid(kDK), b, kvh, d.tk, hd, kvRow);
  bshd(dv->set_output(true).set_uid(kDV), b, kvh, d.tk, hd, kvRow);
  return g;
}

std::string describeDims(DType dt, const AttentionDims &d) {
  char buf[160];
  std::snprintf(buf, sizeof(buf),
                "%s batch=%lld tq=%lld tk=%lld heads=%lld kv_heads=%lld "
                "head_dim=%lld%s",
                dtypeName(dt), (long long)d.batch, (long long)d.tq,
                (long long)d.tk, (long long)d.heads, (long long)d.kvHeads,
                (long long)d.headDim, d.causal ? " causal" : "");
  return buf;
}

} // namespace

struct FusedAttention::Impl {
  cudaStream_t stream;
  cudnnHandle_t handle = nullptr;

  /// A built graph and its workspace, or why none could be built.
  struct Built {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace = 0;
    std::string why;
  };
  using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, bool, double, int64_t, int64_t>;
  std::map<Key, Built> graphs;

  /// The graph for these dims, built on first use (a few hundred ms).
  const Built &graphFor(Kind kind, DType dt, const AttentionDims &d) {
    Key key{int(kind),     int(dt),         d.batch,   d.tq,
            d.tk,          d.heads,         d.kvHeads, d.headDim,
            d.causal,      d.scale,         d.qRowStride(), d.kvRowStride()};
    auto it = graphs.find(key);
    if (it != graphs.end())
      return it->second;
    Built built;
    try {
      built.graph = describe(kind, dt, d);
      fe::error_t st = built.graph->build(handle, {fe::HeurMode_t::A});
      if (st.is_good())
        st = built.graph->get_workspace_size(built.workspace);
      if (!st.is_good())
        built.why = st.get_message();
    } catch (const std::exception &e) {
      built.why = e.what();
    }
    if (!built.why.empty()) {
      built.graph.reset();
      built.why = "no cuDNN fused attention for " + describeDims(dt, d) +
                  ": " + built.why;
    }
    return graphs.emplace(key, std::move(built)).first->second;
  }

  void execute(const Built &built, std::unordered_map<int64_t, void *> pack) {
    Scratch workspace(stream, built.workspace);
    fe::error_t st = built.graph->execute(handle, pack, workspace.as<void>());
    if (!st.is_good())
      fail(Status::Internal, "cuda backend: cuDNN fused attention: ",
           st.get_message());
  }
};

FusedAttention::FusedAttention(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

FusedAttention::~FusedAttention() { destroyCudnnHandle(impl_->handle); }

std::unique_ptr<FusedAttention> FusedAttention::create(cudaStream_t stream,
                                                       std::string &why) {
  cudnnHandle_t handle = createCudnnHandle(stream, why);
  if (!handle)
    return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->stream = stream;
  impl->handle = handle;
  return std::unique_ptr<FusedAttention>(new FusedAttention(std::move(impl)));
}

bool FusedAttention::forward(DType dt, const void *q, const void *k,
                             const void *v, void *out, float *stats,
                             const AttentionDims &d, std::string &why) {
  const Impl::Built &fwd =
      impl_->graphFor(stats ? Kind::ForwardWithStats : Kind::Forward, dt, d);
  if (!fwd.graph) {
    why = fwd.why;
    return false;
  }
  std::unordered_map<int64_t, void *> pack{{kQ, const_cast<void *>(q)},
                                           {kK, const_cast<void *>(k)},
                                           {kV, const_cast<void *>(v)},
                                           {kO, out}};
  if (stats)
    pack[kStats] = stats;
  impl_->execute(fwd, pack);
  return true;
}

bool FusedAttention::backward(DType dt, const void *q, const void *k,
                              const void *v, const void *dout,
                              const void *out, const float *stats, void *dq,
                              void *dk, void *dv, const AttentionDims &d,
                              std::string &why) {
  bool kept = out && stats;
  const Impl::Built *fwd =
      kept ? nullptr : &impl_->graphFor(Kind::ForwardWithStats, dt, d);
  const Impl::Built &bwd = impl_->graphFor(Kind::Backward, dt, d);
  if ((fwd && !fwd->graph) || !bwd.graph) {
    why = fwd && !fwd->graph ? fwd->why : bwd.why;
    return false;
  }
  int64_t oBytes = d.batch * d.tq * d.heads * d.headDim * dtypeSize(dt);
  int64_t qBytes = d.qExtent() * dtypeSize(dt);
  int64_t kvBytes = d.kvExtent() * dtypeSize(dt);
  cudaStream_t s = impl_->stream;
  // The forward's out and statistics, kept by it or made again here.
  Scratch madeO(s, kept ? 0 : oBytes),
      madeStats(s, kept ? 0 : d.batch * d.heads * d.tq * 4);
  void *o = kept ? const_cast<void *>(out) : madeO.as<void>();
  void *st = kept ? const_cast<float *>(stats) : madeStats.as<void>();
  // cuDNN writes all three gradients: the ones not wanted go to scratch.
  Scratch noDq(s, dq ? 0 : qBytes), noDk(s, dk ? 0 : kvBytes),
      noDv(s, dv ? 0 : kvBytes);
  void *qv = const_cast<void *>(q), *kv = const_cast<void *>(k),
       *vv = const_cast<void *>(v);
  if (fwd)
    impl_->execute(*fwd,
                   {{kQ, qv}, {kK, kv}, {kV, vv}, {kO, o}, {kStats, st}});
  impl_->execute(bwd, {{kQ, qv},
                       {kK, kv},
                       {kV, vv},
                       {kO, o},
                       {kStats, st},
                       {kDO, const_cast<void *>(dout)},
                       {kDQ, dq ? dq : noDq.as<void>()},
                       {kDK, dk ? dk : noDk.as<void>()},
                       {kDV, dv ? dv : noDv.as<void>()}});
  return true;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
