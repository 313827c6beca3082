//===- TestUtil.cpp - Shared helpers of the runtime tests -----------------===//
#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

namespace fsdp {
namespace rt {
namespace test {

Device::Device(const std::string &backend, int threads, int64_t arenaBytes) {
  int32_t status =
      fsdprt_context_create(backend.c_str(), 0, 1, arenaBytes, threads, &ctx);
  if (status != FSDPRT_OK)
    ADD_FAILURE() << "context_create(" << backend
                  << ") failed: " << fsdprt_last_error();
}

Device::~Device() {
  if (ctx && fsdprt_context_destroy(ctx) != FSDPRT_OK)
    ADD_FAILURE() << "context_destroy failed: " << fsdprt_last_error();
}

int64_t Device::alloc(int64_t bytes) {
  int64_t buf = 0;
  if (fsdprt_buffer_alloc(ctx, bytes, &buf) != FSDPRT_OK)
    ADD_FAILURE() << "buffer_alloc failed: " << fsdprt_last_error();
  return buf;
}

int64_t Device::upload(const void *data, int64_t bytes) {
  int64_t buf = alloc(bytes);
  if (fsdprt_copy_from_host(ctx, stream, buf, 0, data, bytes) != FSDPRT_OK)
    ADD_FAILURE() << "copy_from_host failed: " << fsdprt_last_error();
  sync(); // the host vector may die right after
  return buf;
}

void Device::download(int64_t buf, void *dst, int64_t bytes) {
  if (fsdprt_copy_to_host(ctx, stream, dst, buf, 0, bytes) != FSDPRT_OK)
    ADD_FAILURE() << "copy_to_host failed: " << fsdprt_last_error();
  sync();
}

void Device::sync() {
  if (fsdprt_context_synchronize(ctx) != FSDPRT_OK)
    ADD_FAILURE() << "synchronize failed: " << fsdprt_last_error();
}

std::vector<float> randomVector(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution sign(0.5);
  std::vector<float> v(n);
  for (float &x : v)
    x = sign(gen) ? mag(gen) : -mag(gen);
  return v;
}

std::vector<double> toDouble(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

std::vector<double> finiteDifferenceGrad(const Reference &reference,
                                         Inputs inputs, size_t which,
                                         const std::vector<double> &cotangent,
                                         double h) {
  auto dot = [&](const std::vector<double> &y) {
    EXPECT_EQ(y.size(), cotangent.size()) << "cotangent size";
    double s = 0;
    for (size_t i = 0; i < y.size() && i < cotangent.size(); ++i)
      s += y[i] * cotangent[i];
    return s;
  };
  std::vector<double> grad(inputs[which].size());
  for (size_t j = 0; j < grad.size(); ++j) {
    double saved = inputs[which][j];
    inputs[which][j] = saved + h;
    double plus = dot(reference(inputs));
    inputs[which][j] = saved - h;
    double minus = dot(reference(inputs));
    inputs[which][j] = saved;
    grad[j] = (plus - minus) / (2 * h);
  }
  return grad;
}

void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 const std::string &what, double rtol, double atolScale) {
  ASSERT_EQ(got.size(), want.size()) << what << ": size mismatch";
  double scale = 1.0;
  for (double w : want)
    scale = std::max(scale, std::fabs(w));
  double atol = atolScale * scale;
  size_t bad = 0, firstBad = got.size();
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double err = std::fabs(got[i] - want[i]);
    bool ok = err <= atol + rtol * std::fabs(want[i]) ||
              (std::isnan(want[i]) && std::isnan(got[i]));
    if (!ok) {
      if (!bad)
        firstBad = i;
      ++bad;
    }
    if (!std::isnan(err))
      worst = std::max(worst, err);
  }
  if (bad) {
    std::ostringstream os;
    os << what << ": " << bad << " of " << got.size()
       << " elements differ; first at index " << firstBad << ": expected "
       << want[firstBad] << ", got " << got[firstBad] << " (max abs error "
       << worst << ", atol " << atol << ")";
    ADD_FAILURE() << os.str();
  }
}

void expectGradients(const Reference &reference, const Inputs &inputs,
                     const std::vector<double> &cotangent,
                     const std::vector<std::vector<float>> &got,
                     const std::vector<std::string> &names) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].empty())
      continue;
    expectClose(got[i], finiteDifferenceGrad(reference, inputs, i, cotangent),
                names[i] + " (vs float64 finite differences)");
  }
}

} // namespace test
} // namespace rt
} // namespace fsdp
