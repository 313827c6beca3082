//===- TraceTest.cpp - stream names, Chrome traces, blocked wait time -----===//
//
// A delayed "all-gather" stream feeds a "compute" stream through an event,
// as in a generated FSDP step. The checks rely only on lower bounds a sleep
// guarantees (an injected delay lasts at least its duration) and on causal
// order (a wait ends after the record it waits for has started), never on
// how fast anything runs.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <unistd.h>

namespace fsdp {
namespace rt {
namespace test {
namespace {

using nlohmann::json;

constexpr int kDelayMs = 200;

class Trace : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fsdprt_trace_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    // Read at context creation: only this test's contexts see it.
    setenv("FSDPRT_DELAY_OPTIMIZER_MS", std::to_string(kDelayMs).c_str(), 1);
  }
  void TearDown() override {
    unsetenv("FSDPRT_DELAY_OPTIMIZER_MS");
    for (const char *f : {"/a.json", "/b.json"})
      std::remove((dir + f).c_str());
    rmdir(dir.c_str());
  }

  static json readJson(const std::string &path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << "cannot open " << path;
    return json::parse(in); // Throws (failing the test) if malformed.
  }

  std::string dir;
};

/// X events of one tid, in file order.
static std::vector<json> eventsOf(const json &trace, int64_t tid) {
  std::vector<json> out;
  for (const json &e : trace["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == tid)
      out.push_back(e);
  return out;
}

static std::vector<std::string> namesOf(const std::vector<json> &events) {
  std::vector<std::string> names;
  for (const json &e : events)
    names.push_back(e["name"]);
  return names;
}

TEST_F(Trace, ComputeWaitingOnDelayedStreamIsRecordedAndTimed) {
  Device dev("cpu");
  int64_t gather, compute, ready;
  RT_OK(fsdprt_stream_create(dev.ctx, &gather));
  RT_OK(fsdprt_stream_create(dev.ctx, &compute));
  RT_OK(fsdprt_event_create(dev.ctx, &ready));
  RT_OK(fsdprt_stream_set_name(dev.ctx, gather, "all-gather"));
  RT_OK(fsdprt_stream_set_name(dev.ctx, compute, "compute"));
  const int64_t n = 256;
  int64_t param = dev.upload(std::vector<float>(n, 1.0f));
  int64_t grad = dev.upload(std::vector<float>(n, 2.0f));
  int64_t out = dev.alloc(n * 4);
  RT_OK(fsdprt_trace_enable(dev.ctx, 1));
  // all-gather stream: a (delayed) update standing in for the collective.
  RT_OK(fsdprt_sgd_step(dev.ctx, gather, FSDPRT_F32, param, 0, grad, 0, 0, 0, n,
                        1, 0.5, 0, 0, 0, 0, 0, 0));
  RT_OK(fsdprt_event_record(dev.ctx, ready, gather));
  // compute stream: its own work, then it blocks on the other stream.
  RT_OK(fsdprt_fill(dev.ctx, compute, FSDPRT_F32, out, 0, n, 3.0));
  RT_OK(fsdprt_stream_wait_event(dev.ctx, compute, ready));
  RT_OK(fsdprt_copy(dev.ctx, compute, out, 0, param, 0, n * 4));
  RT_OK(fsdprt_context_synchronize(dev.ctx));

  double computeWait = -1, gatherWait = -1;
  RT_OK(fsdprt_stream_wait_seconds(dev.ctx, compute, &computeWait));
  RT_OK(fsdprt_stream_wait_seconds(dev.ctx, gather, &gatherWait));
  // Both streams start within microseconds of each other and the delay is
  // 200 ms: the compute stream is blocked for most of it.
  EXPECT_GE(computeWait, kDelayMs * 1e-3 / 4)
      << "compute stream waited " << computeWait << " s for a stream delayed "
      << kDelayMs << " ms";
  EXPECT_LT(computeWait, 60.0);
  EXPECT_EQ(gatherWait, 0.0) << "the all-gather stream never waits";

  std::string path = dir + "/a.json";
  RT_OK(fsdprt_trace_write(dev.ctx, path.c_str(), 3));
  json trace = readJson(path);
  ASSERT_TRUE(trace["traceEvents"].is_array());

  // Metadata: the process is "rank 3", one thread_name per stream.
  std::map<int64_t, std::string> threadNames;
  std::string processName;
  for (const json &e : trace["traceEvents"]) {
    EXPECT_EQ(e["pid"], 3) << e.dump();
    if (e["ph"] != "M")
      continue;
    if (e["name"] == "process_name")
      processName = e["args"]["name"];
    if (e["name"] == "thread_name") {
      int64_t tid = e["tid"];
      EXPECT_EQ(threadNames.count(tid), 0u) << "two thread_names for " << tid;
      threadNames[tid] = e["args"]["name"];
    }
  }
  EXPECT_EQ(processName, "rank 3");
  EXPECT_EQ(threadNames,
            (std::map<int64_t, std::string>{
                {1, "default"}, {2, "all-gather"}, {3, "compute"}}));

  // Events per stream: the entry points' names, in order, not overlapping.
  std::vector<json> g = eventsOf(trace, 2), c = eventsOf(trace, 3);
  EXPECT_EQ(namesOf(g), (std::vector<std::string>{"sgd_step", "event_record"}));
  EXPECT_EQ(namesOf(c),
            (std::vector<std::string>{"fill", "stream_wait_event", "copy"}));
  EXPECT_TRUE(eventsOf(trace, 1).empty())
      << "the uploads ran before tracing was enabled";
  for (const std::vector<json> *events : {&g, &c})
    for (size_t i = 0; i + 1 < events->size(); ++i) {
      double end = double((*events)[i]["ts"]) + double((*events)[i]["dur"]);
      EXPECT_LE(end, double((*events)[i + 1]["ts"]) + 1e-3)
          << (*events)[i].dump() << " overlaps " << (*events)[i + 1].dump();
    }
  ASSERT_EQ(g.size(), 2u);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_GE(double(g[0]["dur"]), kDelayMs * 1e3) << "the delay is in the op";
  // Causality: the wait ends after the record it waited for started, and it
  // lasted at least the blocked time the stream reports.
  EXPECT_GE(double(c[1]["ts"]) + double(c[1]["dur"]), double(g[1]["ts"]));
  EXPECT_GE(double(c[1]["dur"]) + 1.0, computeWait * 1e6);

  // Writing again gives the same trace: nothing is cleared.
  std::string again = dir + "/b.json";
  RT_OK(fsdprt_trace_write(dev.ctx, again.c_str(), 3));
  EXPECT_EQ(readJson(again), trace);

  RT_OK(fsdprt_event_destroy(dev.ctx, ready));
  RT_OK(fsdprt_stream_destroy(dev.ctx, gather));
  RT_OK(fsdprt_stream_destroy(dev.ctx, compute));
}

TEST_F(Trace, WaitOnOwnStreamRecordNeverBlocks) {
  Device dev("cpu");
  int64_t s, ev;
  RT_OK(fsdprt_stream_create(dev.ctx, &s));
  RT_OK(fsdprt_event_create(dev.ctx, &ev));
  int64_t p = dev.upload(std::vector<float>(4, 1.0f));
  int64_t g = dev.upload(std::vector<float>(4, 1.0f));
  // FIFO: the record has run by the time the wait is reached.
  RT_OK(fsdprt_sgd_step(dev.ctx, s, FSDPRT_F32, p, 0, g, 0, 0, 0, 4, 1, 0.1, 0,
                        0, 0, 0, 0, 0));
  RT_OK(fsdprt_event_record(dev.ctx, ev, s));
  RT_OK(fsdprt_stream_wait_event(dev.ctx, s, ev));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, s));
  double wait = -1;
  RT_OK(fsdprt_stream_wait_seconds(dev.ctx, s, &wait));
  EXPECT_EQ(wait, 0.0);
  RT_OK(fsdprt_event_destroy(dev.ctx, ev));
  RT_OK(fsdprt_stream_destroy(dev.ctx, s));
}

TEST_F(Trace, DisabledRecordsNothingAndDestroyedStreamsStayNamed) {
  Device dev("cpu");
  int64_t s;
  RT_OK(fsdprt_stream_create(dev.ctx, &s));
  int64_t buf = dev.alloc(64);
  // What counts is whether tracing is on when the stream runs the op.
  RT_OK(fsdprt_fill(dev.ctx, s, FSDPRT_F32, buf, 0, 16, 1.0)); // not traced
  RT_OK(fsdprt_stream_synchronize(dev.ctx, s));
  RT_OK(fsdprt_trace_enable(dev.ctx, 1));
  RT_OK(fsdprt_fill(dev.ctx, s, FSDPRT_F32, buf, 0, 16, 2.0));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, s));
  RT_OK(fsdprt_trace_enable(dev.ctx, 0));
  RT_OK(fsdprt_fill(dev.ctx, s, FSDPRT_F32, buf, 0, 16, 3.0)); // not traced
  RT_OK(fsdprt_stream_destroy(dev.ctx, s));

  std::string path = dir + "/a.json";
  RT_OK(fsdprt_trace_write(dev.ctx, path.c_str(), 0));
  json trace = readJson(path);
  std::vector<json> events = eventsOf(trace, 2);
  EXPECT_EQ(namesOf(events), std::vector<std::string>{"fill"});
  std::set<std::string> names;
  for (const json &e : trace["traceEvents"])
    if (e["name"] == "thread_name")
      names.insert(std::string(e["args"]["name"]));
  EXPECT_EQ(names, (std::set<std::string>{"default", "stream 2"}));
}

TEST_F(Trace, BadArgumentsAreReported) {
  Device dev("cpu");
  EXPECT_EQ(fsdprt_stream_set_name(dev.ctx, dev.stream, nullptr),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_stream_set_name(dev.ctx, dev.stream, ""),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_stream_set_name(dev.ctx, 12345, "x"),
            FSDPRT_ERR_INVALID_HANDLE);
  EXPECT_EQ(fsdprt_stream_wait_seconds(dev.ctx, dev.stream, nullptr),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_trace_enable(0, 1), FSDPRT_ERR_INVALID_HANDLE);
  std::string missing = dir + "/no/such/dir/trace.json";
  EXPECT_EQ(fsdprt_trace_write(dev.ctx, missing.c_str(), 0), FSDPRT_ERR_IO);
  EXPECT_NE(std::string(fsdprt_last_error()).find(missing), std::string::npos)
      << fsdprt_last_error();
}

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
