//===- LinearTest.cpp - linear and matmul conformance ---------------------===//
#include "TestUtil.h"

namespace fsdp {
namespace rt {
namespace test {
namespace {

class LinearConformance : public ::testing::TestWithParam<std::string> {};

// y[m,n] = x[m,k] w[n,k]^T + b[n]
Reference linearRef(int64_t m, int64_t k, int64_t n, bool bias) {
  return [=](const Inputs &in) {
    std::vector<double> y(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = bias ? in[2][j] : 0.0;
        for (int64_t p = 0; p < k; ++p)
          s += in[0][i * k + p] * in[1][j * k + p];
        y[i * n + j] = s;
      }
    return y;
  };
}

void checkLinear(const std::string &backend, bool bias, int64_t m = 6) {
  Device dev(backend);
  // x is [2, 3, 5] (leading dims flattened into m = 6).
  const int64_t k = 5, n = 4;
  auto x = randomVector(m * k, 1), w = randomVector(n * k, 2),
       b = randomVector(n, 3), dy = randomVector(m * n, 4);
  int64_t bx = dev.upload(x), bw = dev.upload(w), bb = bias ? dev.upload(b) : 0;
  int64_t by = dev.alloc(m * n * 4), bdy = dev.upload(dy);
  int64_t bdx = dev.alloc(m * k * 4), bdw = dev.alloc(n * k * 4),
          bdb = bias ? dev.alloc(n * 4) : 0;
  RT_OK(fsdprt_linear_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw, 0, bb,
                              0, by, 0, m, k, n));
  RT_OK(fsdprt_linear_backward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, bw, 0,
                               bdy, 0, bdx, 0, bdw, 0, bdb, 0, m, k, n));
  Inputs in{toDouble(x), toDouble(w)};
  if (bias)
    in.push_back(toDouble(b));
  Reference ref = linearRef(m, k, n, bias);
  expectClose(dev.download(by, m * n), ref(in), "y");
  std::vector<std::vector<float>> grads{dev.download(bdx, m * k),
                                        dev.download(bdw, n * k)};
  if (bias)
    grads.push_back(dev.download(bdb, n));
  expectGradients(ref, in, toDouble(dy), grads, {"dx", "dw", "db"});
}

TEST_P(LinearConformance, LinearWithBiasMatchesReferenceAndFiniteDifferences) {
  checkLinear(GetParam(), true);
}

TEST_P(LinearConformance, LinearWithoutBias) { checkLinear(GetParam(), false); }

// More rows than one chunk of the bias gradient's column sums.
TEST_P(LinearConformance, LinearManyRows) {
  checkLinear(GetParam(), true, 150);
}

struct MatmulCase {
  bool transA, transB, bBatched;
};

class MatmulConformance
    : public ::testing::TestWithParam<std::tuple<std::string, MatmulCase>> {};

TEST_P(MatmulConformance, MatchesReferenceAndFiniteDifferences) {
  const std::string backend = std::get<0>(GetParam());
  const MatmulCase mc = std::get<1>(GetParam());
  Device dev(backend);
  const int64_t batch = 2, m = 3, k = 4, n = 5;
  int64_t bCount = mc.bBatched ? batch : 1;
  auto a = randomVector(batch * m * k, 11),
       b = randomVector(bCount * k * n, 12),
       dc = randomVector(batch * m * n, 13);
  Reference ref = [=](const Inputs &in) {
    std::vector<double> c(batch * m * n);
    for (int64_t t = 0; t < batch; ++t) {
      const double *A = in[0].data() + t * m * k;
      const double *B = in[1].data() + (mc.bBatched ? t * k * n : 0);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double s = 0;
          for (int64_t p = 0; p < k; ++p)
            s += (mc.transA ? A[p * m + i] : A[i * k + p]) *
                 (mc.transB ? B[j * k + p] : B[p * n + j]);
          c[(t * m + i) * n + j] = s;
        }
    }
    return c;
  };
  int64_t ba = dev.upload(a), bb = dev.upload(b), bdc = dev.upload(dc);
  int64_t bc = dev.alloc(batch * m * n * 4), bda = dev.alloc(a.size() * 4),
          bdb = dev.alloc(b.size() * 4);
  RT_OK(fsdprt_matmul_forward(dev.ctx, dev.stream, FSDPRT_F32, ba, 0, bb, 0, bc,
                              0, batch, m, k, n, mc.transA, mc.transB,
                              mc.bBatched));
  RT_OK(fsdprt_matmul_backward(dev.ctx, dev.stream, FSDPRT_F32, ba, 0, bb, 0,
                               bdc, 0, bda, 0, bdb, 0, batch, m, k, n,
                               mc.transA, mc.transB, mc.bBatched));
  Inputs in{toDouble(a), toDouble(b)};
  expectClose(dev.download(bc, batch * m * n), ref(in), "c");
  expectGradients(ref, in, toDouble(dc),
                  {dev.download(bda, a.size()), dev.download(bdb, b.size())},
                  {"da", "db"});
}

FSDPRT_INSTANTIATE_CONFORMANCE(LinearConformance);

INSTANTIATE_TEST_SUITE_P(
    Backends, MatmulConformance,
    ::testing::Combine(::testing::ValuesIn(conformanceBackends()),
                       ::testing::Values(MatmulCase{false, false, true},
                                         MatmulCase{true, false, true},
                                         MatmulCase{false, true, true},
                                         MatmulCase{true, true, true},
                                         MatmulCase{false, false, false},
                                         MatmulCase{true, true, false})),
    [](const auto &info) {
      const MatmulCase &c = std::get<1>(info.param);
      return std::get<0>(info.param) + (c.transA ? "_TA" : "_NA") +
             (c.transB ? "_TB" : "_NB") + (c.bBatched ? "_Batched" : "_Shared");
    });

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
