//===- OffloadTest.cpp - host buffers and host streams (CPU offload) ------===//
//
// CPU offload's runtime pieces on every backend: a parameter, its gradient
// and momentum in host buffers; the gradient copied device-to-host on one
// stream, SGD run on a host stream once that copy is done, the parameter
// copied back to the device after the update. Values against a float64
// reference; a host stream refuses device memory; a context with a host
// stream refuses to capture a step graph.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

namespace fsdp {
namespace rt {
namespace test {
namespace {

class OffloadConformance : public ::testing::TestWithParam<std::string> {};

constexpr int64_t kN = 1000;

int64_t hostBuffer(Device &dev, const std::vector<float> &values) {
  int64_t buf = 0;
  EXPECT_EQ(fsdprt_buffer_alloc_host(dev.ctx, kN * 4, &buf), FSDPRT_OK)
      << fsdprt_last_error();
  EXPECT_EQ(fsdprt_copy_from_host(dev.ctx, dev.stream, buf, 0, values.data(),
                                  kN * 4),
            FSDPRT_OK)
      << fsdprt_last_error();
  dev.sync(); // the copy reads `values`, which may be a temporary
  return buf;
}

TEST_P(OffloadConformance, GradientToHostUpdateOnHostParameterBack) {
  Device dev(GetParam());
  std::vector<float> p0 = randomVector(kN, 1), g0 = randomVector(kN, 2);
  int64_t param = hostBuffer(dev, p0);
  int64_t grad = hostBuffer(dev, std::vector<float>(kN, 0.0f));
  int64_t momentum = hostBuffer(dev, std::vector<float>(kN, 0.0f));
  int64_t deviceGrad = dev.upload(g0), deviceParam = dev.alloc(kN * 4);
  int64_t toHost = 0, host = 0, copied = 0, updated = 0;
  RT_OK(fsdprt_stream_create(dev.ctx, &toHost));
  RT_OK(fsdprt_stream_create_host(dev.ctx, &host));
  RT_OK(fsdprt_event_create(dev.ctx, &copied));
  RT_OK(fsdprt_event_create(dev.ctx, &updated));
  dev.sync();

  RT_OK(fsdprt_copy(dev.ctx, toHost, grad, 0, deviceGrad, 0, kN * 4));
  RT_OK(fsdprt_event_record(dev.ctx, copied, toHost));
  RT_OK(fsdprt_stream_wait_event(dev.ctx, host, copied));
  const double lr = 0.1, mom = 0.9, wd = 0.01;
  RT_OK(fsdprt_sgd_step(dev.ctx, host, FSDPRT_F32, param, 0, grad, 0,
                        momentum, 0, kN, 1, lr, mom, 0.0, wd, 0, 0, 0));
  RT_OK(fsdprt_event_record(dev.ctx, updated, host));
  RT_OK(fsdprt_stream_wait_event(dev.ctx, dev.stream, updated));
  RT_OK(fsdprt_copy(dev.ctx, dev.stream, deviceParam, 0, param, 0, kN * 4));
  RT_OK(fsdprt_context_synchronize(dev.ctx));

  std::vector<float> onDevice = dev.download(deviceParam, kN);
  std::vector<float> onHost(kN), buffer(kN);
  RT_OK(fsdprt_copy_to_host(dev.ctx, dev.stream, onHost.data(), param, 0,
                            kN * 4));
  RT_OK(fsdprt_copy_to_host(dev.ctx, dev.stream, buffer.data(), momentum, 0,
                            kN * 4));
  dev.sync();
  for (int64_t i = 0; i < kN; ++i) {
    // torch.optim.SGD's first step: the buffer is the decayed gradient.
    double g = double(g0[i]) + wd * double(p0[i]);
    double want = double(p0[i]) - lr * g;
    EXPECT_NEAR(onHost[i], want, 1e-6) << i;
    EXPECT_EQ(onDevice[i], onHost[i]) << i;
    EXPECT_NEAR(buffer[i], g, 1e-6) << i;
  }
  for (int64_t e : {copied, updated})
    RT_OK(fsdprt_event_destroy(dev.ctx, e));
  for (int64_t b : {param, grad, momentum})
    RT_OK(fsdprt_buffer_free(dev.ctx, dev.stream, b));
  dev.sync();
}

TEST_P(OffloadConformance, HostStreamRefusesDeviceMemory) {
  Device dev(GetParam());
  int64_t arena = dev.upload(randomVector(kN, 3)), host = 0;
  RT_OK(fsdprt_stream_create_host(dev.ctx, &host));
  void *ptr = nullptr;
  bool hostMemory =
      fsdprt_buffer_host_ptr(dev.ctx, arena, 0, &ptr) == FSDPRT_OK;
  int32_t rc = fsdprt_fill(dev.ctx, host, FSDPRT_F32, arena, 0, kN, 1.0);
  if (hostMemory) { // the CPU backend's arena is host memory
    EXPECT_EQ(rc, FSDPRT_OK) << fsdprt_last_error();
    return;
  }
  EXPECT_EQ(rc, FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_last_error()).find("is in device memory"),
            std::string::npos)
      << fsdprt_last_error();
}

TEST_P(OffloadConformance, HostStreamsRuleOutStepGraphs) {
  Device dev(GetParam());
  int64_t host = 0;
  RT_OK(fsdprt_stream_create_host(dev.ctx, &host));
  EXPECT_EQ(fsdprt_graph_begin(dev.ctx, 0), FSDPRT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(fsdprt_last_error()).find("host streams"),
            std::string::npos)
      << fsdprt_last_error();
}

FSDPRT_INSTANTIATE_CONFORMANCE(OffloadConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
