//===- Trace.h - Per-stream execution traces --------------------*- C++ -*-===//
//
// One TraceLog per context. Streams register with it (getting a small,
// stable id used as the Chrome trace "tid") and, while tracing is enabled,
// their worker threads append one record per executed operation with its
// start and end time. Records outlive the streams that made them, so a trace
// written after a stream was destroyed still shows its work and its name.
// Timestamps are steady-clock nanoseconds since the log (the context) was
// created; the wall-clock time of that origin goes into the written trace so
// that traces of several ranks can be aligned when merged.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_TRACE_H
#define FSDP_RT_TRACE_H

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {

struct TraceRecord {
  int32_t streamId;
  std::string name;
  int64_t startNs, endNs;
};

class TraceLog {
public:
  TraceLog();

  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  void setEnabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  /// Nanoseconds since the log was created (steady clock).
  int64_t nowNs() const;

  /// Returns the new stream's id (1, 2, ... in creation order) and names it
  /// (`name`, or "stream <id>" when empty).
  int32_t addStream(const std::string &name);
  void setStreamName(int32_t streamId, const std::string &name);
  void add(int32_t streamId, const std::string &name, int64_t startNs,
           int64_t endNs);

  std::vector<TraceRecord> records() const;
  std::map<int32_t, std::string> streamNames() const;

  /// Writes {"traceEvents": [...], "otherData": {"clock_origin_unix_us":
  /// ...}}: a process_name ("rank <pid>") and one thread_name per stream
  /// ("M" events), then one "X" event per record in start order, timestamps
  /// in microseconds since the origin. Atomic (temporary file and rename);
  /// throws Error(IO) naming the path.
  void writeChromeTrace(const std::string &path, int32_t pid) const;

private:
  const std::chrono::steady_clock::time_point epoch_;
  const int64_t originUnixUs_; // system clock at epoch_
  std::atomic<bool> enabled_{false};
  mutable std::mutex mutex_;
  std::map<int32_t, std::string> names_;
  std::vector<TraceRecord> records_;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_TRACE_H
