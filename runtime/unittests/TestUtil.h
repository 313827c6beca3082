//===- TestUtil.h - Shared helpers of the runtime tests ---------*- C++ -*-===//
//
// A Device owns a context on one backend and moves f32 (or other) vectors in
// and out through the C ABI, so that the conformance tests exercise exactly
// the entry points generated code calls. Gradient checks compare a kernel's
// backward with float64 central finite differences of a float64 reference
// forward written independently in the test.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_UNITTESTS_TESTUTIL_H
#define FSDP_RT_UNITTESTS_TESTUTIL_H

#include "fsdp/rt/fsdprt.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {
namespace test {

/// Asserts FSDPRT_OK and prints fsdprt_last_error() otherwise.
#define RT_OK(call)                                                            \
  do {                                                                         \
    int32_t rtStatus_ = (call);                                                \
    ASSERT_EQ(rtStatus_, FSDPRT_OK)                                            \
        << #call << " failed: " << fsdprt_last_error();                        \
  } while (0)

/// Non-fatal variant for helpers that return a value.
#define RT_EXPECT_OK(call)                                                     \
  EXPECT_EQ((call), FSDPRT_OK) << #call << " failed: " << fsdprt_last_error()

class Device {
public:
  explicit Device(const std::string &backend, int threads = 2,
                  int64_t arenaBytes = int64_t(64) << 20);
  ~Device();
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;

  int64_t ctx = 0;
  static constexpr int64_t stream = FSDPRT_DEFAULT_STREAM;

  int64_t alloc(int64_t bytes);
  int64_t upload(const void *data, int64_t bytes);
  template <typename T> int64_t upload(const std::vector<T> &v) {
    return upload(v.data(), static_cast<int64_t>(v.size() * sizeof(T)));
  }
  void download(int64_t buf, void *dst, int64_t bytes);
  template <typename T = float>
  std::vector<T> download(int64_t buf, int64_t n) {
    std::vector<T> v(n);
    download(buf, v.data(), n * static_cast<int64_t>(sizeof(T)));
    return v;
  }
  void sync();
};

/// Values with |v| in [0.1, 1] and random sign: never zero, away from the
/// kinks of relu and the like.
std::vector<float> randomVector(int64_t n, uint32_t seed, float lo = 0.1f,
                                float hi = 1.0f);

using Inputs = std::vector<std::vector<double>>;
using Reference = std::function<std::vector<double>(const Inputs &)>;

std::vector<double> toDouble(const std::vector<float> &v);

/// d(sum(reference(inputs) * cotangent)) / d(inputs[which]), by float64
/// central differences with step h.
std::vector<double> finiteDifferenceGrad(const Reference &reference,
                                         Inputs inputs, size_t which,
                                         const std::vector<double> &cotangent,
                                         double h = 1e-5);

/// Tolerance for f32 kernels against float64 references. Inputs are O(1) and
/// every kernel here sums at most a few hundred O(1) products in f32 (unit
/// roundoff 6e-8), so honest errors stay below ~1e-5 of the output scale;
/// the bound (1e-4 of the scale + 1e-3 relative) leaves >10x margin while a
/// wrong index, sign or missing term moves values by O(0.1).
void expectClose(const std::vector<float> &got, const std::vector<double> &want,
                 const std::string &what, double rtol = 1e-3,
                 double atolScale = 1e-4);

/// Runs finiteDifferenceGrad for each input with a non-empty `got` entry and
/// compares.
void expectGradients(const Reference &reference, const Inputs &inputs,
                     const std::vector<double> &cotangent,
                     const std::vector<std::vector<float>> &got,
                     const std::vector<std::string> &names);

/// The backends the conformance suites run on: every suite instantiated
/// with FSDPRT_INSTANTIATE_CONFORMANCE runs on each. A new backend gets its
/// own test binary (runtime/unittests/CMakeLists.txt, as
/// fsdprt_cuda_unittests) linking the suites, compiled once, with
/// ConformanceBackend.cpp compiled for its name, so that its cases carry
/// their own CTest label.
std::vector<std::string> conformanceBackends();

#define FSDPRT_INSTANTIATE_CONFORMANCE(Suite)                                  \
  INSTANTIATE_TEST_SUITE_P(                                                    \
      Backends, Suite,                                                         \
      ::testing::ValuesIn(::fsdp::rt::test::conformanceBackends()),            \
      [](const ::testing::TestParamInfo<std::string> &info) {                  \
        return info.param;                                                     \
      })

} // namespace test
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_UNITTESTS_TESTUTIL_H
