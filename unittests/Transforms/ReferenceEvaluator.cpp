//===- ReferenceEvaluator.cpp - float64 interpreter for tests --------------===//

#include "ReferenceEvaluator.h"

#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Traits.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace mlir;
using fsdp::test::Tensor;

Tensor Tensor::zeros(std::vector<int64_t> shape) {
  Tensor t{std::move(shape), {}};
  t.data.assign(t.numel(), 0.0);
  return t;
}

int64_t Tensor::numel() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

namespace {

std::vector<int64_t> shapeOf(Type type) {
  auto shape = cast<RankedTensorType>(type).getShape();
  return {shape.begin(), shape.end()};
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Multi-index of flat position `flat` in `shape`.
std::vector<int64_t> unflatten(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (int64_t d = int64_t(shape.size()) - 1; d >= 0; --d) {
    index[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return index;
}

/// The flat position in `shape` of the element that broadcasts to `index`
/// of a larger shape (NumPy rules: aligned from the right, size 1 repeats).
int64_t broadcastFlat(const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &index) {
  std::vector<int64_t> strides = stridesOf(shape);
  size_t lead = index.size() - shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1)
      flat += index[lead + d] * strides[d];
  return flat;
}

double broadcastAt(const Tensor &t, const std::vector<int64_t> &index) {
  return t.data[broadcastFlat(t.shape, index)];
}

Tensor elementwise(const Tensor &a, const Tensor &b, Type resultType,
                   double (*f)(double, double)) {
  Tensor out = Tensor::zeros(shapeOf(resultType));
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> index = unflatten(i, out.shape);
    out.data[i] = f(broadcastAt(a, index), broadcastAt(b, index));
  }
  return out;
}

/// Element [i][j] of the last two dims of `t` at batch offset `base`.
double matrixAt(const Tensor &t, int64_t base, int64_t i, int64_t j,
                bool transposed) {
  int64_t cols = t.shape.back();
  return transposed ? t.data[base + j * cols + i] : t.data[base + i * cols + j];
}

Tensor matmul(const Tensor &a, const Tensor &b, bool ta, bool tb,
              Type resultType) {
  Tensor out = Tensor::zeros(shapeOf(resultType));
  int64_t m = out.shape[out.shape.size() - 2], n = out.shape.back();
  int64_t k = ta ? a.shape[a.shape.size() - 2] : a.shape.back();
  std::vector<int64_t> batch(out.shape.begin(), out.shape.end() - 2);
  std::vector<int64_t> batchA(a.shape.begin(), a.shape.end() - 2);
  std::vector<int64_t> batchB(b.shape.begin(), b.shape.end() - 2);
  int64_t batches = Tensor{batch, {}}.numel();
  int64_t sizeA = a.shape[a.shape.size() - 2] * a.shape.back();
  int64_t sizeB = b.shape[b.shape.size() - 2] * b.shape.back();
  for (int64_t s = 0; s < batches; ++s) {
    // The matrix of each operand this batch entry uses (broadcasting).
    std::vector<int64_t> index = unflatten(s, batch);
    int64_t baseA = broadcastFlat(batchA, index) * sizeA;
    int64_t baseB = broadcastFlat(batchB, index) * sizeB;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += matrixAt(a, baseA, i, p, ta) * matrixAt(b, baseB, p, j, tb);
        out.data[s * m * n + i * n + j] = sum;
      }
  }
  return out;
}

Tensor reduce(const Tensor &x, ArrayRef<int64_t> dims, bool mean,
              Type resultType) {
  Tensor out = Tensor::zeros(shapeOf(resultType));
  std::vector<bool> reduced(x.shape.size(), false);
  int64_t count = 1;
  for (int64_t d : dims) {
    int64_t dim = d < 0 ? d + int64_t(x.shape.size()) : d;
    reduced[dim] = true;
    count *= x.shape[dim];
  }
  // Kept dims only: keepdim's size-1 dims do not change the flat order.
  std::vector<int64_t> keptShape;
  for (size_t d = 0; d < x.shape.size(); ++d)
    if (!reduced[d])
      keptShape.push_back(x.shape[d]);
  std::vector<int64_t> keptStrides = stridesOf(keptShape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> index = unflatten(i, x.shape);
    int64_t flat = 0, k = 0;
    for (size_t d = 0; d < x.shape.size(); ++d)
      if (!reduced[d])
        flat += index[d] * keptStrides[k++];
    out.data[flat] += x.data[i] / (mean ? count : 1);
  }
  return out;
}

Tensor transpose(const Tensor &x, ArrayRef<int64_t> perm, Type resultType) {
  Tensor out = Tensor::zeros(shapeOf(resultType));
  std::vector<int64_t> strides = stridesOf(x.shape);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> index = unflatten(i, out.shape);
    int64_t flat = 0;
    for (size_t d = 0; d < perm.size(); ++d)
      flat += index[d] * strides[perm[d]];
    out.data[i] = x.data[flat];
  }
  return out;
}

/// Copies slices along `dim` between `whole` and consecutive `parts`.
void moveAlong(Tensor &whole, std::vector<Tensor *> parts, int64_t dim,
               bool intoWhole) {
  if (dim < 0)
    dim += whole.shape.size();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= whole.shape[d];
  for (size_t d = dim + 1; d < whole.shape.size(); ++d)
    inner *= whole.shape[d];
  int64_t offset = 0;
  for (Tensor *part : parts) {
    int64_t size = part->shape[dim];
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t s = 0; s < size * inner; ++s) {
        double &w = whole.data[(o * whole.shape[dim] + offset) * inner + s];
        double &p = part->data[o * size * inner + s];
        intoWhole ? (w = p) : (p = w);
      }
    offset += size;
  }
}

Tensor softmax(const Tensor &x, int64_t dim) {
  if (dim < 0)
    dim += x.shape.size();
  Tensor out = x;
  int64_t size = x.shape[dim];
  int64_t stride = stridesOf(x.shape)[dim];
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (unflatten(i, x.shape)[dim] != 0)
      continue;
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < size; ++j)
      max = std::max(max, x.data[i + j * stride]);
    for (int64_t j = 0; j < size; ++j)
      sum += std::exp(x.data[i + j * stride] - max);
    for (int64_t j = 0; j < size; ++j)
      out.data[i + j * stride] = std::exp(x.data[i + j * stride] - max) / sum;
  }
  return out;
}

/// f(x; a, b) and f'(x; a, b) of nn::UnaryFn in float64.
double unaryValue(nn::UnaryFn fn, double x, double a, double b) {
  switch (fn) {
  case nn::UnaryFn::tanh:
    return std::tanh(x);
  case nn::UnaryFn::sigmoid:
    return 1.0 / (1.0 + std::exp(-x));
  case nn::UnaryFn::exp:
    return std::exp(x);
  case nn::UnaryFn::log:
    return std::log(x);
  case nn::UnaryFn::sqrt:
    return std::sqrt(x);
  case nn::UnaryFn::rsqrt:
    return 1.0 / std::sqrt(x);
  case nn::UnaryFn::abs:
    return std::fabs(x);
  case nn::UnaryFn::pow:
    return std::pow(x, a);
  case nn::UnaryFn::clamp:
    return std::min(std::max(x, a), b);
  case nn::UnaryFn::erf:
    return std::erf(x);
  case nn::UnaryFn::sin:
    return std::sin(x);
  case nn::UnaryFn::cos:
    return std::cos(x);
  case nn::UnaryFn::acos:
    return std::acos(x);
  case nn::UnaryFn::asin:
    return std::asin(x);
  case nn::UnaryFn::atan:
    return std::atan(x);
  }
  return 0.0;
}

double unaryDerivative(nn::UnaryFn fn, double x, double a, double b) {
  switch (fn) {
  case nn::UnaryFn::tanh:
    return 1.0 - std::tanh(x) * std::tanh(x);
  case nn::UnaryFn::sigmoid: {
    double s = 1.0 / (1.0 + std::exp(-x));
    return s * (1.0 - s);
  }
  case nn::UnaryFn::exp:
    return std::exp(x);
  case nn::UnaryFn::log:
    return 1.0 / x;
  case nn::UnaryFn::sqrt:
    return 0.5 / std::sqrt(x);
  case nn::UnaryFn::rsqrt:
    return -0.5 * std::pow(x, -1.5);
  case nn::UnaryFn::abs:
    return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
  case nn::UnaryFn::pow:
    return a == 0.0 ? 0.0 : a * std::pow(x, a - 1.0);
  case nn::UnaryFn::clamp:
    return x >= a && x <= b ? 1.0 : 0.0;
  case nn::UnaryFn::erf:
    return 2.0 / std::sqrt(M_PI) * std::exp(-x * x);
  case nn::UnaryFn::sin:
    return std::cos(x);
  case nn::UnaryFn::cos:
    return -std::sin(x);
  case nn::UnaryFn::acos:
    return -1.0 / std::sqrt(1.0 - x * x);
  case nn::UnaryFn::asin:
    return 1.0 / std::sqrt(1.0 - x * x);
  case nn::UnaryFn::atan:
    return 1.0 / (1.0 + x * x);
  }
  return 0.0;
}

/// y[.., i + yStart, ..] = x[.., i + xStart, ..] along `dim` for i < count;
/// y starts filled with `fill` (slice and pad).
Tensor window(const Tensor &x, Type resultType, int64_t dim, int64_t xStart,
              int64_t yStart, int64_t count, double fill) {
  Tensor y = Tensor::zeros(shapeOf(resultType));
  std::fill(y.data.begin(), y.data.end(), fill);
  std::vector<int64_t> yStrides = stridesOf(y.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> index = unflatten(i, x.shape);
    int64_t along = index[dim] - xStart;
    if (along < 0 || along >= count)
      continue;
    index[dim] = along + yStart;
    int64_t flat = 0;
    for (size_t d = 0; d < index.size(); ++d)
      flat += index[d] * yStrides[d];
    y.data[flat] = x.data[i];
  }
  return y;
}

/// nn.slice by `step` (gather the slices start, start + step, ... of
/// `dim`) or nn.slice_grad (`scatter` them into zeros).
Tensor strided(const Tensor &x, Type resultType, int64_t dim, int64_t start,
               int64_t step, bool scatter) {
  Tensor y = Tensor::zeros(shapeOf(resultType));
  const Tensor &part = scatter ? x : y;
  const Tensor &whole = scatter ? y : x;
  std::vector<int64_t> wholeStrides = stridesOf(whole.shape);
  for (int64_t i = 0; i < part.numel(); ++i) {
    std::vector<int64_t> index = unflatten(i, part.shape);
    index[dim] = start + index[dim] * step;
    int64_t flat = 0;
    for (size_t d = 0; d < index.size(); ++d)
      flat += index[d] * wholeStrides[d];
    (scatter ? y.data[flat] : y.data[i]) = x.data[scatter ? i : flat];
  }
  return y;
}

/// torch.cumsum along `dim`, from the end when `reverse`.
Tensor cumsum(Tensor x, int64_t dim, bool reverse) {
  if (dim < 0)
    dim += x.shape.size();
  int64_t size = x.shape[dim], stride = stridesOf(x.shape)[dim];
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (unflatten(i, x.shape)[dim] != 0)
      continue;
    double acc = 0;
    for (int64_t k = 0; k < size; ++k) {
      double &v = x.data[i + (reverse ? size - 1 - k : k) * stride];
      acc += v;
      v = acc;
    }
  }
  return x;
}

/// The geometry of an nn.conv-family op, per spatial dim.
struct ConvAttrs {
  ArrayRef<int64_t> stride, low, dilation;
  int64_t groups;
};
template <typename OpTy> ConvAttrs convAttrs(OpTy op) {
  return {op.getStride(), op.getPadLow(), op.getDilation(),
          static_cast<int64_t>(op.getGroups())};
}

/// Calls fn(xFlat, wFlat, yFlat) for every product term of convolving x
/// (shape `xs`) with w (`ws`) into y (`ys`), in PyTorch's definition: y
/// position p, kernel tap k read x at p·stride − pad_low + k·dilation when
/// that lies inside x. One to two spatial dims.
template <typename Fn>
void forEachConvTerm(const std::vector<int64_t> &xs,
                     const std::vector<int64_t> &ws,
                     const std::vector<int64_t> &ys, const ConvAttrs &a,
                     Fn fn) {
  // A 1-D convolution is a 2-D one of height 1.
  auto dims2 = [](const std::vector<int64_t> &s) {
    return s.size() == 3 ? std::vector<int64_t>{s[0], s[1], 1, s[2]} : s;
  };
  auto pair = [](ArrayRef<int64_t> v, int64_t unit) {
    return v.size() == 1 ? std::vector<int64_t>{unit, v[0]}
                         : std::vector<int64_t>{v[0], v[1]};
  };
  std::vector<int64_t> x = dims2(xs), w = dims2(ws), y = dims2(ys);
  std::vector<int64_t> stride = pair(a.stride, 1), low = pair(a.low, 0),
                       dil = pair(a.dilation, 1);
  int64_t cg = x[1] / a.groups, og = w[0] / a.groups;
  for (int64_t n = 0; n < y[0]; ++n)
    for (int64_t oc = 0; oc < y[1]; ++oc)
      for (int64_t oy = 0; oy < y[2]; ++oy)
        for (int64_t ox = 0; ox < y[3]; ++ox)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < w[2]; ++ky)
              for (int64_t kx = 0; kx < w[3]; ++kx) {
                int64_t iy = oy * stride[0] - low[0] + ky * dil[0];
                int64_t ix = ox * stride[1] - low[1] + kx * dil[1];
                if (iy < 0 || iy >= x[2] || ix < 0 || ix >= x[3])
                  continue;
                int64_t ch = oc / og * cg + ci;
                fn(((n * x[1] + ch) * x[2] + iy) * x[3] + ix,
                   ((oc * cg + ci) * w[2] + ky) * w[3] + kx,
                   ((n * y[1] + oc) * y[2] + oy) * y[3] + ox);
              }
}

/// The input position (flat) of the first maximum of every window of a
/// max pooling of x into a result of shape `ys`, in output order. 1-D
/// poolings are 2-D ones of height 1.
template <typename OpTy>
std::vector<int64_t> maxPoolArgmax(OpTy op, const Tensor &x,
                                   const std::vector<int64_t> &ys) {
  auto dims2 = [](const std::vector<int64_t> &s) {
    return s.size() == 3 ? std::vector<int64_t>{s[0], s[1], 1, s[2]} : s;
  };
  auto pair = [](ArrayRef<int64_t> v, int64_t unit) {
    return v.size() == 1 ? std::vector<int64_t>{unit, v[0]}
                         : std::vector<int64_t>{v[0], v[1]};
  };
  std::vector<int64_t> xs = dims2(x.shape), y = dims2(ys);
  std::vector<int64_t> k = pair(op.getKernel(), 1), s = pair(op.getStride(), 1),
                       p = pair(op.getPadding(), 0),
                       d = pair(op.getDilation(), 1);
  std::vector<int64_t> argmax;
  for (int64_t plane = 0; plane < y[0] * y[1]; ++plane)
    for (int64_t oy = 0; oy < y[2]; ++oy)
      for (int64_t ox = 0; ox < y[3]; ++ox) {
        int64_t best = -1;
        for (int64_t ky = 0; ky < k[0]; ++ky)
          for (int64_t kx = 0; kx < k[1]; ++kx) {
            int64_t iy = oy * s[0] - p[0] + ky * d[0];
            int64_t ix = ox * s[1] - p[1] + kx * d[1];
            if (iy < 0 || iy >= xs[2] || ix < 0 || ix >= xs[3])
              continue;
            int64_t at = (plane * xs[2] + iy) * xs[3] + ix;
            if (best < 0 || x.data[at] > x.data[best])
              best = at;
          }
        argmax.push_back(best);
      }
  return argmax;
}

} // namespace

FailureOr<std::vector<Tensor>>
fsdp::test::evaluate(func::FuncOp func, const std::vector<Tensor> &args,
                     std::string &error) {
  llvm::DenseMap<Value, Tensor> values;
  for (auto [arg, tensor] : llvm::zip(func.getArguments(), args))
    values[arg] = tensor;
  auto in = [&](Value v) -> const Tensor & { return values[v]; };
  auto one = [](Tensor t) { return std::vector<Tensor>{std::move(t)}; };
  for (Operation &op : func.getBody().front()) {
    std::optional<std::vector<Tensor>> results =
        llvm::TypeSwitch<Operation *, std::optional<std::vector<Tensor>>>(&op)
            .Case([&](arith::ConstantOp c)
                      -> std::optional<std::vector<Tensor>> {
              auto attr = dyn_cast<DenseElementsAttr>(c.getValue());
              Tensor t = Tensor::zeros(shapeOf(c.getType()));
              if (attr && isa<IntegerType>(attr.getElementType())) {
                auto it = attr.getValues<APInt>().begin();
                for (int64_t i = 0; i < t.numel(); ++i)
                  t.data[i] =
                      double((*(attr.isSplat() ? it : it + i)).getSExtValue());
                return one(t);
              }
              if (!attr || !isa<FloatType>(attr.getElementType()))
                return one(t);
              auto it = attr.getValues<APFloat>().begin();
              for (int64_t i = 0; i < t.numel(); ++i)
                t.data[i] = (*(attr.isSplat() ? it : it + i)).convertToDouble();
              return one(t);
            })
            .Case([&](arith::AddIOp a) { return one(in(a.getLhs())); })
            .Case([&](nn::LinearOp l) {
              Tensor y = matmul(in(l.getInput()), in(l.getWeight()), false,
                                true, l.getType());
              if (l.getBias())
                y = elementwise(y, in(l.getBias()), l.getType(),
                                [](double a, double b) { return a + b; });
              return one(y);
            })
            .Case([&](nn::LinearGradOp l) {
              Tensor g = in(l.getGrad());
              int64_t zero[] = {0};
              return std::vector<Tensor>{
                  matmul(g, in(l.getWeight()), false, false,
                         l.getInputGrad().getType()),
                  matmul(g, in(l.getInput()), true, false,
                         l.getWeightGrad().getType()),
                  reduce(g, zero, false, l.getBiasGrad().getType())};
            })
            .Case([&](nn::ConvOp c) {
              const Tensor &x = in(c.getInput()), &w = in(c.getWeight());
              Tensor y = Tensor::zeros(shapeOf(c.getType()));
              forEachConvTerm(x.shape, w.shape, y.shape, convAttrs(c),
                              [&](int64_t xi, int64_t wi, int64_t yi) {
                                y.data[yi] += x.data[xi] * w.data[wi];
                              });
              if (c.getBias()) {
                const Tensor &b = in(c.getBias());
                int64_t spatial = y.numel() / (y.shape[0] * y.shape[1]);
                for (int64_t i = 0; i < y.numel(); ++i)
                  y.data[i] += b.data[i / spatial % y.shape[1]];
              }
              return one(y);
            })
            .Case([&](nn::ConvTransposeOp c) {
              const Tensor &g = in(c.getInput()), &w = in(c.getWeight());
              Tensor dx = Tensor::zeros(shapeOf(c.getType()));
              forEachConvTerm(dx.shape, w.shape, g.shape, convAttrs(c),
                              [&](int64_t xi, int64_t wi, int64_t yi) {
                                dx.data[xi] += g.data[yi] * w.data[wi];
                              });
              return one(dx);
            })
            .Case([&](nn::ConvGradWeightOp c) {
              const Tensor &g = in(c.getGrad()), &x = in(c.getInput());
              Tensor dw = Tensor::zeros(shapeOf(c.getType()));
              forEachConvTerm(x.shape, dw.shape, g.shape, convAttrs(c),
                              [&](int64_t xi, int64_t wi, int64_t yi) {
                                dw.data[wi] += g.data[yi] * x.data[xi];
                              });
              return one(dw);
            })
            .Case([&](nn::MaxPoolOp m) {
              const Tensor &x = in(m.getInput());
              Tensor y = Tensor::zeros(shapeOf(m.getType()));
              std::vector<int64_t> at = maxPoolArgmax(m, x, y.shape);
              for (int64_t i = 0; i < y.numel(); ++i)
                y.data[i] = x.data[at[i]];
              return one(y);
            })
            .Case([&](nn::MaxPoolGradOp m) {
              const Tensor &x = in(m.getInput()), &g = in(m.getGrad());
              Tensor dx = Tensor::zeros(x.shape);
              std::vector<int64_t> at = maxPoolArgmax(m, x, g.shape);
              for (int64_t i = 0; i < g.numel(); ++i)
                dx.data[at[i]] += g.data[i];
              return one(dx);
            })
            .Case([&](nn::MatmulOp m) {
              return one(matmul(in(m.getLhs()), in(m.getRhs()),
                                m.getTransposeLhs(), m.getTransposeRhs(),
                                m.getType()));
            })
            .Case([&](nn::AddOp o) {
              return one(elementwise(in(o.getLhs()), in(o.getRhs()), o.getType(),
                                     [](double a, double b) { return a + b; }));
            })
            .Case([&](nn::SubOp o) {
              return one(elementwise(in(o.getLhs()), in(o.getRhs()), o.getType(),
                                     [](double a, double b) { return a - b; }));
            })
            .Case([&](nn::MulOp o) {
              return one(elementwise(in(o.getLhs()), in(o.getRhs()), o.getType(),
                                     [](double a, double b) { return a * b; }));
            })
            .Case([&](nn::DivOp o) {
              return one(elementwise(in(o.getLhs()), in(o.getRhs()), o.getType(),
                                     [](double a, double b) { return a / b; }));
            })
            .Case([&](nn::FmodOp o) {
              return one(elementwise(
                  in(o.getLhs()), in(o.getRhs()), o.getType(),
                  [](double a, double b) { return std::fmod(a, b); }));
            })
            .Case([&](nn::MaximumOp o) {
              return one(elementwise(
                  in(o.getLhs()), in(o.getRhs()), o.getType(),
                  [](double a, double b) { return std::max(a, b); }));
            })
            .Case([&](nn::MinimumOp o) {
              return one(elementwise(
                  in(o.getLhs()), in(o.getRhs()), o.getType(),
                  [](double a, double b) { return std::min(a, b); }));
            })
            .Case([&](nn::MaxWeightOp o) {
              return one(elementwise(
                  in(o.getLhs()), in(o.getRhs()), o.getType(),
                  [](double a, double b) { return a == b ? 0.5 : a > b; }));
            })
            .Case([&](nn::MinWeightOp o) {
              return one(elementwise(
                  in(o.getLhs()), in(o.getRhs()), o.getType(),
                  [](double a, double b) { return a == b ? 0.5 : a < b; }));
            })
            .Case([&](nn::KeepOp o) {
              return one(elementwise(
                  in(o.getLhs()), in(o.getRhs()), o.getType(),
                  [](double a, double b) { return b != 0 ? a : 0.0; }));
            })
            .Case([&](nn::GtOp o) {
              return one(elementwise(
                  in(o.getLhs()), in(o.getRhs()), o.getType(),
                  [](double a, double b) { return double(a > b); }));
            })
            .Case<nn::TanhOp, nn::SigmoidOp, nn::ExpOp, nn::LogOp, nn::SqrtOp,
                  nn::RsqrtOp, nn::AbsOp, nn::PowOp, nn::ClampOp, nn::ErfOp,
                  nn::SinOp, nn::CosOp, nn::AcosOp, nn::AsinOp, nn::AtanOp>(
                [&](auto o) {
                  Tensor t = in(o.getInput());
                  for (double &x : t.data)
                    x = unaryValue(o.getFn(), x, o.getParamA(), o.getParamB());
                  return one(t);
                })
            .Case([&](nn::UnaryGradOp o) {
              Tensor g = in(o.getGrad());
              const Tensor &x = in(o.getInput());
              for (int64_t i = 0; i < g.numel(); ++i)
                g.data[i] *= unaryDerivative(o.getFn(), x.data[i],
                                             o.getA().convertToDouble(),
                                             o.getB().convertToDouble());
              return one(g);
            })
            .Case([&](nn::SliceOp s) {
              if (s.getStep() != 1)
                return one(strided(in(s.getInput()), s.getType(), s.getDim(),
                                   s.getStart(), s.getStep(), false));
              return one(window(in(s.getInput()), s.getType(), s.getDim(),
                                s.getStart(), 0, s.getEnd() - s.getStart(),
                                0.0));
            })
            .Case([&](nn::CumsumOp c) {
              return one(cumsum(in(c.getInput()), c.getDim(), c.getReverse()));
            })
            .Case([&](nn::SliceGradOp s) {
              return one(strided(in(s.getGrad()), s.getType(), s.getDim(),
                                 s.getStart(), s.getStep(), true));
            })
            .Case([&](nn::PadOp p) {
              const Tensor &x = in(p.getInput());
              return one(window(x, p.getType(), p.getDim(), 0, p.getLow(),
                                x.shape[p.getDim()],
                                p.getValue().convertToDouble()));
            })
            .Case([&](nn::ScaleOp s) {
              Tensor t = in(s.getInput());
              for (double &x : t.data)
                x *= s.getFactor().convertToDouble();
              return one(t);
            })
            .Case([&](nn::ReluOp r) {
              Tensor t = in(r.getInput());
              for (double &x : t.data)
                x = std::max(x, 0.0);
              return one(t);
            })
            .Case([&](nn::ReluGradOp r) {
              Tensor g = in(r.getGrad());
              const Tensor &x = in(r.getInput());
              for (int64_t i = 0; i < g.numel(); ++i)
                g.data[i] = x.data[i] > 0 ? g.data[i] : 0.0;
              return one(g);
            })
            .Case([&](nn::ReshapeOp r) {
              Tensor t = in(r.getInput());
              t.shape = shapeOf(r.getType());
              return one(t);
            })
            .Case([&](nn::BroadcastOp b) {
              Tensor zero = Tensor::zeros(shapeOf(b.getType()));
              return one(elementwise(zero, in(b.getInput()), b.getType(),
                                     [](double, double x) { return x; }));
            })
            .Case([&](nn::TransposeOp t) {
              return one(transpose(in(t.getInput()), t.getPermutation(),
                                   t.getType()));
            })
            .Case([&](nn::ReduceSumOp r) {
              return one(reduce(in(r.getInput()), r.getDims(), false, r.getType()));
            })
            .Case([&](nn::ReduceMeanOp r) {
              return one(reduce(in(r.getInput()), r.getDims(), true, r.getType()));
            })
            .Case([&](nn::SoftmaxOp s) {
              return one(softmax(in(s.getInput()), int64_t(s.getDim())));
            })
            .Case([&](nn::MSELossOp m) {
              const Tensor &a = in(m.getInput()), &b = in(m.getTarget());
              Tensor loss = Tensor::zeros({});
              for (int64_t i = 0; i < a.numel(); ++i)
                loss.data[0] += (a.data[i] - b.data[i]) * (a.data[i] - b.data[i]);
              if (m.getReduction() == nn::Reduction::mean)
                loss.data[0] /= a.numel();
              return one(loss);
            })
            .Case([&](nn::ConcatOp c) {
              Tensor whole = Tensor::zeros(shapeOf(c.getType()));
              std::vector<Tensor> parts;
              for (Value v : c.getInputs())
                parts.push_back(in(v));
              std::vector<Tensor *> pointers;
              for (Tensor &p : parts)
                pointers.push_back(&p);
              moveAlong(whole, pointers, int64_t(c.getDim()), true);
              return one(whole);
            })
            .Case([&](nn::SplitOp s) {
              Tensor whole = in(s.getInput());
              std::vector<Tensor> parts;
              for (Value r : s.getResults())
                parts.push_back(Tensor::zeros(shapeOf(r.getType())));
              std::vector<Tensor *> pointers;
              for (Tensor &p : parts)
                pointers.push_back(&p);
              moveAlong(whole, pointers, int64_t(s.getDim()), false);
              return std::optional<std::vector<Tensor>>(parts);
            })
            // Mixture-of-experts routing, integers held as doubles.
            .Case([&](nn::CastOp c) {
              Tensor t = in(c.getInput());
              if (isa<IntegerType>(c.getType().getElementType()))
                for (double &x : t.data)
                  x = std::trunc(x);
              return one(t);
            })
            .Case([&](nn::EmbeddingOp e) {
              const Tensor &ids = in(e.getIndices()), &table = in(e.getTable());
              Tensor y = Tensor::zeros(shapeOf(e.getType()));
              int64_t d = table.shape[1];
              for (int64_t i = 0; i < ids.numel(); ++i)
                for (int64_t j = 0; j < d; ++j)
                  y.data[i * d + j] = table.data[int64_t(ids.data[i]) * d + j];
              return one(y);
            })
            .Case([&](nn::EmbeddingGradOp e) {
              const Tensor &ids = in(e.getIndices()), &g = in(e.getGrad());
              Tensor dt = Tensor::zeros(shapeOf(e.getType()));
              int64_t d = dt.shape[1];
              for (int64_t i = 0; i < ids.numel(); ++i)
                for (int64_t j = 0; j < d; ++j)
                  dt.data[int64_t(ids.data[i]) * d + j] += g.data[i * d + j];
              return one(dt);
            })
            .Case([&](nn::TopkOp t) {
              const Tensor &x = in(t.getInput());
              int64_t n = x.shape.back(), k = t.getK();
              Tensor v = Tensor::zeros(shapeOf(t.getValues().getType())),
                     idx = v;
              for (int64_t r = 0; r < x.numel() / n; ++r) {
                std::vector<int64_t> order(n);
                std::iota(order.begin(), order.end(), 0);
                std::stable_sort(order.begin(), order.end(), [&](int64_t a,
                                                                 int64_t b) {
                  return x.data[r * n + a] > x.data[r * n + b];
                });
                for (int64_t j = 0; j < k; ++j) {
                  v.data[r * k + j] = x.data[r * n + order[j]];
                  idx.data[r * k + j] = double(order[j]);
                }
              }
              return std::vector<Tensor>{v, idx};
            })
            .Case([&](nn::SortOp s) {
              const Tensor &x = in(s.getInput());
              int64_t n = x.shape.back();
              Tensor v = x, idx = x;
              for (int64_t r = 0; r < x.numel() / n; ++r) {
                std::vector<int64_t> order(n);
                std::iota(order.begin(), order.end(), 0);
                std::stable_sort(order.begin(), order.end(), [&](int64_t a,
                                                                 int64_t b) {
                  return x.data[r * n + a] < x.data[r * n + b];
                });
                for (int64_t j = 0; j < n; ++j) {
                  v.data[r * n + j] = x.data[r * n + order[j]];
                  idx.data[r * n + j] = double(order[j]);
                }
              }
              return std::vector<Tensor>{v, idx};
            })
            .Case([&](nn::FloorDivOp f) {
              return one(elementwise(
                  in(f.getLhs()), in(f.getRhs()), f.getType(),
                  [](double a, double b) { return std::floor(a / b); }));
            })
            .Case([&](nn::HistcOp h) {
              const Tensor &x = in(h.getInput());
              Tensor counts = Tensor::zeros(shapeOf(h.getType()));
              int64_t bins = h.getBins();
              double lo = h.getMin().convertToDouble(),
                     hi = h.getMax().convertToDouble();
              for (double v : x.data)
                if (v >= lo && v <= hi)
                  counts.data[std::min<int64_t>(
                      bins - 1, int64_t((v - lo) * bins / (hi - lo)))] += 1;
              return one(counts);
            })
            .Case([&](nn::InvertPermutationOp p) {
              Tensor inv = in(p.getInput());
              for (int64_t i = 0; i < inv.numel(); ++i)
                inv.data[int64_t(in(p.getInput()).data[i])] = double(i);
              return one(inv);
            })
            .Case([&](nn::GroupedMatmulOp g) {
              const Tensor &x = in(g.getInput()), &w = in(g.getWeight()),
                           &ends = in(g.getOffsets());
              Tensor y = Tensor::zeros(shapeOf(g.getType()));
              int64_t k = w.shape[1], n = w.shape[2], begin = 0;
              for (int64_t e = 0; e < ends.numel(); begin = ends.data[e++])
                for (int64_t r = begin; r < int64_t(ends.data[e]); ++r)
                  for (int64_t c = 0; c < n; ++c)
                    for (int64_t j = 0; j < k; ++j)
                      y.data[r * n + c] +=
                          x.data[r * k + j] * w.data[(e * k + j) * n + c];
              return one(y);
            })
            .Case([&](nn::GroupedMatmulGradWeightOp g) {
              const Tensor &x = in(g.getInput()), &dy = in(g.getGrad()),
                           &ends = in(g.getOffsets());
              Tensor dw = Tensor::zeros(shapeOf(g.getType()));
              int64_t k = dw.shape[1], n = dw.shape[2], begin = 0;
              for (int64_t e = 0; e < ends.numel(); begin = ends.data[e++])
                for (int64_t r = begin; r < int64_t(ends.data[e]); ++r)
                  for (int64_t j = 0; j < k; ++j)
                    for (int64_t c = 0; c < n; ++c)
                      dw.data[(e * k + j) * n + c] +=
                          x.data[r * k + j] * dy.data[r * n + c];
              return one(dw);
            })
            .Case([&](fsdp::SGDStepOp s) {
              Tensor p = in(s.getParam());
              const Tensor &g = in(s.getGrad());
              for (int64_t i = 0; i < p.numel(); ++i)
                p.data[i] -= s.getLr().convertToDouble() * g.data[i];
              return one(p);
            })
            .Case([&](func::ReturnOp) { return std::vector<Tensor>{}; })
            .Default([](Operation *) { return std::nullopt; });
    if (!results) {
      error = "the reference evaluator does not know " +
              op.getName().getStringRef().str();
      return failure();
    }
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      std::vector<Tensor> outputs;
      for (Value v : ret.getOperands())
        outputs.push_back(values[v]);
      return outputs;
    }
    for (auto [result, tensor] : llvm::zip(op.getResults(), *results))
      values[result] = tensor;
  }
  error = "no func.return";
  return failure();
}
