//===- Init.cpp - Deterministic parameter initialisation ------------------===//
#include "runner/Init.h"

#include "fsdp/rt/math/Half.h"
#include "fsdp/rt/math/Philox.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t numelOf(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Uniform in [0, 1) with 53 random bits.
double uniform53(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi >> 5) << 26) | (lo >> 6);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

/// Inverse error function: Giles' approximation ("Approximating the erfinv
/// function", GPU Gems 2012) refined by two Newton steps on std::erf, which
/// brings it to double precision. erfinv(+-1) = +-inf.
double erfinv(double y) {
  if (y <= -1.0)
    return -std::numeric_limits<double>::infinity();
  if (y >= 1.0)
    return std::numeric_limits<double>::infinity();
  double w = -std::log((1.0 - y) * (1.0 + y)), p;
  if (w < 5.0) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                     0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      p = c + p * w;
  } else {
    w = std::sqrt(w) - 3.0;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844,
                     0.00573950773, -0.0076224613, 0.00943887047, 1.00167406,
                     2.83297682})
      p = c + p * w;
  }
  double x = p * y;
  for (int i = 0; i < 2; ++i) {
    double slope = 2.0 / std::sqrt(kPi) * std::exp(-x * x);
    if (slope == 0.0)
      break;
    x -= (std::erf(x) - y) / slope;
  }
  return x;
}

double normalCdf(double x) { return 0.5 * (1.0 + std::erf(x / std::sqrt(2.0))); }

/// One initializer reduced to an affine map of a standard distribution:
/// value = offset + scale * X, X uniform [0,1), standard normal or (trunc)
/// erfinv of a uniform in [lo, hi), then clamped to [clampLo, clampHi].
struct Sampler {
  enum Kind { Constant, Uniform, Normal, TruncNormal } kind = Constant;
  double offset = 0, scale = 1;
  double lo = 0, hi = 1;           // TruncNormal: uniform range before erfinv
  double clampLo = 0, clampHi = 0; // TruncNormal: [a, b]
  uint64_t seed = 0, hash = 0;

  double operator()(uint64_t index) const {
    if (kind == Constant)
      return offset;
    rt::Philox4x32 r = rt::philoxBlock(seed, hash, hash >> 32, index);
    double u = uniform53(r.v[0], r.v[1]);
    switch (kind) {
    case Uniform:
      return offset + scale * u;
    case Normal: {
      double u1 = 1.0 - u, u2 = uniform53(r.v[2], r.v[3]);
      return offset +
             scale * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
    }
    case TruncNormal: {
      double x = offset + scale * erfinv(lo + (hi - lo) * u);
      return std::min(std::max(x, clampLo), clampHi);
    }
    default:
      return offset;
    }
  }
};

Sampler uniformSampler(double a, double b) {
  Sampler s;
  s.kind = Sampler::Uniform;
  s.offset = a;
  s.scale = b - a;
  return s;
}

Sampler normalSampler(double mean, double std) {
  Sampler s;
  s.kind = Sampler::Normal;
  s.offset = mean;
  s.scale = std;
  return s;
}

Sampler constantSampler(double v) {
  Sampler s;
  s.offset = v;
  return s;
}

/// torch.nn.init.trunc_normal_: uniform in [2l-1, 2u-1) with l, u the
/// normal CDF at the bounds, erfinv, x * std * sqrt(2) + mean, clamp.
Sampler truncNormalSampler(double mean, double std, double a, double b) {
  Sampler s;
  s.kind = Sampler::TruncNormal;
  s.offset = mean;
  s.scale = std * std::sqrt(2.0);
  s.lo = 2.0 * normalCdf((a - mean) / std) - 1.0;
  s.hi = 2.0 * normalCdf((b - mean) / std) - 1.0;
  s.clampLo = a;
  s.clampHi = b;
  return s;
}

Sampler makeSampler(const InitSpec &init, const std::vector<int64_t> &shape,
                    const std::string &name) {
  const std::string &k = init.kind;
  const std::vector<double> &a = init.args;
  auto need = [&](size_t n) {
    if (a.size() != n)
      throw std::runtime_error("init of '" + name + "': " + k + " takes " +
                               std::to_string(n) + " arguments, got " +
                               std::to_string(a.size()));
  };
  if (k == "zeros" || k == "ones") {
    need(0);
    return constantSampler(k == "ones" ? 1.0 : 0.0);
  }
  if (k == "constant") {
    need(1);
    return constantSampler(a[0]);
  }
  if (k == "uniform") {
    need(2);
    return uniformSampler(a[0], a[1]);
  }
  if (k == "normal") {
    need(2);
    return normalSampler(a[0], a[1]);
  }
  if (k == "trunc_normal") {
    need(4);
    return truncNormalSampler(a[0], a[1], a[2], a[3]);
  }
  if (k == "xavier_uniform" || k == "xavier_normal") {
    need(1);
    Fans f = computeFans(shape, name);
    double std = a[0] * std::sqrt(2.0 / static_cast<double>(f.fanIn + f.fanOut));
    if (k == "xavier_normal")
      return normalSampler(0.0, std);
    double bound = std::sqrt(3.0) * std;
    return uniformSampler(-bound, bound);
  }
  if (k == "kaiming_uniform" || k == "kaiming_normal") {
    // mode fan_in, nonlinearity leaky_relu with negative slope a.
    need(1);
    Fans f = computeFans(shape, name);
    double gain = std::sqrt(2.0 / (1.0 + a[0] * a[0]));
    double std = gain / std::sqrt(static_cast<double>(f.fanIn));
    if (k == "kaiming_normal")
      return normalSampler(0.0, std);
    double bound = std::sqrt(3.0) * std;
    return uniformSampler(-bound, bound);
  }
  throw std::runtime_error("init of '" + name + "': unknown initializer '" + k +
                           "'");
}

/// Rounds once from double to the buffer's dtype.
void storeAs(const std::string &dtype, const std::vector<float> &values,
             uint8_t *dst) {
  size_t n = values.size();
  if (dtype == "f32") {
    std::memcpy(dst, values.data(), n * 4);
  } else if (dtype == "bf16" || dtype == "f16") {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h = dtype == "bf16" ? rt::floatToBf16(values[i])
                                   : rt::floatToF16(values[i]);
      std::memcpy(dst + 2 * i, &h, 2);
    }
  } else if (dtype == "i32") {
    for (size_t i = 0; i < n; ++i) {
      int32_t v = static_cast<int32_t>(std::llround(values[i]));
      std::memcpy(dst + 4 * i, &v, 4);
    }
  } else if (dtype == "i64") {
    for (size_t i = 0; i < n; ++i) {
      int64_t v = std::llround(values[i]);
      std::memcpy(dst + 8 * i, &v, 8);
    }
  } else {
    throw std::runtime_error("init: unsupported buffer dtype '" + dtype + "'");
  }
}

void initUnitShard(const Program &program, const UnitInfo &unit,
                   uint64_t seed, int rank, uint8_t *image) {
  // A rank-local unit (MixtureOfExperts' expert) differs between ranks, as
  // PyTorch's test seeds it with 42 + rank: each rank has its own stream.
  // FSDP's ignored parameters start as the model's, the same everywhere.
  if (unit.rankLocal && !unit.ignored)
    seed = rankLocalSeed(seed, rank);
  int64_t begin = shardBegin(program, unit, rank);
  int64_t end = begin + unit.shardNumel;
  std::vector<float> values;
  for (const ParamInfo &p : unit.params) {
    int64_t lo = std::max(begin, p.flatOffset);
    int64_t hi = std::min(end, p.flatOffset + numelOf(p.shape));
    if (lo >= hi)
      continue;
    values.resize(hi - lo);
    initRange(p.init, p.shape, seed, p.name, lo - p.flatOffset, hi - lo,
              values.data());
    std::memcpy(image + unit.offset + (lo - begin) * 4, values.data(),
                values.size() * 4);
  }
}

} // namespace

uint64_t nameHash(const std::string &name) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Fans computeFans(const std::vector<int64_t> &shape, const std::string &name) {
  if (shape.size() < 2)
    throw std::runtime_error("init of '" + name + "': fan in and fan out need "
                             "at least 2 dimensions, the shape is " +
                             shapeString(shape));
  int64_t receptive = 1;
  for (size_t i = 2; i < shape.size(); ++i)
    receptive *= shape[i];
  return Fans{shape[1] * receptive, shape[0] * receptive};
}

void initRange(const InitSpec &init, const std::vector<int64_t> &shape,
               uint64_t seed, const std::string &name, int64_t begin,
               int64_t count, float *out) {
  if (begin < 0 || count < 0 || begin + count > numelOf(shape))
    throw std::runtime_error("init of '" + name + "': elements [" +
                             std::to_string(begin) + ", " +
                             std::to_string(begin + count) +
                             ") are outside the shape " + shapeString(shape));
  if (count == 0)
    return;
  Sampler sample = makeSampler(init, shape, name);
  sample.seed = seed;
  sample.hash = nameHash(name);
  for (int64_t i = 0; i < count; ++i)
    out[i] = static_cast<float>(sample(static_cast<uint64_t>(begin + i)));
}

std::vector<float> initTensor(const InitSpec &init,
                              const std::vector<int64_t> &shape, uint64_t seed,
                              const std::string &name) {
  std::vector<float> values(numelOf(shape));
  initRange(init, shape, seed, name, 0, static_cast<int64_t>(values.size()),
            values.data());
  return values;
}

uint64_t rankLocalSeed(uint64_t seed, int rank) {
  return seed ^ (0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(rank) + 1));
}

int64_t shardBegin(const Program &program, const UnitInfo &unit, int rank) {
  if (unit.shardNumel == unit.paddedNumel)
    return 0;
  return static_cast<int64_t>(program.mesh().shardIndex(rank)) *
         unit.shardNumel;
}

void initializeRank(const Program &program, uint64_t seed, int rank,
                    std::vector<uint8_t> &persistent) {
  if (rank < 0 || rank >= program.worldSize)
    throw std::runtime_error("init: rank " + std::to_string(rank) +
                             " is not in a world of " +
                             std::to_string(program.worldSize));
  // Zero: optimizer state, the padding at the end of the last shards, and
  // whatever is not a parameter or buffer.
  persistent.assign(program.imageBytes(), 0);
  for (const UnitInfo &unit : program.units)
    initUnitShard(program, unit, seed, rank, persistent.data());
  for (const BufferInfo &b : program.buffers)
    storeAs(b.dtype, initTensor(b.init, b.shape, seed, b.name),
            persistent.data() + b.offset);
}

} // namespace driver
} // namespace fsdp
