//===- GraphTest.cpp - step graphs: captured once, replayed ---------------===//
//
// A small "step" over two streams (an event between them, a transient
// buffer freed mid-step, an index check, a dropout keyed by the step, a
// bf16 linear, AdamW with the step's bias correction and the lr factor, the
// loss scale): run eagerly for five steps, and again with the second step
// captured and launched for steps 2 to 5. Each step's results must be the
// same bits: a launch takes the step count, lr factor and loss scale of its
// own step. Backends without graphs (cpu) refuse the capture.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "fsdp/rt/math/Half.h"

#include <cstring>
#include <utility>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class GraphConformance : public ::testing::TestWithParam<std::string> {};

constexpr int64_t kRows = 8, kIn = 16, kOut = 8, kVocab = 10;
constexpr int64_t kParams = kOut * kIn;

struct StepState {
  int64_t other = 0; // a second stream
  int64_t ids = 0, table = 0, x = 0, w = 0, b = 0, param = 0, m = 0, v = 0,
          scale = 0, y = 0;
};

StepState setUp(Device &dev) {
  StepState s;
  RT_EXPECT_OK(fsdprt_stream_create(dev.ctx, &s.other));
  std::vector<int32_t> ids{1, 3, 5, 7, 9, 0, 2, 4};
  s.ids = dev.upload(ids);
  s.table = dev.upload(randomVector(kVocab * kIn, 5));
  s.w = dev.upload(randomVector(kOut * kIn, 6));
  s.b = dev.upload(randomVector(kOut, 7));
  s.param = dev.upload(randomVector(kParams, 8));
  s.m = dev.upload(std::vector<float>(kParams, 0.0f));
  s.v = dev.upload(std::vector<float>(kParams, 0.0f));
  s.scale = dev.alloc(4);
  s.y = dev.alloc(kRows * kOut * 4);
  return s;
}

/// One step: embed the ids, drop out (keyed by the step), a linear layer
/// whose output is AdamW's gradient on the other stream.
int32_t step(Device &dev, const StepState &s, int64_t stepCount) {
  int64_t ctx = dev.ctx, main = dev.stream, ev = 0, x = 0, dropped = 0;
  int32_t rc = FSDPRT_OK;
  auto ok = [&](int32_t r) {
    if (rc == FSDPRT_OK)
      rc = r;
    return rc == FSDPRT_OK;
  };
  // A compiled step copies its constants in from the host.
  static const float bias[kOut] = {0.5f, -0.25f, 0.125f, 1.0f,
                                   -1.0f, 0.75f, 0.0f, 2.0f};
  ok(fsdprt_event_create(ctx, &ev));
  ok(fsdprt_copy_from_host(ctx, main, s.b, 0, bias, sizeof(bias)));
  ok(fsdprt_buffer_alloc(ctx, kRows * kIn * 4, &x));
  ok(fsdprt_buffer_alloc(ctx, kRows * kIn * 4, &dropped));
  ok(fsdprt_embedding_forward(ctx, main, FSDPRT_F32, FSDPRT_I32, s.ids, 0,
                              s.table, 0, x, 0, kRows, kVocab, kIn));
  ok(fsdprt_dropout_forward(ctx, main, FSDPRT_F32, x, 0, dropped, 0,
                            kRows * kIn, 0.25, 42, stepCount, 3));
  ok(fsdprt_buffer_free(ctx, main, x));
  ok(fsdprt_linear_forward(ctx, main, FSDPRT_F32, dropped, 0, s.w, 0, s.b, 0,
                           s.y, 0, kRows, kIn, kOut));
  ok(fsdprt_buffer_free(ctx, main, dropped));
  ok(fsdprt_loss_scale(ctx, main, s.scale, 0, 0));
  ok(fsdprt_event_record(ctx, ev, main));
  ok(fsdprt_stream_wait_event(ctx, s.other, ev));
  // y (kRows x kOut) is the gradient of each half of the parameters,
  // updated with other hyperparameters.
  ok(fsdprt_adamw_step(ctx, s.other, FSDPRT_F32, s.param, 0, s.y, 0, s.m, 0,
                       s.v, 0, kRows * kOut, stepCount + 1, 0.01, 0.9, 0.99,
                       1e-8, 0.1, 0, 0, 0));
  ok(fsdprt_adamw_step(ctx, s.other, FSDPRT_F32, s.param, kRows * kOut * 4,
                       s.y, 0, s.m, kRows * kOut * 4, s.v, kRows * kOut * 4,
                       kRows * kOut, stepCount + 1, 0.02, 0.8, 0.9, 1e-8, 0.0,
                       0, 0, 0));
  // As a compiled step ends: waits for its streams (the issue only while
  // capturing), then drops its events.
  ok(fsdprt_context_synchronize(ctx));
  ok(fsdprt_event_destroy(ctx, ev));
  return rc;
}

struct Snapshot {
  std::vector<float> param, m, v, y, scale;
  bool operator==(const Snapshot &o) const {
    auto same = [](const std::vector<float> &a, const std::vector<float> &b) {
      return a.size() == b.size() &&
             std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
    };
    return same(param, o.param) && same(m, o.m) && same(v, o.v) &&
           same(y, o.y) && same(scale, o.scale);
  }
};

Snapshot snapshot(Device &dev, const StepState &s) {
  RT_EXPECT_OK(fsdprt_context_synchronize(dev.ctx));
  return {dev.download(s.param, kParams), dev.download(s.m, kParams),
          dev.download(s.v, kParams), dev.download(s.y, kRows * kOut),
          dev.download(s.scale, 1)};
}

/// The per-step values a runner sets before each step.
void setStepValues(Device &dev, int64_t stepCount) {
  RT_EXPECT_OK(fsdprt_context_set_lr_factor(dev.ctx, 1.0 / (1 + stepCount)));
  RT_EXPECT_OK(
      fsdprt_context_set_loss_scale(dev.ctx, 1024.0 * (stepCount + 1)));
}

/// The state after each of `steps` eager steps on a fresh context.
std::vector<Snapshot> eagerSteps(const std::string &backend, int64_t steps) {
  std::vector<Snapshot> eager;
  Device dev(backend);
  StepState s = setUp(dev);
  for (int64_t t = 0; t < steps; ++t) {
    setStepValues(dev, t);
    RT_EXPECT_OK(step(dev, s, t));
    eager.push_back(snapshot(dev, s));
  }
  return eager;
}

TEST_P(GraphConformance, ReplayedStepEqualsEagerStepBitForBit) {
  const int64_t steps = 5;
  std::vector<Snapshot> eager = eagerSteps(GetParam(), steps);
  ASSERT_FALSE(eager[0] == eager[1]) << "the steps must differ";

  Device dev(GetParam());
  StepState s = setUp(dev);
  setStepValues(dev, 0);
  RT_OK(step(dev, s, 0));
  EXPECT_TRUE(snapshot(dev, s) == eager[0]);
  int32_t supported = -1;
  RT_OK(fsdprt_graph_supported(dev.ctx, &supported));
  EXPECT_EQ(supported, GetParam() == "cpu" ? 0 : 1);
  int32_t begun = fsdprt_graph_begin(dev.ctx, 1);
  if (GetParam() == "cpu") {
    EXPECT_EQ(begun, FSDPRT_ERR_UNSUPPORTED);
    EXPECT_NE(std::string(fsdprt_last_error()).find("no step graphs"),
              std::string::npos)
        << fsdprt_last_error();
    return;
  }
  ASSERT_EQ(begun, FSDPRT_OK) << fsdprt_last_error();
  RT_OK(step(dev, s, 1));
  int64_t graph = 0;
  RT_OK(fsdprt_graph_end(dev.ctx, &graph));
  EXPECT_TRUE(snapshot(dev, s) == eager[0]) << "capturing runs nothing";
  for (int64_t t = 1; t < steps; ++t) {
    setStepValues(dev, t);
    RT_OK(fsdprt_graph_launch(dev.ctx, dev.stream, graph, t));
    EXPECT_TRUE(snapshot(dev, s) == eager[t]) << "step " << t;
  }
  // A bad id reaches the graph's index check like an eager step's.
  std::vector<int32_t> bad{1, 3, 5, 70, 9, 0, 2, 4};
  RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, s.ids, 0, bad.data(),
                              int64_t(bad.size() * 4)));
  RT_OK(fsdprt_graph_launch(dev.ctx, dev.stream, graph, steps));
  EXPECT_EQ(fsdprt_context_synchronize(dev.ctx), FSDPRT_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(fsdprt_last_error()).find("token id 70 at position 3"),
            std::string::npos)
      << fsdprt_last_error();
  RT_OK(fsdprt_graph_destroy(dev.ctx, graph));
}

// Eager steps between launches (an evaluation, a traced step) use the
// arena freely; the launches after them still equal eager steps.
TEST_P(GraphConformance, EagerStepsBetweenLaunches) {
  const int64_t steps = 6;
  std::vector<Snapshot> eager = eagerSteps(GetParam(), steps);
  Device dev(GetParam());
  StepState s = setUp(dev);
  setStepValues(dev, 0);
  RT_OK(step(dev, s, 0));
  if (fsdprt_graph_begin(dev.ctx, 1) != FSDPRT_OK)
    GTEST_SKIP() << "no step graphs: " << fsdprt_last_error();
  RT_OK(step(dev, s, 1));
  int64_t graph = 0;
  RT_OK(fsdprt_graph_end(dev.ctx, &graph));
  for (int64_t t = 1; t < steps; ++t) {
    setStepValues(dev, t);
    if (t == 3) { // eager, with a scratch buffer of its own in the arena
      int64_t extra = 0;
      RT_OK(fsdprt_buffer_alloc(dev.ctx, 4096, &extra));
      RT_OK(fsdprt_fill(dev.ctx, dev.stream, FSDPRT_F32, extra, 0, 1024, 7.0));
      RT_OK(step(dev, s, t));
      RT_OK(fsdprt_buffer_free(dev.ctx, dev.stream, extra));
    } else {
      RT_OK(fsdprt_graph_launch(dev.ctx, dev.stream, graph, t));
    }
    EXPECT_TRUE(snapshot(dev, s) == eager[t]) << "step " << t;
  }
  RT_OK(fsdprt_graph_destroy(dev.ctx, graph));
}

TEST_P(GraphConformance, HostWaitInsideCaptureFailsTheCaptureOnly) {
  Device dev(GetParam());
  StepState s = setUp(dev);
  setStepValues(dev, 0);
  RT_OK(step(dev, s, 0));
  Snapshot before = snapshot(dev, s);
  if (fsdprt_graph_begin(dev.ctx, 1) != FSDPRT_OK)
    GTEST_SKIP() << "no step graphs: " << fsdprt_last_error();
  RT_OK(step(dev, s, 1));
  float host = 0;
  // Reading to the host inside the step cannot be captured.
  RT_OK(fsdprt_copy_to_host(dev.ctx, dev.stream, &host, s.scale, 0, 4));
  int64_t graph = 0;
  EXPECT_EQ(fsdprt_graph_end(dev.ctx, &graph), FSDPRT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(fsdprt_last_error()).find("captured as a CUDA graph"),
            std::string::npos)
      << fsdprt_last_error();
  EXPECT_TRUE(snapshot(dev, s) == before) << "nothing of the capture ran";
  // The context works on: the step runs eagerly.
  setStepValues(dev, 1);
  RT_OK(step(dev, s, 1));
  EXPECT_FALSE(snapshot(dev, s) == before);
}

// Per-call scratch is counted once (the CUDA backend's ScratchReserve.h):
// the first call sizes its stream's reserve, held between calls and
// reported by fsdprt_device_reserve; the same call run eagerly again,
// captured and replayed adds nothing to the device's high-water mark
// (metrics' device_peak_bytes). While a graph holds pointers into the
// reserve it stays where it is: a larger eager call allocates its own
// scratch, and regrows the reserve once the graph is gone. The calls: bf16
// reduces over inner dims (f32 staging of the input, 32 and 64 MiB).
TEST_P(GraphConformance, PerCallScratchIsReservedOnceAndReplayedInPlace) {
  Device dev(GetParam());
  const int64_t rows = 256, inner = 128 * 256, bytes = rows * inner * 4;
  int64_t bx = dev.alloc(2 * rows * inner * 2), by = dev.alloc(rows * 2);
  RT_OK(fsdprt_fill(dev.ctx, dev.stream, FSDPRT_BF16, bx, 0, 2 * rows * inner,
                    0.5));
  auto reduce = [&](int64_t depth, bool check = true) {
    const std::vector<int64_t> shape{rows, 128 * depth, 256}, dims{1, 2};
    RT_EXPECT_OK(fsdprt_reduce_forward(dev.ctx, dev.stream, FSDPRT_BF16,
                                       FSDPRT_REDUCE_SUM, bx, 0, 3,
                                       shape.data(), dims.size(),
                                       dims.data(), by, 0));
    if (!check) // capturing
      return;
    RT_EXPECT_OK(fsdprt_context_synchronize(dev.ctx));
    std::vector<uint16_t> y = dev.download<uint16_t>(by, rows);
    EXPECT_EQ(bf16ToFloat(y[0]), 0.5f * inner * depth);
    EXPECT_EQ(bf16ToFloat(y[rows - 1]), 0.5f * inner * depth);
  };
  auto reserved = [&] {
    int64_t workspace = 0, scratch = 0;
    const char *op = nullptr;
    RT_EXPECT_OK(fsdprt_device_reserve(dev.ctx, &workspace, &scratch, &op));
    return std::make_pair(scratch, std::string(op));
  };
  auto high = [&] {
    int64_t h = 0;
    RT_EXPECT_OK(fsdprt_device_high_water(dev.ctx, &h));
    return h;
  };
  reduce(1);
  const auto [first, op] = reserved();
  if (first < 0)
    GTEST_SKIP() << "the backend does not track device memory";
  EXPECT_EQ(op, "reduce_forward");
  EXPECT_GE(first, bytes) << "the staging";
  EXPECT_LT(first, bytes + bytes / 8) << "and the partial sums";
  RT_OK(fsdprt_arena_reset_high_water(dev.ctx));
  const int64_t held = high();
  reduce(1);
  EXPECT_EQ(high(), held) << "an eager call within the reserve";
  RT_OK(fsdprt_graph_begin(dev.ctx, 1));
  reduce(1, false);
  int64_t graph = 0;
  RT_OK(fsdprt_graph_end(dev.ctx, &graph));
  for (int64_t t = 1; t <= 3; ++t)
    RT_OK(fsdprt_graph_launch(dev.ctx, dev.stream, graph, t));
  RT_OK(fsdprt_context_synchronize(dev.ctx));
  EXPECT_LT(high() - held, bytes / 16)
      << "replays use the reserve in place (the graph's live block only)";
  EXPECT_EQ(reserved().first, first);
  reduce(2);
  EXPECT_EQ(reserved().first, first) << "pinned by the graph";
  EXPECT_GE(high(), held + 2 * bytes) << "the larger call's own scratch";
  RT_OK(fsdprt_graph_destroy(dev.ctx, graph));
  reduce(2);
  EXPECT_GE(reserved().first, 2 * bytes) << "regrown without the graph";
}

FSDPRT_INSTANTIATE_CONFORMANCE(GraphConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
