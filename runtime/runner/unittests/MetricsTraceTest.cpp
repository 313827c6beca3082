//===- MetricsTraceTest.cpp - metrics lines, progress line, trace merge ---===//
#include "runner/Metrics.h"
#include "runner/Trace.h"

#include "fsdp/rt/fsdprt.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

namespace fsdp {
namespace driver {
namespace {

using nlohmann::json;

class TempDir : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fsdp_metrics_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override {
    std::filesystem::remove_all(dir);
  }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto &entry : std::filesystem::directory_iterator(dir))
      names.push_back(entry.path().filename().string());
    return names;
  }
  void writeFile(const std::string &name, const std::string &text) {
    std::ofstream(dir + "/" + name) << text;
  }
  static std::vector<std::string> lines(const std::string &path) {
    std::ifstream in(path);
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line))
      out.push_back(line);
    return out;
  }
  std::string dir;
};

using Metrics = TempDir;
using MergeTraces = TempDir;

StepMetrics sample(int64_t step) {
  StepMetrics m;
  m.step = step;
  m.loss = 3.4512;
  m.stepTimeS = 0.089;
  m.tokensPerS = 23100;
  m.peakBytes = 1310720; // 1.25 MiB
  m.commExposedS = 0.004;
  return m;
}

TEST_F(Metrics, AResumedWriterKeepsTheStepsUpToItsCheckpoint) {
  std::string path = dir + "/metrics.jsonl";
  {
    MetricsWriter interrupted(path);
    for (int64_t s = 1; s <= 5; ++s) // killed after step 5
      interrupted.write(sample(s));
  }
  MetricsWriter resumed(path, /*keepThroughStep=*/4); // step-4 checkpoint
  resumed.write(sample(5));
  std::vector<std::string> got = lines(path);
  ASSERT_EQ(got.size(), 5u);
  for (int64_t s = 1; s <= 5; ++s)
    EXPECT_EQ(got[s - 1].rfind("{\"step\":" + std::to_string(s) + ",", 0), 0u)
        << got[s - 1];
}

TEST_F(Metrics, WriterTruncatesAndWritesOneJsonObjectPerLine) {
  std::string path = dir + "/metrics.jsonl";
  writeFile("metrics.jsonl", "stale content of an earlier run\n");
  MetricsWriter w(path);
  StepMetrics first = sample(1);
  w.write(first);
  // Flushed per line: readable while the writer is still open.
  ASSERT_EQ(lines(path).size(), 1u);
  StepMetrics second = sample(2);
  second.gradNorm = 0.75;
  w.write(second);

  std::vector<std::string> text = lines(path);
  ASSERT_EQ(text.size(), 2u);
  json a = json::parse(text[0]), b = json::parse(text[1]);
  std::set<std::string> keys;
  for (auto &[k, v] : a.items())
    keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"step", "loss", "step_time_s",
                                         "tokens_per_s", "peak_bytes",
                                         "comm_exposed_s"}))
      << "grad_norm must be absent when NaN: " << text[0];
  EXPECT_EQ(a["step"], 1);
  EXPECT_DOUBLE_EQ(a["loss"].get<double>(), 3.4512);
  EXPECT_DOUBLE_EQ(a["step_time_s"].get<double>(), 0.089);
  EXPECT_DOUBLE_EQ(a["tokens_per_s"].get<double>(), 23100);
  EXPECT_EQ(a["peak_bytes"], 1310720);
  EXPECT_DOUBLE_EQ(a["comm_exposed_s"].get<double>(), 0.004);
  EXPECT_EQ(b["step"], 2);
  EXPECT_DOUBLE_EQ(b["grad_norm"].get<double>(), 0.75);
}

TEST_F(Metrics, DevicePeakIsWrittenWhereTheBackendTracksIt) {
  StepMetrics m = sample(3);
  json none = json::parse(metricsJson(m));
  EXPECT_FALSE(none.contains("device_peak_bytes")) << none.dump();
  m.devicePeakBytes = 3 << 20;
  json j = json::parse(metricsJson(m));
  EXPECT_EQ(j["device_peak_bytes"], 3 << 20);
  std::string line = formatProgressLine(m, 10);
  EXPECT_NE(line.find("peak 1.25 MiB (device 3.00 MiB)  exposed comm"),
            std::string::npos)
      << line;
}

TEST_F(Metrics, DeviceReserveIsWrittenAndNamedWhereTheBackendTracksIt) {
  StepMetrics m = sample(3);
  json none = json::parse(metricsJson(m));
  EXPECT_FALSE(none.contains("gemm_workspace_bytes")) << none.dump();
  EXPECT_FALSE(none.contains("scratch_reserve_bytes")) << none.dump();
  m.devicePeakBytes = 300 << 20;
  m.gemmWorkspaceBytes = 32 << 20;
  m.scratchReserveBytes = 192 << 20;
  json j = json::parse(metricsJson(m));
  EXPECT_EQ(j["gemm_workspace_bytes"], 32 << 20);
  EXPECT_EQ(j["scratch_reserve_bytes"], 192 << 20);
  EXPECT_EQ(describeDeviceReserve(m, "attention_backward"),
            "device memory beside the arena, held from the first step on: "
            "GEMM workspace 32.00 MiB, per-call scratch 192.00 MiB (sized by "
            "attention_backward)");
  m.scratchReserveBytes = 0;
  EXPECT_EQ(describeDeviceReserve(m, ""),
            "device memory beside the arena, held from the first step on: "
            "GEMM workspace 32.00 MiB, per-call scratch 0 B");
}

TEST_F(Metrics, LearningRateIsWrittenWhenThereIsAnOptimizer) {
  StepMetrics m = sample(4);
  m.lr = 3e-4;
  json j = json::parse(metricsJson(m));
  EXPECT_DOUBLE_EQ(j["lr"].get<double>(), 3e-4);
  EXPECT_NE(formatProgressLine(m, 10).find("  lr 3.00e-04"), std::string::npos)
      << formatProgressLine(m, 10);
}

TEST_F(Metrics, DivergedLossStaysValidJson) {
  StepMetrics m = sample(7);
  m.loss = std::nan("");
  json j = json::parse(metricsJson(m));
  EXPECT_TRUE(j["loss"].is_null()) << metricsJson(m);
}

TEST_F(Metrics, UnopenableFileThrowsNamingIt) {
  std::string path = dir + "/missing/metrics.jsonl";
  try {
    MetricsWriter w(path);
    ADD_FAILURE() << "opened " << path;
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(formatBytes(0), "0 B");
  EXPECT_EQ(formatBytes(1023), "1023 B");
  EXPECT_EQ(formatBytes(1536), "1.50 KiB");
  EXPECT_EQ(formatBytes(1310720), "1.25 MiB");
  EXPECT_EQ(formatBytes(int64_t(3) << 30), "3.00 GiB");
}

TEST(ProgressLine, ShowsEveryMetricInHumanUnits) {
  EXPECT_EQ(formatProgressLine(sample(3), 100),
            "step    3/100  loss 3.4512  2.31e+04 tok/s  step 0.089 s  "
            "peak 1.25 MiB  exposed comm 0.004 s");
  StepMetrics m = sample(12345);
  m.gradNorm = 0.8123;
  std::string line = formatProgressLine(m, 100000);
  EXPECT_EQ(line.rfind("step  12345/100000  loss", 0), 0u) << line;
  EXPECT_NE(line.find("  grad norm 0.8123"), std::string::npos) << line;
}

/// A rank's trace as fsdprt_trace_write makes it: one context, two named
/// streams, a few traced ops.
static void writeRankTrace(const std::string &path, int rank) {
  int64_t ctx, comm, buf;
  ASSERT_EQ(fsdprt_context_create("cpu", 0, 1, 1 << 16, 1, &ctx), FSDPRT_OK);
  ASSERT_EQ(fsdprt_stream_create(ctx, &comm), FSDPRT_OK);
  ASSERT_EQ(fsdprt_stream_set_name(ctx, FSDPRT_DEFAULT_STREAM, "compute"),
            FSDPRT_OK);
  ASSERT_EQ(fsdprt_stream_set_name(ctx, comm, "all-gather"), FSDPRT_OK);
  ASSERT_EQ(fsdprt_buffer_alloc(ctx, 1024, &buf), FSDPRT_OK);
  ASSERT_EQ(fsdprt_trace_enable(ctx, 1), FSDPRT_OK);
  ASSERT_EQ(fsdprt_fill(ctx, comm, FSDPRT_F32, buf, 0, 256, 1.0), FSDPRT_OK);
  ASSERT_EQ(
      fsdprt_fill(ctx, FSDPRT_DEFAULT_STREAM, FSDPRT_F32, buf, 0, 256, 2.0),
      FSDPRT_OK);
  ASSERT_EQ(fsdprt_context_synchronize(ctx), FSDPRT_OK);
  ASSERT_EQ(fsdprt_trace_write(ctx, path.c_str(), rank), FSDPRT_OK)
      << fsdprt_last_error();
  ASSERT_EQ(fsdprt_context_destroy(ctx), FSDPRT_OK);
}

TEST_F(MergeTraces, KeepsEveryEventAndOneProcessPerRank) {
  std::vector<std::string> inputs;
  size_t total = 0;
  for (int rank = 0; rank < 3; ++rank) {
    inputs.push_back(dir + "/rank" + std::to_string(rank) + ".json");
    writeRankTrace(inputs.back(), rank);
    std::ifstream in(inputs.back());
    total += json::parse(in)["traceEvents"].size();
  }
  std::string out = dir + "/trace.json";
  mergeChromeTraces(inputs, out);
  std::ifstream in(out);
  json merged = json::parse(in);
  ASSERT_TRUE(merged["traceEvents"].is_array());
  EXPECT_EQ(merged["traceEvents"].size(), total);

  std::map<int, std::string> processes;
  std::map<int, std::set<std::string>> threads;
  std::map<int, int> fills;
  for (const json &e : merged["traceEvents"]) {
    int pid = e["pid"];
    if (e["name"] == "process_name")
      processes[pid] = e["args"]["name"];
    if (e["name"] == "thread_name")
      threads[pid].insert(std::string(e["args"]["name"]));
    if (e["ph"] == "X") {
      EXPECT_GE(e["ts"].get<double>(), 0) << e.dump();
      fills[pid] += e["name"] == "fill";
    }
  }
  EXPECT_EQ(processes, (std::map<int, std::string>{
                           {0, "rank 0"}, {1, "rank 1"}, {2, "rank 2"}}));
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(threads[rank], (std::set<std::string>{"compute", "all-gather"}));
    EXPECT_EQ(fills[rank], 2);
  }
  // Atomic write: no temporary file is left behind.
  EXPECT_EQ(files().size(), 4u);
}

TEST_F(MergeTraces, AlignsRanksOnTheirClockOrigins) {
  writeFile("a.json", R"({"traceEvents": [{"ph": "X", "name": "k", "pid": 0,
      "tid": 1, "ts": 10, "dur": 1}], "otherData": {"clock_origin_unix_us":
      1000}})");
  writeFile("b.json", R"({"traceEvents": [{"ph": "X", "name": "k", "pid": 1,
      "tid": 1, "ts": 10, "dur": 1}], "otherData": {"clock_origin_unix_us":
      1500}})");
  mergeChromeTraces({dir + "/a.json", dir + "/b.json"}, dir + "/m.json");
  std::ifstream in(dir + "/m.json");
  json events = json::parse(in)["traceEvents"];
  ASSERT_EQ(events.size(), 2u);
  EXPECT_DOUBLE_EQ(events[0]["ts"].get<double>(), 10);
  EXPECT_DOUBLE_EQ(events[1]["ts"].get<double>(), 510);
}

TEST_F(MergeTraces, MalformedOrMissingInputIsAnErrorNamingTheFile) {
  writeFile("good.json", R"({"traceEvents": []})");
  writeFile("bad.json", R"({"traceEvents": [)");
  writeFile("wrong.json", R"({"events": []})");
  writeFile("event.json", R"({"traceEvents": [{"name": "no phase"}]})");
  std::string out = dir + "/out.json";
  for (const char *name :
       {"bad.json", "wrong.json", "event.json", "missing.json"}) {
    std::string path = dir + "/" + name;
    try {
      mergeChromeTraces({dir + "/good.json", path}, out);
      ADD_FAILURE() << "merged malformed input " << name;
    } catch (const std::runtime_error &e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos)
          << e.what();
    }
    EXPECT_NE(access(out.c_str(), F_OK), 0)
        << "output written despite " << name;
  }
  EXPECT_THROW(mergeChromeTraces({}, out), std::runtime_error);
}

} // namespace
} // namespace driver
} // namespace fsdp
