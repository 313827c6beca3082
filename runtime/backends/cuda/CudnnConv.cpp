//===- CudnnConv.cpp - Convolutions through cuDNN's graphs ----------------===//
#include "CudnnConv.h"
#include "Cudnn.h"
#include "CudnnConvShape.h"
#include "Device.h"

#include <cudnn_frontend.h>

#include <array>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

// One uid per operand role: y is dy in the gradients, x dx, w dw.
enum Uid : int64_t { kX = 1, kW, kY };

enum class Kind { Forward, BackwardInput, BackwardWeight };

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::Forward:
    return "forward";
  case Kind::BackwardInput:
    return "input gradient";
  case Kind::BackwardWeight:
    return "weight gradient";
  }
  return "?";
}

fe::DataType_t ioType(DType dt) {
  return dt == DType::BF16  ? fe::DataType_t::BFLOAT16
         : dt == DType::F16 ? fe::DataType_t::HALF
                            : fe::DataType_t::FLOAT;
}

std::vector<int64_t> vec(const CudnnConvShape::Dims4 &d) {
  return {d.begin(), d.end()};
}
std::vector<int64_t> vec(const CudnnConvShape::Dims2 &d) {
  return {d.begin(), d.end()};
}

fe::graph::Tensor_attributes &place(fe::graph::Tensor_attributes &t, Uid uid,
                                    const CudnnConvShape::Dims4 &dim,
                                    const CudnnConvShape::Dims4 &stride) {
  return t.set_uid(uid).set_dim(vec(dim)).set_stride(vec(stride));
}

TensorPtr input(fe::graph::Graph &g, const char *name, Uid uid,
                const CudnnConvShape::Dims4 &dim,
                const CudnnConvShape::Dims4 &stride) {
  fe::graph::Tensor_attributes t;
  place(t.set_name(name), uid, dim, stride);
  return g.tensor(t);
}

/// The three attribute classes share their setters but no base.
template <typename Attrs> Attrs window(const CudnnConvShape &s) {
  Attrs a;
  a.set_pre_padding(vec(s.prePadding))
      .set_post_padding(vec(s.postPadding))
      .set_stride(vec(s.stride))
      .set_dilation(vec(s.dilation));
  return a;
}

std::shared_ptr<fe::graph::Graph> describe(Kind kind, DType dt,
                                           const CudnnConvShape &s) {
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(ioType(dt))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  switch (kind) {
  case Kind::Forward: {
    TensorPtr x = input(*g, "x", kX, s.xDim, s.xStride);
    TensorPtr w = input(*g, "w", kW, s.wDim, s.wStride);
    TensorPtr y = g->conv_fprop(
        x, w, window<fe::graph::Conv_fprop_attributes>(s).set_name("fprop"));
    place(y->set_output(true), kY, s.yDim, s.yStride);
    break;
  }
  case Kind::BackwardInput: {
    TensorPtr dy = input(*g, "dy", kY, s.yDim, s.yStride);
    TensorPtr w = input(*g, "w", kW, s.wDim, s.wStride);
    TensorPtr dx = g->conv_dgrad(
        dy, w, window<fe::graph::Conv_dgrad_attributes>(s).set_name("dgrad"));
    place(dx->set_output(true), kX, s.xDim, s.xStride);
    break;
  }
  case Kind::BackwardWeight: {
    TensorPtr dy = input(*g, "dy", kY, s.yDim, s.yStride);
    TensorPtr x = input(*g, "x", kX, s.xDim, s.xStride);
    TensorPtr dw = g->conv_wgrad(
        dy, x, window<fe::graph::Conv_wgrad_attributes>(s).set_name("wgrad"));
    place(dw->set_output(true), kW, s.wDim, s.wStride);
    break;
  }
  }
  return g;
}

/// The engines PyTorch's cuDNN convolutions bar (aten's Conv_v8.cpp
/// filter): those that down-convert inputs always, TF32 tensor cores for
/// f32 unless allowed, non-deterministic ones in deterministic mode.
std::vector<fe::NumericalNote_t> barredNotes(DType dt, bool tf32) {
  std::vector<fe::NumericalNote_t> notes{
      fe::NumericalNote_t::DOWN_CONVERT_INPUTS};
  if (dt == DType::F32 && !tf32)
    notes.push_back(fe::NumericalNote_t::TENSOR_CORE);
  if (cudnnDeterministic())
    notes.push_back(fe::NumericalNote_t::NONDETERMINISTIC);
  return notes;
}

std::string describeGeometry(Kind kind, DType dt, const ConvGeometry &g) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "%s %s x=[%lld,%lld,%lld,%lld] w=[%lld,%lld,%lld,%lld] "
                "stride=%lldx%lld pad=%lldx%lld dilation=%lldx%lld "
                "groups=%lld",
                dtypeName(dt), kindName(kind), (long long)g.n, (long long)g.c,
                (long long)g.h, (long long)g.w, (long long)g.o,
                (long long)g.groupInputs(), (long long)g.kh, (long long)g.kw,
                (long long)g.strideH, (long long)g.strideW, (long long)g.padH,
                (long long)g.padW, (long long)g.dilationH,
                (long long)g.dilationW, (long long)g.groups);
  return buf;
}

} // namespace

struct CudnnConv::Impl {
  cudaStream_t stream;
  cudnnHandle_t handle = nullptr;
  bool tf32 = false;

  /// A built graph and its workspace, or why none could be built.
  struct Built {
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace = 0;
    std::string why;
  };
  using Key = std::array<int64_t, 18>; // kind, dtype, the geometry
  std::map<Key, Built> graphs;

  /// The graph for this convolution, built on first use.
  const Built &graphFor(Kind kind, DType dt, const ConvGeometry &g) {
    Key key{int64_t(kind), int64_t(dt), g.n,       g.c,    g.h,
            g.w,           g.o,         g.kh,      g.kw,   g.oh,
            g.ow,          g.strideH,   g.strideW, g.padH, g.padW,
            g.dilationH,   g.dilationW, g.groups};
    auto it = graphs.find(key);
    if (it != graphs.end())
      return it->second;
    Built built;
    CudnnConvShape shape;
    if (cudnnConvShape(g, shape, built.why))
      build(built, kind, dt, shape);
    if (!built.why.empty()) {
      built.graph.reset();
      built.why = "no cuDNN convolution for " + describeGeometry(kind, dt, g) +
                  ": " + built.why;
    }
    return graphs.emplace(key, std::move(built)).first->second;
  }

  void build(Built &built, Kind kind, DType dt, const CudnnConvShape &shape) {
    try {
      built.graph = describe(kind, dt, shape);
      fe::graph::Graph &g = *built.graph;
      fe::error_t st = g.validate();
      if (st.is_good())
        st = g.build_operation_graph(handle);
      if (st.is_good())
        st = g.create_execution_plans(
            {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
      if (st.is_good()) {
        g.deselect_numeric_notes(barredNotes(dt, tf32));
        st = g.check_support();
      }
      if (st.is_good())
        st = g.build_plans();
      if (st.is_good())
        st = g.get_workspace_size(built.workspace);
      if (!st.is_good())
        built.why = st.get_message();
    } catch (const std::exception &e) {
      built.why = e.what();
    }
  }

  bool run(Kind kind, DType dt, const ConvGeometry &g, const void *x,
           const void *w, const void *y, std::string &why) {
    const Built &built = graphFor(kind, dt, g);
    if (!built.graph) {
      why = built.why;
      return false;
    }
    std::unordered_map<int64_t, void *> pack{{kX, const_cast<void *>(x)},
                                             {kW, const_cast<void *>(w)},
                                             {kY, const_cast<void *>(y)}};
    Scratch workspace(stream, built.workspace);
    fe::error_t st = built.graph->execute(handle, pack, workspace.as<void>());
    if (!st.is_good())
      fail(Status::Internal, "cuda backend: cuDNN convolution ", kindName(kind),
           ": ", st.get_message());
    return true;
  }
};

CudnnConv::CudnnConv(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

CudnnConv::~CudnnConv() { destroyCudnnHandle(impl_->handle); }

std::unique_ptr<CudnnConv> CudnnConv::create(cudaStream_t stream, bool tf32,
                                             std::string &why) {
  cudnnHandle_t handle = createCudnnHandle(stream, why);
  if (!handle)
    return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->stream = stream;
  impl->handle = handle;
  impl->tf32 = tf32;
  return std::unique_ptr<CudnnConv>(new CudnnConv(std::move(impl)));
}

bool CudnnConv::forward(DType dt, const void *x, const void *w, void *y,
                        const ConvGeometry &g, std::string &why) {
  return impl_->run(Kind::Forward, dt, g, x, w, y, why);
}

bool CudnnConv::backwardInput(DType dt, const void *dy, const void *w, void *dx,
                              const ConvGeometry &g, std::string &why) {
  return impl_->run(Kind::BackwardInput, dt, g, dx, w, dy, why);
}

bool CudnnConv::backwardWeight(DType dt, const void *dy, const void *x,
                               void *dw, const ConvGeometry &g,
                               std::string &why) {
  return impl_->run(Kind::BackwardWeight, dt, g, x, dw, dy, why);
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
