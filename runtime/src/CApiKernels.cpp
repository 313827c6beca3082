//===- CApiKernels.cpp - C ABI: nn kernels --------------------------------===//
//
// Each entry point validates dims and operand extents on the calling thread,
// then enqueues the backend call. Shapes passed by pointer are copied before
// returning: the caller's arrays need not outlive the call.
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

void requirePositive(int64_t v, const char *what) {
  if (v <= 0)
    fail(Status::InvalidArgument, what, " must be positive, got ", v);
}

Activation activationFromCode(int32_t kind) {
  if (kind < FSDPRT_RELU || kind > FSDPRT_SILU)
    fail(Status::InvalidArgument, "unknown activation kind ", kind);
  return static_cast<Activation>(kind);
}

UnaryMath unaryFromCode(int32_t kind) {
  if (kind < FSDPRT_UNARY_TANH || kind > FSDPRT_UNARY_CLAMP)
    fail(Status::InvalidArgument, "unknown unary math kind ", kind);
  return static_cast<UnaryMath>(kind);
}

BinaryOp binaryFromCode(int32_t op) {
  if (op < FSDPRT_ADD || op > FSDPRT_DIV)
    fail(Status::InvalidArgument, "unknown binary op ", op);
  return static_cast<BinaryOp>(op);
}

LossReduction reductionFromCode(int32_t r) {
  if (r != FSDPRT_LOSS_MEAN && r != FSDPRT_LOSS_SUM)
    fail(Status::InvalidArgument, "unknown loss reduction ", r,
         " (0 = mean, 1 = sum)");
  return static_cast<LossReduction>(r);
}

DType indexDType(int32_t code, const char *what) {
  DType t = dtypeFromCode(code, what);
  if (t != DType::I32 && t != DType::I64)
    fail(Status::InvalidArgument, what,
         ": index dtype must be I32 or I64, got ", dtypeName(t));
  return t;
}

int32_t normalizeDim(int64_t dim, size_t rank, const char *what) {
  int64_t r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= r)
    fail(Status::InvalidArgument, what, " ", dim, " is out of range for rank ",
         rank);
  return static_cast<int32_t>(dim < 0 ? dim + r : dim);
}

/// outer, size, inner of a shape around `dim`.
struct Around {
  int64_t outer = 1, size, inner = 1;
  Around(const Shape &s, int32_t dim) : size(s[dim]) {
    for (int32_t i = 0; i < dim; ++i)
      outer *= s[i];
    for (size_t i = dim + 1; i < s.size(); ++i)
      inner *= s[i];
  }
};

MatmulDims matmulDims(int64_t batch, int64_t m, int64_t k, int64_t n,
                      int32_t transA, int32_t transB, int32_t bBatched) {
  for (auto [v, what] :
       {std::pair{batch, "batch"}, {m, "m"}, {k, "k"}, {n, "n"}})
    nonNegative(v, what);
  return MatmulDims{batch, m, k, n, transA != 0, transB != 0, bBatched != 0};
}

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

std::vector<int64_t> sortedDims(int32_t numDims, const int64_t *dims,
                                size_t rank) {
  if (numDims < 0 || (numDims > 0 && !dims))
    fail(Status::InvalidArgument, "invalid dims list");
  std::vector<int64_t> out;
  for (int32_t i = 0; i < numDims; ++i)
    out.push_back(normalizeDim(dims[i], rank, "reduce dim"));
  std::sort(out.begin(), out.end());
  if (std::adjacent_find(out.begin(), out.end()) != out.end())
    fail(Status::InvalidArgument, "reduce dims contain a duplicate");
  return out;
}

int64_t keptNumel(const Shape &shape, const std::vector<int64_t> &dims) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (!std::binary_search(dims.begin(), dims.end(), int64_t(i)))
      n *= shape[i];
  return n;
}

std::vector<int64_t> checkedPerm(int32_t rank, const int64_t *perm) {
  if (rank > 0 && !perm)
    fail(Status::InvalidArgument, "null permutation");
  std::vector<int64_t> p(perm, perm + rank);
  std::vector<bool> seen(rank, false);
  for (int64_t v : p) {
    if (v < 0 || v >= rank || seen[v])
      fail(Status::InvalidArgument, "perm is not a permutation of [0, ", rank,
           ")");
    seen[v] = true;
  }
  return p;
}

/// Checks y = f(x) over `numel` elements and enqueues
/// kernel(backend, dtype, x, y) (activations, unary math).
template <typename Kernel>
void enqueuePointwise(Launch &l, int64_t x, int64_t x_off, int64_t y,
                      int64_t y_off, int64_t numel, Kernel kernel) {
  nonNegative(numel, "numel");
  const void *px = l.operand(x, x_off, numel, "x");
  void *py = l.operand(y, y_off, numel, "y");
  Backend &be = l.backend();
  DType dt = l.dtype();
  l.enqueue([=, &be] { kernel(be, dt, px, py); });
}

/// The backward of a pointwise op: dx from x and dy, kernel(backend,
/// dtype, x, dy, dx).
template <typename Kernel>
void enqueuePointwiseBackward(Launch &l, int64_t x, int64_t x_off, int64_t dy,
                              int64_t dy_off, int64_t dx, int64_t dx_off,
                              int64_t numel, Kernel kernel) {
  nonNegative(numel, "numel");
  const void *px = l.operand(x, x_off, numel, "x");
  const void *pdy = l.operand(dy, dy_off, numel, "dy");
  void *pdx = l.operand(dx, dx_off, numel, "dx");
  Backend &be = l.backend();
  DType dt = l.dtype();
  l.enqueue([=, &be] { kernel(be, dt, px, pdy, pdx); });
}

/// x's [xStart, xStart + size) along the dim lands at y's [yStart, ...);
/// y has ySize there and is first filled with `fill` if given.
struct Window {
  int64_t xStart, yStart, size, ySize;
  std::optional<double> fill;
};
/// slice and pad: `window` maps the size of x's dim to the copy.
template <typename WindowOf>
void copyWindow(const char *op, int64_t ctx, int64_t stream, int32_t dtype,
                int64_t x, int64_t x_off, int32_t rank, const int64_t *shape,
                int32_t dim, WindowOf windowOf, int64_t y, int64_t y_off) {
  Launch l(ctx, stream, op);
  DType dt = dtypeFromCode(dtype, "dtype");
  Shape s = shapeFromAbi(rank, shape, "shape");
  if (s.empty())
    fail(Status::InvalidArgument, "cannot ", op, " a rank-0 tensor");
  Around a(s, normalizeDim(dim, s.size(), "dim"));
  Window w = windowOf(a.size);
  const void *px = l.operand(x, x_off, numelOf(s), dt, "x");
  int64_t yNumel = mul(a.outer, mul(w.ySize, a.inner));
  void *py = l.operand(y, y_off, yNumel, dt, "y");
  Backend &be = l.backend();
  l.enqueue([=, &be] {
    if (w.fill)
      be.fill(dt, py, yNumel, *w.fill);
    be.copySlab(dt, px, a.size, w.xStart, py, w.ySize, w.yStart, a.outer,
                w.size, a.inner);
  });
}

} // namespace

extern "C" {

int32_t fsdprt_linear_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t x, int64_t x_off, int64_t w,
                              int64_t w_off, int64_t b, int64_t b_off,
                              int64_t y, int64_t y_off, int64_t m, int64_t k,
                              int64_t n) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "linear_forward");
    nonNegative(m, "m"), nonNegative(k, "k"), nonNegative(n, "n");
    const void *px = l.operand(x, x_off, mul(m, k), "x");
    const void *pw = l.operand(w, w_off, mul(n, k), "w");
    const void *pb = l.optional(b, b_off, n, "b");
    void *py = l.operand(y, y_off, mul(m, n), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.linearForward(dt, px, pw, pb, py, m, k, n); });
  });
}

int32_t fsdprt_linear_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t w,
                               int64_t w_off, int64_t dy, int64_t dy_off,
                               int64_t dx, int64_t dx_off, int64_t dw,
                               int64_t dw_off, int64_t db, int64_t db_off,
                               int64_t m, int64_t k, int64_t n) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "linear_backward");
    nonNegative(m, "m"), nonNegative(k, "k"), nonNegative(n, "n");
    const void *px = l.operand(x, x_off, mul(m, k), "x");
    const void *pw = l.operand(w, w_off, mul(n, k), "w");
    const void *pdy = l.operand(dy, dy_off, mul(m, n), "dy");
    void *pdx = l.optional(dx, dx_off, mul(m, k), "dx");
    void *pdw = l.optional(dw, dw_off, mul(n, k), "dw");
    void *pdb = l.optional(db, db_off, n, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.linearBackward(dt, px, pw, pdy, pdx, pdw, pdb, m, k, n);
    });
  });
}

int32_t fsdprt_matmul_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t a, int64_t a_off, int64_t b,
                              int64_t b_off, int64_t c, int64_t c_off,
                              int64_t batch, int64_t m, int64_t k, int64_t n,
                              int32_t trans_a, int32_t trans_b,
                              int32_t b_batched) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "matmul_forward");
    MatmulDims d = matmulDims(batch, m, k, n, trans_a, trans_b, b_batched);
    const void *pa = l.operand(a, a_off, mul(batch, mul(m, k)), "a");
    const void *pb =
        l.operand(b, b_off, mul(d.bBatched ? batch : 1, mul(k, n)), "b");
    void *pc = l.operand(c, c_off, mul(batch, mul(m, n)), "c");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.matmulForward(dt, pa, pb, pc, d); });
  });
}

int32_t fsdprt_matmul_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t a, int64_t a_off, int64_t b,
                               int64_t b_off, int64_t dc, int64_t dc_off,
                               int64_t da, int64_t da_off, int64_t db,
                               int64_t db_off, int64_t batch, int64_t m,
                               int64_t k, int64_t n, int32_t trans_a,
                               int32_t trans_b, int32_t b_batched) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "matmul_backward");
    MatmulDims d = matmulDims(batch, m, k, n, trans_a, trans_b, b_batched);
    int64_t bNumel = mul(d.bBatched ? batch : 1, mul(k, n));
    const void *pa = l.operand(a, a_off, mul(batch, mul(m, k)), "a");
    const void *pb = l.operand(b, b_off, bNumel, "b");
    const void *pdc = l.operand(dc, dc_off, mul(batch, mul(m, n)), "dc");
    void *pda = l.optional(da, da_off, mul(batch, mul(m, k)), "da");
    void *pdb = l.optional(db, db_off, bNumel, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.matmulBackward(dt, pa, pb, pdc, pda, pdb, d); });
  });
}

int32_t fsdprt_binary_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t op, int64_t a, int64_t a_off,
                              int32_t a_rank, const int64_t *a_shape, int64_t b,
                              int64_t b_off, int32_t b_rank,
                              const int64_t *b_shape, int64_t out,
                              int64_t out_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "binary_forward");
    BinaryOp bop = binaryFromCode(op);
    Shape as = shapeFromAbi(a_rank, a_shape, "a_shape");
    Shape bs = shapeFromAbi(b_rank, b_shape, "b_shape");
    Shape os = broadcastShapes(as, bs);
    const void *pa = l.operand(a, a_off, numelOf(as), "a");
    const void *pb = l.operand(b, b_off, numelOf(bs), "b");
    void *po = l.operand(out, out_off, numelOf(os), "out");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.binaryForward(dt, bop, pa, as, pb, bs, po); });
  });
}

int32_t fsdprt_binary_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int32_t op, int64_t a, int64_t a_off,
                               int32_t a_rank, const int64_t *a_shape,
                               int64_t b, int64_t b_off, int32_t b_rank,
                               const int64_t *b_shape, int64_t dout,
                               int64_t dout_off, int64_t da, int64_t da_off,
                               int64_t db, int64_t db_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "binary_backward");
    BinaryOp bop = binaryFromCode(op);
    Shape as = shapeFromAbi(a_rank, a_shape, "a_shape");
    Shape bs = shapeFromAbi(b_rank, b_shape, "b_shape");
    Shape os = broadcastShapes(as, bs);
    // a and b are read only by mul's and div's; add/sub accept buffer 0.
    bool needValues = bop == BinaryOp::Mul || bop == BinaryOp::Div;
    const void *pa = needValues ? l.operand(a, a_off, numelOf(as), "a")
                                : l.optional(a, a_off, numelOf(as), "a");
    const void *pb = needValues ? l.operand(b, b_off, numelOf(bs), "b")
                                : l.optional(b, b_off, numelOf(bs), "b");
    const void *pd = l.operand(dout, dout_off, numelOf(os), "dout");
    void *pda = l.optional(da, da_off, numelOf(as), "da");
    void *pdb = l.optional(db, db_off, numelOf(bs), "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue(
        [=, &be] { be.binaryBackward(dt, bop, pa, as, pb, bs, pd, pda, pdb); });
  });
}

static int32_t scaleImpl(const char *fn, const char *op, int64_t ctx,
                         int64_t stream, int32_t dtype, int64_t x,
                         int64_t x_off, int64_t y, int64_t y_off, int64_t numel,
                         double factor) {
  return guarded(fn, [&] {
    Launch l(ctx, stream, dtype, op);
    nonNegative(numel, "numel");
    const void *px = l.operand(x, x_off, numel, "x");
    void *py = l.operand(y, y_off, numel, "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.scale(dt, px, py, numel, factor); });
  });
}

int32_t fsdprt_scale_forward(int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t x, int64_t x_off, int64_t y, int64_t y_off,
                             int64_t numel, double factor) {
  return scaleImpl(__func__, "scale_forward", ctx, stream, dtype, x, x_off, y,
                   y_off, numel, factor);
}

int32_t fsdprt_scale_backward(int64_t ctx, int64_t stream, int32_t dtype,
                              int64_t dy, int64_t dy_off, int64_t dx,
                              int64_t dx_off, int64_t numel, double factor) {
  return scaleImpl(__func__, "scale_backward", ctx, stream, dtype, dy, dy_off,
                   dx, dx_off, numel, factor);
}

int32_t fsdprt_unary_forward(int64_t ctx, int64_t stream, int32_t dtype,
                             int32_t kind, int64_t x, int64_t x_off, int64_t y,
                             int64_t y_off, int64_t numel, double a, double b) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "unary_forward");
    UnaryMath op = unaryFromCode(kind);
    enqueuePointwise(l, x, x_off, y, y_off, numel,
                     [=](Backend &be, DType dt, const void *px, void *py) {
                       be.unaryForward(dt, op, px, py, numel, a, b);
                     });
  });
}

int32_t fsdprt_unary_backward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t kind, int64_t x, int64_t x_off,
                              int64_t dy, int64_t dy_off, int64_t dx,
                              int64_t dx_off, int64_t numel, double a,
                              double b) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "unary_backward");
    UnaryMath op = unaryFromCode(kind);
    enqueuePointwiseBackward(
        l, x, x_off, dy, dy_off, dx, dx_off, numel,
        [=](Backend &be, DType dt, const void *px, const void *pdy,
            void *pdx) {
          be.unaryBackward(dt, op, px, pdy, pdx, numel, a, b);
        });
  });
}

int32_t fsdprt_activation_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int32_t kind, int64_t x, int64_t x_off,
                                  int64_t y, int64_t y_off, int64_t numel) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "activation_forward");
    Activation act = activationFromCode(kind);
    enqueuePointwise(l, x, x_off, y, y_off, numel,
                     [=](Backend &be, DType dt, const void *px, void *py) {
                       be.activationForward(dt, act, px, py, numel);
                     });
  });
}

int32_t fsdprt_activation_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                   int32_t kind, int64_t x, int64_t x_off,
                                   int64_t dy, int64_t dy_off, int64_t dx,
                                   int64_t dx_off, int64_t numel) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "activation_backward");
    Activation act = activationFromCode(kind);
    enqueuePointwiseBackward(
        l, x, x_off, dy, dy_off, dx, dx_off, numel,
        [=](Backend &be, DType dt, const void *px, const void *pdy,
            void *pdx) {
          be.activationBackward(dt, act, px, pdy, pdx, numel);
        });
  });
}

static void checkNorm(int64_t rows, int64_t d, double eps) {
  nonNegative(rows, "rows");
  requirePositive(d, "d");
  if (!(eps >= 0) || !std::isfinite(eps))
    fail(Status::InvalidArgument, "eps must be finite and non-negative");
}

int32_t fsdprt_layer_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t x, int64_t x_off, int64_t w,
                                  int64_t w_off, int64_t b, int64_t b_off,
                                  int64_t y, int64_t y_off, int64_t rows,
                                  int64_t d, double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "layer_norm_forward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    const void *pb = l.optional(b, b_off, d, "b");
    void *py = l.operand(y, y_off, mul(rows, d), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue(
        [=, &be] { be.layerNormForward(dt, px, pw, pb, py, rows, d, eps); });
  });
}

int32_t fsdprt_layer_norm_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                   int64_t x, int64_t x_off, int64_t w,
                                   int64_t w_off, int64_t dy, int64_t dy_off,
                                   int64_t dx, int64_t dx_off, int64_t dw,
                                   int64_t dw_off, int64_t db, int64_t db_off,
                                   int64_t rows, int64_t d, double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "layer_norm_backward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    const void *pdy = l.operand(dy, dy_off, mul(rows, d), "dy");
    void *pdx = l.optional(dx, dx_off, mul(rows, d), "dx");
    void *pdw = l.optional(dw, dw_off, d, "dw");
    void *pdb = l.optional(db, db_off, d, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.layerNormBackward(dt, px, pw, pdy, pdx, pdw, pdb, rows, d, eps);
    });
  });
}

int32_t fsdprt_rms_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t x, int64_t x_off, int64_t w,
                                int64_t w_off, int64_t y, int64_t y_off,
                                int64_t rows, int64_t d, double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "rms_norm_forward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    void *py = l.operand(y, y_off, mul(rows, d), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.rmsNormForward(dt, px, pw, py, rows, d, eps); });
  });
}

int32_t fsdprt_rms_norm_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t x, int64_t x_off, int64_t w,
                                 int64_t w_off, int64_t dy, int64_t dy_off,
                                 int64_t dx, int64_t dx_off, int64_t dw,
                                 int64_t dw_off, int64_t rows, int64_t d,
                                 double eps) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "rms_norm_backward");
    checkNorm(rows, d, eps);
    const void *px = l.operand(x, x_off, mul(rows, d), "x");
    const void *pw = l.optional(w, w_off, d, "w");
    const void *pdy = l.operand(dy, dy_off, mul(rows, d), "dy");
    void *pdx = l.optional(dx, dx_off, mul(rows, d), "dx");
    void *pdw = l.optional(dw, dw_off, d, "dw");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.rmsNormBackward(dt, px, pw, pdy, pdx, pdw, rows, d, eps);
    });
  });
}

int32_t fsdprt_softmax_forward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t y,
                               int64_t y_off, int32_t rank,
                               const int64_t *shape, int32_t dim) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "softmax_forward");
    Shape s = shapeFromAbi(rank, shape, "shape");
    Around a(s, normalizeDim(dim, s.size(), "dim"));
    const void *px = l.operand(x, x_off, numelOf(s), "x");
    void *py = l.operand(y, y_off, numelOf(s), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue(
        [=, &be] { be.softmaxForward(dt, px, py, a.outer, a.size, a.inner); });
  });
}

int32_t fsdprt_softmax_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t y, int64_t y_off, int64_t dy,
                                int64_t dy_off, int64_t dx, int64_t dx_off,
                                int32_t rank, const int64_t *shape,
                                int32_t dim) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "softmax_backward");
    Shape s = shapeFromAbi(rank, shape, "shape");
    Around a(s, normalizeDim(dim, s.size(), "dim"));
    const void *py = l.operand(y, y_off, numelOf(s), "y");
    const void *pdy = l.operand(dy, dy_off, numelOf(s), "dy");
    void *pdx = l.operand(dx, dx_off, numelOf(s), "dx");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.softmaxBackward(dt, py, pdy, pdx, a.outer, a.size, a.inner);
    });
  });
}

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
                                 int64_t out, int64_t out_off, int64_t batch,
                                 int64_t tq, int64_t tk, int64_t heads,
                                 int64_t kv_heads, int64_t head_dim,
                                 int32_t causal, double scale) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "attention_forward");
    AttentionDims d =
        attentionDims(batch, tq, tk, heads, kv_heads, head_dim, causal, scale);
    int64_t qn = mul(mul(batch, tq), mul(heads, head_dim));
    int64_t kvn = mul(mul(batch, tk), mul(kv_heads, head_dim));
    const void *pq = l.operand(q, q_off, qn, "q");
    const void *pk = l.operand(k, k_off, kvn, "k");
    const void *pv = l.operand(v, v_off, kvn, "v");
    void *po = l.operand(out, out_off, qn, "out");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.attentionForward(dt, pq, pk, pv, po, d); });
  });
}

int32_t fsdprt_attention_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t q, int64_t q_off, int64_t k,
                                  int64_t k_off, int64_t v, int64_t v_off,
                                  int64_t dout, int64_t dout_off, int64_t dq,
                                  int64_t dq_off, int64_t dk, int64_t dk_off,
                                  int64_t dv, int64_t dv_off, int64_t batch,
                                  int64_t tq, int64_t tk, int64_t heads,
                                  int64_t kv_heads, int64_t head_dim,
                                  int32_t causal, double scale) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "attention_backward");
    AttentionDims d =
        attentionDims(batch, tq, tk, heads, kv_heads, head_dim, causal, scale);
    int64_t qn = mul(mul(batch, tq), mul(heads, head_dim));
    int64_t kvn = mul(mul(batch, tk), mul(kv_heads, head_dim));
    const void *pq = l.operand(q, q_off, qn, "q");
    const void *pk = l.operand(k, k_off, kvn, "k");
    const void *pv = l.operand(v, v_off, kvn, "v");
    const void *pdo = l.operand(dout, dout_off, qn, "dout");
    void *pdq = l.optional(dq, dq_off, qn, "dq");
    void *pdk = l.optional(dk, dk_off, kvn, "dk");
    void *pdv = l.optional(dv, dv_off, kvn, "dv");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.attentionBackward(dt, pq, pk, pv, pdo, pdq, pdk, pdv, d);
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

static int32_t dropoutImpl(const char *fn, const char *op, int64_t ctx,
                           int64_t stream, int32_t dtype, int64_t x,
                           int64_t x_off, int64_t y, int64_t y_off,
                           int64_t numel, double p, int64_t seed, int64_t step,
                           int64_t rng_id) {
  return guarded(fn, [&] {
    Launch l(ctx, stream, dtype, op);
    nonNegative(numel, "numel");
    if (!(p >= 0.0 && p <= 1.0))
      fail(Status::InvalidArgument, "dropout probability ", p,
           " is not in [0, 1]");
    const void *px = l.operand(x, x_off, numel, "input");
    void *py = l.operand(y, y_off, numel, "output");
    Backend &be = l.backend();
    DType dt = l.dtype();
    RngKey key{static_cast<uint64_t>(seed), static_cast<uint64_t>(step),
               static_cast<uint64_t>(rng_id)};
    l.enqueue([=, &be] { be.dropout(dt, px, py, numel, p, key); });
  });
}

int32_t fsdprt_dropout_forward(int64_t ctx, int64_t stream, int32_t dtype,
                               int64_t x, int64_t x_off, int64_t y,
                               int64_t y_off, int64_t numel, double p,
                               int64_t seed, int64_t step, int64_t rng_id) {
  return dropoutImpl(__func__, "dropout_forward", ctx, stream, dtype, x, x_off,
                     y, y_off, numel, p, seed, step, rng_id);
}

int32_t fsdprt_dropout_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t dy, int64_t dy_off, int64_t dx,
                                int64_t dx_off, int64_t numel, double p,
                                int64_t seed, int64_t step, int64_t rng_id) {
  return dropoutImpl(__func__, "dropout_backward", ctx, stream, dtype, dy,
                     dy_off, dx, dx_off, numel, p, seed, step, rng_id);
}

int32_t fsdprt_rng_fill(int64_t ctx, int64_t stream, int32_t dtype,
                        int32_t distribution, int64_t dst, int64_t dst_off,
                        int64_t numel, double a, double b, int64_t seed,
                        int64_t step, int64_t rng_id) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "rng_fill");
    if (distribution != FSDPRT_RNG_UNIFORM && distribution != FSDPRT_RNG_NORMAL)
      fail(Status::InvalidArgument, "unknown distribution ", distribution);
    nonNegative(numel, "numel");
    void *pd = l.operand(dst, dst_off, numel, "dst");
    Backend &be = l.backend();
    DType dt = l.dtype();
    auto dist = static_cast<Distribution>(distribution);
    RngKey key{static_cast<uint64_t>(seed), static_cast<uint64_t>(step),
               static_cast<uint64_t>(rng_id)};
    l.enqueue([=, &be] { be.rngFill(dt, pd, numel, dist, a, b, key); });
  });
}

static void checkBatchNorm(int64_t n, int64_t c, int64_t spatial, double eps,
                           bool training) {
  nonNegative(n, "n"), requirePositive(c, "c"), nonNegative(spatial, "spatial");
  if (!(eps >= 0) || !std::isfinite(eps))
    fail(Status::InvalidArgument, "eps must be finite and non-negative");
  if (training && mul(n, spatial) < 2)
    fail(Status::InvalidArgument,
         "expected more than 1 value per channel when training");
}

int32_t fsdprt_batch_norm_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t x, int64_t x_off, int64_t w,
                                  int64_t w_off, int64_t b, int64_t b_off,
                                  int64_t running_mean, int64_t rm_off,
                                  int64_t running_var, int64_t rv_off,
                                  int64_t y, int64_t y_off, int64_t n,
                                  int64_t c, int64_t spatial, double eps,
                                  double momentum, int32_t training) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "batch_norm_forward");
    checkBatchNorm(n, c, spatial, eps, training);
    int64_t numel = mul(n, mul(c, spatial));
    const void *px = l.operand(x, x_off, numel, "x");
    const void *pw = l.optional(w, w_off, c, "w");
    const void *pb = l.optional(b, b_off, c, "b");
    void *prm = l.operand(running_mean, rm_off, c, "running_mean");
    void *prv = l.operand(running_var, rv_off, c, "running_var");
    void *py = l.operand(y, y_off, numel, "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    bool train = training != 0;
    l.enqueue([=, &be] {
      be.batchNormForward(dt, px, pw, pb, prm, prv, py, n, c, spatial, eps,
                          momentum, train);
    });
  });
}

int32_t fsdprt_batch_norm_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int64_t x, int64_t x_off,
    int64_t w, int64_t w_off, int64_t running_mean, int64_t rm_off,
    int64_t running_var, int64_t rv_off, int64_t dy, int64_t dy_off, int64_t dx,
    int64_t dx_off, int64_t dw, int64_t dw_off, int64_t db, int64_t db_off,
    int64_t n, int64_t c, int64_t spatial, double eps, int32_t training) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "batch_norm_backward");
    checkBatchNorm(n, c, spatial, eps, training);
    int64_t numel = mul(n, mul(c, spatial));
    const void *px = l.operand(x, x_off, numel, "x");
    const void *pw = l.optional(w, w_off, c, "w");
    // Eval mode normalises with the running statistics; training ignores them.
    const void *prm = training
                          ? l.optional(running_mean, rm_off, c, "running_mean")
                          : l.operand(running_mean, rm_off, c, "running_mean");
    const void *prv = training
                          ? l.optional(running_var, rv_off, c, "running_var")
                          : l.operand(running_var, rv_off, c, "running_var");
    const void *pdy = l.operand(dy, dy_off, numel, "dy");
    void *pdx = l.optional(dx, dx_off, numel, "dx");
    void *pdw = l.optional(dw, dw_off, c, "dw");
    void *pdb = l.optional(db, db_off, c, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    bool train = training != 0;
    l.enqueue([=, &be] {
      be.batchNormBackward(dt, px, pw, prm, prv, pdy, pdx, pdw, pdb, n, c,
                           spatial, eps, train);
    });
  });
}

int32_t fsdprt_cast(int64_t ctx, int64_t stream, int32_t src_dtype, int64_t src,
                    int64_t src_off, int32_t dst_dtype, int64_t dst,
                    int64_t dst_off, int64_t numel) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "cast");
    DType st = dtypeFromCode(src_dtype, "src_dtype");
    DType dt = floatDTypeFromCode(dst_dtype, "dst_dtype");
    nonNegative(numel, "numel");
    const void *ps = l.operand(src, src_off, numel, st, "src");
    void *pd = l.operand(dst, dst_off, numel, dt, "dst");
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.cast(st, ps, dt, pd, numel); });
  });
}

static int32_t transposeImpl(const char *fn, const char *op, bool backward,
                             int64_t ctx, int64_t stream, int32_t dtype,
                             int64_t x, int64_t x_off, int64_t y, int64_t y_off,
                             int32_t rank, const int64_t *shape,
                             const int64_t *perm) {
  return guarded(fn, [&] {
    Launch l(ctx, stream, op);
    DType dt = dtypeFromCode(dtype, "dtype");
    // `shape` is always the forward input's shape.
    Shape xs = shapeFromAbi(rank, shape, "shape");
    std::vector<int64_t> p = checkedPerm(rank, perm);
    Shape inShape = xs;
    if (backward) {
      // dy has the permuted shape; inverse permutation maps it back.
      std::vector<int64_t> inv(rank);
      for (int32_t i = 0; i < rank; ++i) {
        inShape[i] = xs[p[i]];
        inv[p[i]] = i;
      }
      p = inv;
    }
    const void *px =
        l.operand(x, x_off, numelOf(xs), dt, backward ? "dy" : "x");
    void *py = l.operand(y, y_off, numelOf(xs), dt, backward ? "dx" : "y");
    Backend &be = l.backend();
    l.enqueue([=, &be] { be.transpose(dt, px, py, inShape, p); });
  });
}

int32_t fsdprt_transpose_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t x, int64_t x_off, int64_t y,
                                 int64_t y_off, int32_t rank,
                                 const int64_t *shape, const int64_t *perm) {
  return transposeImpl(__func__, "transpose_forward", false, ctx, stream, dtype,
                       x, x_off, y, y_off, rank, shape, perm);
}

int32_t fsdprt_transpose_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                  int64_t dy, int64_t dy_off, int64_t dx,
                                  int64_t dx_off, int32_t rank,
                                  const int64_t *x_shape, const int64_t *perm) {
  return transposeImpl(__func__, "transpose_backward", true, ctx, stream, dtype,
                       dy, dy_off, dx, dx_off, rank, x_shape, perm);
}

/// Shared by split and concat: the whole tensor and its parts along `dim`.
static void splitConcat(const char *op, bool isSplit, int64_t ctx,
                        int64_t stream, int32_t dtype, int64_t whole,
                        int64_t whole_off, int32_t rank, const int64_t *shape,
                        int32_t dim, int32_t num_parts, const int64_t *sizes,
                        const int64_t *parts, const int64_t *part_offs) {
  Launch l(ctx, stream, op);
  DType dt = dtypeFromCode(dtype, "dtype");
  Shape s = shapeFromAbi(rank, shape, "shape");
  if (s.empty())
    fail(Status::InvalidArgument, "cannot split or concat a rank-0 tensor");
  int32_t d = normalizeDim(dim, s.size(), "dim");
  if (num_parts <= 0 || !sizes || !parts || !part_offs)
    fail(Status::InvalidArgument,
         "num_parts must be positive with non-null sizes and part arrays");
  Around a(s, d);
  int64_t total = 0;
  for (int32_t i = 0; i < num_parts; ++i)
    total += nonNegative(sizes[i], "part size");
  if (total != a.size)
    fail(Status::InvalidArgument, "part sizes sum to ", total, " but dim ", d,
         " has size ", a.size);
  void *pw = l.operand(whole, whole_off, numelOf(s), dt, isSplit ? "x" : "out");
  std::vector<void *> ptrs;
  for (int32_t i = 0; i < num_parts; ++i)
    ptrs.push_back(l.operand(parts[i], part_offs[i],
                             mul(a.outer, mul(sizes[i], a.inner)), dt,
                             isSplit ? "outs[i]" : "ins[i]"));
  std::vector<int64_t> sz(sizes, sizes + num_parts);
  Backend &be = l.backend();
  l.enqueue([=, &be] {
    int64_t at = 0;
    for (size_t i = 0; i < ptrs.size(); ++i) {
      if (isSplit)
        be.copySlab(dt, pw, a.size, at, ptrs[i], sz[i], 0, a.outer, sz[i],
                    a.inner);
      else
        be.copySlab(dt, ptrs[i], sz[i], 0, pw, a.size, at, a.outer, sz[i],
                    a.inner);
      at += sz[i];
    }
  });
}

int32_t fsdprt_split(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                     int64_t x_off, int32_t rank, const int64_t *shape,
                     int32_t dim, int32_t num_parts, const int64_t *sizes,
                     const int64_t *outs, const int64_t *out_offs) {
  return guarded(__func__, [&] {
    splitConcat("split", true, ctx, stream, dtype, x, x_off, rank, shape, dim,
                num_parts, sizes, outs, out_offs);
  });
}

int32_t fsdprt_concat(int64_t ctx, int64_t stream, int32_t dtype,
                      int32_t num_parts, const int64_t *ins,
                      const int64_t *in_offs, const int64_t *sizes,
                      int32_t rank, const int64_t *out_shape, int32_t dim,
                      int64_t out, int64_t out_off) {
  return guarded(__func__, [&] {
    splitConcat("concat", false, ctx, stream, dtype, out, out_off, rank,
                out_shape, dim, num_parts, sizes, ins, in_offs);
  });
}

int32_t fsdprt_slice(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                     int64_t x_off, int32_t rank, const int64_t *shape,
                     int32_t dim, int64_t start, int64_t size, int64_t y,
                     int64_t y_off) {
  return guarded(__func__, [&] {
    copyWindow("slice", ctx, stream, dtype, x, x_off, rank, shape, dim,
               [&](int64_t extent) {
                 if (start < 0 || size < 0 || start + size > extent)
                   fail(Status::InvalidArgument, "slice [", start, ", ",
                        start + size, ") is outside a dimension of size ",
                        extent);
                 return Window{start, 0, size, size, std::nullopt};
               },
               y, y_off);
  });
}

int32_t fsdprt_pad(int64_t ctx, int64_t stream, int32_t dtype, int64_t x,
                   int64_t x_off, int32_t rank, const int64_t *shape,
                   int32_t dim, int64_t low, int64_t high, double value,
                   int64_t y, int64_t y_off) {
  return guarded(__func__, [&] {
    nonNegative(low, "low");
    nonNegative(high, "high");
    copyWindow("pad", ctx, stream, dtype, x, x_off, rank, shape, dim,
               [&](int64_t extent) {
                 return Window{0, low, extent, low + extent + high, value};
               },
               y, y_off);
  });
}

int32_t fsdprt_reduce_forward(int64_t ctx, int64_t stream, int32_t dtype,
                              int32_t kind, int64_t x, int64_t x_off,
                              int32_t rank, const int64_t *shape,
                              int32_t num_dims, const int64_t *dims, int64_t y,
                              int64_t y_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "reduce_forward");
    if (kind != FSDPRT_REDUCE_SUM && kind != FSDPRT_REDUCE_MEAN)
      fail(Status::InvalidArgument, "unknown reduce kind ", kind);
    Shape s = shapeFromAbi(rank, shape, "shape");
    std::vector<int64_t> ds = sortedDims(num_dims, dims, s.size());
    const void *px = l.operand(x, x_off, numelOf(s), "x");
    void *py = l.operand(y, y_off, keptNumel(s, ds), "y");
    Backend &be = l.backend();
    DType dt = l.dtype();
    auto rk = static_cast<ReduceKind>(kind);
    l.enqueue([=, &be] { be.reduceForward(dt, rk, px, s, ds, py); });
  });
}

int32_t fsdprt_reduce_backward(int64_t ctx, int64_t stream, int32_t dtype,
                               int32_t kind, int64_t dy, int64_t dy_off,
                               int32_t rank, const int64_t *x_shape,
                               int32_t num_dims, const int64_t *dims,
                               int64_t dx, int64_t dx_off) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "reduce_backward");
    if (kind != FSDPRT_REDUCE_SUM && kind != FSDPRT_REDUCE_MEAN)
      fail(Status::InvalidArgument, "unknown reduce kind ", kind);
    Shape s = shapeFromAbi(rank, x_shape, "x_shape");
    std::vector<int64_t> ds = sortedDims(num_dims, dims, s.size());
    const void *pdy = l.operand(dy, dy_off, keptNumel(s, ds), "dy");
    void *pdx = l.operand(dx, dx_off, numelOf(s), "dx");
    Backend &be = l.backend();
    DType dt = l.dtype();
    auto rk = static_cast<ReduceKind>(kind);
    l.enqueue([=, &be] { be.reduceBackward(dt, rk, pdy, s, ds, pdx); });
  });
}

int32_t fsdprt_cross_entropy_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                     int32_t target_dtype, int64_t logits,
                                     int64_t logits_off, int64_t targets,
                                     int64_t targets_off, int64_t loss,
                                     int64_t loss_off, int64_t n, int64_t c,
                                     int32_t reduction, int64_t ignore_index) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "cross_entropy_forward");
    DType tt = indexDType(target_dtype, "target_dtype");
    LossReduction red = reductionFromCode(reduction);
    nonNegative(n, "n"), requirePositive(c, "c");
    const void *pl = l.operand(logits, logits_off, mul(n, c), "logits");
    const void *pt = l.operand(targets, targets_off, n, tt, "targets");
    void *po = l.operand(loss, loss_off, 1, "loss");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.crossEntropyForward(dt, tt, pl, pt, po, n, c, red, ignore_index);
    });
  });
}

int32_t fsdprt_cross_entropy_backward(
    int64_t ctx, int64_t stream, int32_t dtype, int32_t target_dtype,
    int64_t logits, int64_t logits_off, int64_t targets, int64_t targets_off,
    int64_t dloss, int64_t dloss_off, int64_t dlogits, int64_t dlogits_off,
    int64_t n, int64_t c, int32_t reduction, int64_t ignore_index) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "cross_entropy_backward");
    DType tt = indexDType(target_dtype, "target_dtype");
    LossReduction red = reductionFromCode(reduction);
    nonNegative(n, "n"), requirePositive(c, "c");
    const void *pl = l.operand(logits, logits_off, mul(n, c), "logits");
    const void *pt = l.operand(targets, targets_off, n, tt, "targets");
    const void *pdl = l.operand(dloss, dloss_off, 1, "dloss");
    void *pd = l.operand(dlogits, dlogits_off, mul(n, c), "dlogits");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.crossEntropyBackward(dt, tt, pl, pt, pdl, pd, n, c, red, ignore_index);
    });
  });
}

int32_t fsdprt_mse_loss_forward(int64_t ctx, int64_t stream, int32_t dtype,
                                int64_t a, int64_t a_off, int64_t b,
                                int64_t b_off, int64_t loss, int64_t loss_off,
                                int64_t numel, int32_t reduction) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "mse_loss_forward");
    LossReduction red = reductionFromCode(reduction);
    nonNegative(numel, "numel");
    const void *pa = l.operand(a, a_off, numel, "a");
    const void *pb = l.operand(b, b_off, numel, "b");
    void *po = l.operand(loss, loss_off, 1, "loss");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] { be.mseLossForward(dt, pa, pb, po, numel, red); });
  });
}

int32_t fsdprt_mse_loss_backward(int64_t ctx, int64_t stream, int32_t dtype,
                                 int64_t a, int64_t a_off, int64_t b,
                                 int64_t b_off, int64_t dloss,
                                 int64_t dloss_off, int64_t da, int64_t da_off,
                                 int64_t db, int64_t db_off, int64_t numel,
                                 int32_t reduction) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, dtype, "mse_loss_backward");
    LossReduction red = reductionFromCode(reduction);
    nonNegative(numel, "numel");
    const void *pa = l.operand(a, a_off, numel, "a");
    const void *pb = l.operand(b, b_off, numel, "b");
    const void *pdl = l.operand(dloss, dloss_off, 1, "dloss");
    void *pda = l.optional(da, da_off, numel, "da");
    void *pdb = l.optional(db, db_off, numel, "db");
    Backend &be = l.backend();
    DType dt = l.dtype();
    l.enqueue([=, &be] {
      be.mseLossBackward(dt, pa, pb, pdl, pda, pdb, numel, red);
    });
  });
}

} // extern "C"
