//===- StreamTest.cpp - stream ordering, events, errors, delay injection --===//
//
// Delays make a missing dependency lose its race; these tests check that the
// real dependencies (FIFO order, event waits, stream-ordered frees) hold
// with the delays on. Results never depend on timing: a delay can only make
// the waiting side wait longer.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "fsdp/rt/backend/Backend.h"

#include <algorithm>

#include <chrono>
#include <cstdlib>

namespace fsdp {
namespace rt {
namespace test {
namespace {

/// Sets a delay variable for the lifetime of the object (contexts read the
/// environment when they are created).
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name_(name) {
    setenv(name, value, 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

private:
  const char *name_;
};

class StreamConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(StreamConformance, EventWaitOrdersWorkAcrossStreams) {
  ScopedEnv delay("FSDPRT_DELAY_OPTIMIZER_MS", "100");
  Device dev(GetParam());
  int64_t producer, consumer, event;
  RT_OK(fsdprt_stream_create(dev.ctx, &producer));
  RT_OK(fsdprt_stream_create(dev.ctx, &consumer));
  RT_OK(fsdprt_event_create(dev.ctx, &event));
  const int64_t n = 1000;
  int64_t param = dev.upload(std::vector<float>(n, 1.0f));
  int64_t grad = dev.upload(std::vector<float>(n, 2.0f));
  int64_t copy = dev.alloc(n * 4);
  // producer: (delayed) SGD step p = 1 - 0.5 * 2 = 0, then record.
  RT_OK(fsdprt_sgd_step(dev.ctx, producer, FSDPRT_F32, param, 0, grad, 0, 0, 0,
                        n, 1, 0.5, 0, 0, 0, 0, 0, 0));
  RT_OK(fsdprt_event_record(dev.ctx, event, producer));
  // consumer: wait for the event, then copy and scale the parameter.
  RT_OK(fsdprt_stream_wait_event(dev.ctx, consumer, event));
  RT_OK(fsdprt_copy(dev.ctx, consumer, copy, 0, param, 0, n * 4));
  RT_OK(fsdprt_scale_forward(dev.ctx, consumer, FSDPRT_F32, copy, 0, copy, 0, n,
                             3.0));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, consumer));
  int32_t done = 0;
  RT_OK(fsdprt_event_query(dev.ctx, event, &done));
  EXPECT_EQ(done, 1) << "consumer finished before the event it waited for";
  EXPECT_EQ(dev.download(copy, n), std::vector<float>(n, 0.0f));
  RT_OK(fsdprt_event_destroy(dev.ctx, event));
  RT_OK(fsdprt_stream_destroy(dev.ctx, producer));
  RT_OK(fsdprt_stream_destroy(dev.ctx, consumer));
}

TEST_P(StreamConformance, WaitBindsToTheRecordMadeBeforeIt) {
  ScopedEnv delay("FSDPRT_DELAY_OPTIMIZER_MS", "100");
  Device dev(GetParam());
  int64_t slow, fast, consumer, event;
  RT_OK(fsdprt_stream_create(dev.ctx, &slow));
  RT_OK(fsdprt_stream_create(dev.ctx, &fast));
  RT_OK(fsdprt_stream_create(dev.ctx, &consumer));
  RT_OK(fsdprt_event_create(dev.ctx, &event));
  int64_t param = dev.upload(std::vector<float>{1.0f});
  int64_t grad = dev.upload(std::vector<float>{4.0f});
  int64_t copy = dev.alloc(4);
  RT_OK(fsdprt_sgd_step(dev.ctx, slow, FSDPRT_F32, param, 0, grad, 0, 0, 0, 1,
                        1, 0.25, 0, 0, 0, 0, 0, 0));
  RT_OK(fsdprt_event_record(dev.ctx, event, slow));
  RT_OK(fsdprt_stream_wait_event(dev.ctx, consumer, event));
  // A later record on an idle stream completes first; the consumer must
  // still wait for the slow stream's record.
  RT_OK(fsdprt_event_record(dev.ctx, event, fast));
  RT_OK(fsdprt_copy(dev.ctx, consumer, copy, 0, param, 0, 4));
  dev.sync();
  EXPECT_EQ(dev.download(copy, 1)[0], 0.0f);
  for (int64_t s : {slow, fast, consumer})
    RT_OK(fsdprt_stream_destroy(dev.ctx, s));
  RT_OK(fsdprt_event_destroy(dev.ctx, event));
}

TEST_P(StreamConformance, OptimizerDelayIsApplied) {
  ScopedEnv delay("FSDPRT_DELAY_OPTIMIZER_MS", "60");
  Device dev(GetParam());
  int64_t p = dev.upload(std::vector<float>(4, 1.0f)),
          g = dev.upload(std::vector<float>(4, 1.0f));
  auto start = std::chrono::steady_clock::now();
  RT_OK(fsdprt_sgd_step(dev.ctx, dev.stream, FSDPRT_F32, p, 0, g, 0, 0, 0, 4, 1,
                        0.1, 0, 0, 0, 0, 0, 0));
  dev.sync();
  // sleep_for guarantees at least the requested duration.
  EXPECT_GE(std::chrono::steady_clock::now() - start,
            std::chrono::milliseconds(60));
}

TEST_P(StreamConformance, OperationsOnOneStreamRunInOrder) {
  Device dev(GetParam());
  const int64_t n = 257;
  int64_t buf = dev.alloc(n * 4);
  RT_OK(fsdprt_fill(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, n, 1.0));
  // ((1 * 2 + 1) * 2 + 1) ... : any reordering changes the value.
  int64_t one = dev.upload(std::vector<float>(n, 1.0f));
  const int64_t shape[1] = {n};
  for (int i = 0; i < 10; ++i) {
    RT_OK(fsdprt_scale_forward(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, buf, 0,
                               n, 2.0));
    RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_ADD,
                                buf, 0, 1, shape, one, 0, 1, shape, buf, 0));
  }
  EXPECT_EQ(dev.download(buf, n), std::vector<float>(n, 2047.0f));
}

TEST_P(StreamConformance, DelayedFreeIsStreamOrderedAndReuseWaits) {
  ScopedEnv delay("FSDPRT_DELAY_FREE_MS", "80");
  Device dev(GetParam(), 2, 4096);
  int64_t side;
  RT_OK(fsdprt_stream_create(dev.ctx, &side));
  int64_t a;
  RT_OK(fsdprt_buffer_alloc_at(dev.ctx, 0, 4096, &a));
  RT_OK(fsdprt_fill(dev.ctx, side, FSDPRT_F32, a, 0, 1024, 5.0));
  RT_OK(fsdprt_buffer_free(dev.ctx, side, a));
  // The handle is dead at once...
  int64_t size;
  EXPECT_EQ(fsdprt_buffer_size(dev.ctx, a, &size), FSDPRT_ERR_INVALID_HANDLE);
  // ...but the bytes come back only when the side stream has run the free:
  // this allocation waits for it instead of overlapping live data.
  int64_t b;
  RT_OK(fsdprt_buffer_alloc_at(dev.ctx, 0, 4096, &b));
  int64_t peak, extent, inUse;
  RT_OK(fsdprt_arena_high_water(dev.ctx, &peak, &extent));
  RT_OK(fsdprt_arena_in_use(dev.ctx, &inUse));
  EXPECT_EQ(peak, 4096);
  EXPECT_EQ(extent, 4096);
  EXPECT_EQ(inUse, 4096);
  RT_OK(fsdprt_stream_destroy(dev.ctx, side));
}

TEST_P(StreamConformance, FailureSurfacesAtSynchronizeAndEventsStillFire) {
  Device dev(GetParam());
  int64_t failing, waiting, event;
  RT_OK(fsdprt_stream_create(dev.ctx, &failing));
  RT_OK(fsdprt_stream_create(dev.ctx, &waiting));
  RT_OK(fsdprt_event_create(dev.ctx, &event));
  std::vector<int32_t> ids{0, 5};
  int64_t bids = dev.upload(ids), table = dev.upload(randomVector(4, 1)),
          out = dev.alloc(4 * 4), after = dev.upload(std::vector<float>{1, 1});
  RT_OK(fsdprt_embedding_forward(dev.ctx, failing, FSDPRT_F32, FSDPRT_I32, bids,
                                 0, table, 0, out, 0, 2, 2, 2));
  // Later kernels on the failed stream are skipped where the check runs on
  // the host (CPU) and run where it runs on the device and is read at the
  // next synchronisation (CUDA, like PyTorch's device-side asserts)...
  RT_OK(fsdprt_scale_forward(dev.ctx, failing, FSDPRT_F32, after, 0, after, 0,
                             2, 10.0));
  // ...but its event records still fire, so the waiting stream does not hang.
  RT_OK(fsdprt_event_record(dev.ctx, event, failing));
  RT_OK(fsdprt_stream_wait_event(dev.ctx, waiting, event));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, waiting));
  EXPECT_EQ(fsdprt_stream_synchronize(dev.ctx, failing),
            FSDPRT_ERR_OUT_OF_RANGE);
  // ...and either way the failing stream's synchronize names the op and id.
  std::string msg = fsdprt_last_error();
  EXPECT_NE(msg.find("embedding_forward"), std::string::npos) << msg;
  EXPECT_NE(msg.find("token id 5"), std::string::npos) << msg;
  std::vector<float> later = dev.download(after, 2);
  EXPECT_TRUE(later == (std::vector<float>{1, 1}) ||
              later == (std::vector<float>{10, 10}))
      << later[0] << ", " << later[1];
  RT_OK(fsdprt_stream_destroy(dev.ctx, failing));
  RT_OK(fsdprt_stream_destroy(dev.ctx, waiting));
  RT_OK(fsdprt_event_destroy(dev.ctx, event));
}

TEST_P(StreamConformance, WaitOnUnrecordedEventIsNoOp) {
  Device dev(GetParam());
  int64_t event;
  RT_OK(fsdprt_event_create(dev.ctx, &event));
  RT_OK(fsdprt_stream_wait_event(dev.ctx, dev.stream, event));
  RT_OK(fsdprt_event_synchronize(dev.ctx, event));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, dev.stream));
}

TEST(DelayConfig, MalformedValueFailsContextCreation) {
  std::vector<std::string> backends = registeredBackends();
  if (std::find(backends.begin(), backends.end(), "cpu") == backends.end())
    GTEST_SKIP() << "no CPU backend in this build";
  ScopedEnv delay("FSDPRT_DELAY_ALLGATHER_MS", "12ms");
  int64_t ctx = 0;
  EXPECT_EQ(fsdprt_context_create("cpu", 0, 1, 1024, 1, &ctx),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_last_error()).find("FSDPRT_DELAY_ALLGATHER_MS"),
            std::string::npos)
      << fsdprt_last_error();
}

FSDPRT_INSTANTIATE_CONFORMANCE(StreamConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
