//===- Trace.cpp - Per-stream execution traces ----------------------------===//
#include "Trace.h"
#include "fsdp/rt/Error.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unistd.h>

namespace fsdp {
namespace rt {

using nlohmann::json;

TraceLog::TraceLog()
    : epoch_(std::chrono::steady_clock::now()),
      originUnixUs_(std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count()) {}

int64_t TraceLog::nowNs() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now() - epoch_)
      .count();
}

int32_t TraceLog::addStream(const std::string &name) {
  std::lock_guard<std::mutex> lock(mutex_);
  int32_t id = names_.empty() ? 1 : names_.rbegin()->first + 1;
  names_[id] = name.empty() ? "stream " + std::to_string(id) : name;
  return id;
}

void TraceLog::setStreamName(int32_t streamId, const std::string &name) {
  std::lock_guard<std::mutex> lock(mutex_);
  names_[streamId] = name;
}

void TraceLog::add(int32_t streamId, const std::string &name, int64_t startNs,
                   int64_t endNs) {
  std::lock_guard<std::mutex> lock(mutex_);
  records_.push_back(TraceRecord{streamId, name, startNs, endNs});
}

std::vector<TraceRecord> TraceLog::records() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_;
}

std::map<int32_t, std::string> TraceLog::streamNames() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return names_;
}

void TraceLog::writeChromeTrace(const std::string &path, int32_t pid) const {
  std::vector<TraceRecord> recs = records();
  std::map<int32_t, std::string> names = streamNames();
  // Workers append when an op ends; sort by start so the file reads in time
  // order (stable: equal starts keep their per-stream order).
  std::stable_sort(recs.begin(), recs.end(),
                   [](const TraceRecord &a, const TraceRecord &b) {
                     return a.startNs < b.startNs;
                   });

  json events = json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", pid},
                    {"tid", 0},
                    {"args", {{"name", "rank " + std::to_string(pid)}}}});
  // Ranks in rank order in a merged trace.
  events.push_back({{"name", "process_sort_index"},
                    {"ph", "M"},
                    {"pid", pid},
                    {"tid", 0},
                    {"args", {{"sort_index", pid}}}});
  for (const auto &[id, name] : names) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", id},
                      {"args", {{"name", name}}}});
    // Perfetto orders threads by this index: streams in creation order.
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"tid", id},
                      {"args", {{"sort_index", id}}}});
  }
  for (const TraceRecord &r : recs)
    events.push_back({{"name", r.name},
                      {"ph", "X"},
                      {"pid", pid},
                      {"tid", r.streamId},
                      {"ts", r.startNs / 1000.0},
                      {"dur", (r.endNs - r.startNs) / 1000.0}});
  std::string text =
      json{{"traceEvents", std::move(events)},
           {"displayTimeUnit", "ms"},
           {"otherData", {{"clock_origin_unix_us", originUnixUs_}}}}
          .dump();

  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter++);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      fail(Status::IO, "cannot create '", tmp, "': ", std::strerror(errno));
    out << text << '\n';
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      fail(Status::IO, "write to '", tmp, "' failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    fail(Status::IO, "cannot rename '", tmp, "' to '", path, "': ", why);
  }
}

} // namespace rt
} // namespace fsdp
