//===- Stream.h - Host streams and events -----------------------*- C++ -*-===//
//
// A stream is a worker thread draining a FIFO of operations, so work on one
// stream is ordered and work on different streams overlaps, on CPU exactly as
// on a GPU. Events are the only cross-stream ordering: record() enqueues a
// marker, wait() enqueues a blocking wait for the latest marker. A failing
// operation stores "op '<name>': <message>" and turns the rest of the queue
// into no-ops (markers still fire, so no one deadlocks); synchronize()
// returns that error once. With a TraceLog attached, the worker records each
// operation it runs (name, start, end) while tracing is enabled, and every
// stream counts the time its worker spends blocked in event waits.
// With a DeviceOrdering (asynchronous backends, DeviceOrdering.h), records
// and waits also order the workers' device queues, and synchronize() waits
// for the device too.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_STREAM_H
#define FSDP_RT_STREAM_H

#include "fsdp/rt/backend/CurrentOperation.h"
#include "fsdp/rt/backend/DeviceOrdering.h"
#include "fsdp/rt/Error.h"
#include "Trace.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

namespace fsdp {
namespace rt {

/// The markers of one event. Each record gets a ticket; a wait is bound to
/// the latest ticket at the time of the wait call (cudaStreamWaitEvent
/// semantics) and is satisfied when that very record has run, even if
/// records on other streams finish in a different order.
class Event {
public:
  /// Host side of record: returns the ticket the stream will signal.
  uint64_t nextTicket();
  /// The record ran; `marker` (may be null) is its point in the device queue.
  void signal(uint64_t ticket, std::shared_ptr<DeviceMarker> marker = nullptr);
  /// Latest ticket handed out (0 if never recorded).
  uint64_t lastTicket() const;
  void waitFor(uint64_t ticket) const;
  bool reached(uint64_t ticket) const;
  /// A wait bound to `ticket` will ask for its marker: keep it until unpin.
  void pin(uint64_t ticket);
  void unpin(uint64_t ticket);
  /// The device marker of a ticket that has run (null: none).
  std::shared_ptr<DeviceMarker> markerOf(uint64_t ticket) const;
  /// Host waits for the ticket and, if it has one, for its device marker.
  void synchronize(uint64_t ticket);
  /// Whether the ticket and its device marker have been passed.
  bool passed(uint64_t ticket);

private:
  bool reachedLocked(uint64_t ticket) const;
  /// Drops the markers no wait can ask for any more: every one but the
  /// latest ticket's and the pinned ones (waits bind the latest ticket).
  void pruneLocked();

  mutable std::mutex mutex_;
  mutable std::condition_variable cv_;
  uint64_t issued_ = 0;
  uint64_t donePrefix_ = 0;      // every ticket <= this has run
  std::set<uint64_t> doneAbove_; // tickets > donePrefix_ that have run
  std::map<uint64_t, std::shared_ptr<DeviceMarker>> markers_;
  std::map<uint64_t, int> pins_;
};

class Stream {
public:
  /// Registers with `trace` (if any) under `name`; the trace id is the
  /// Chrome trace tid of this stream.
  /// `device` (may be null) outlives the stream.
  explicit Stream(std::shared_ptr<TraceLog> trace = nullptr,
                  const std::string &name = "",
                  DeviceOrdering *device = nullptr);
  ~Stream(); // Drains the queue, then joins.
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  /// `name` appears in the error message if `work` throws. Control
  /// operations (event record/wait, frees) pass `alwaysRun` so that they
  /// still run after an earlier failure.
  void enqueue(std::string name, std::function<void()> work,
               bool alwaysRun = false);
  void record(std::shared_ptr<Event> event);
  void wait(std::shared_ptr<Event> event);
  /// Blocks until the queue is empty and its device work done; rethrows the
  /// stored failure once.
  void synchronize();
  /// Blocks until the queue is empty (its device work may still be
  /// queued: a step graph's capture); rethrows the stored failure once.
  void drain();

  /// Id in the trace log (0 without one).
  int32_t traceId() const { return traceId_; }
  void setName(const std::string &name);
  /// Cumulative seconds the worker was blocked in event waits that had not
  /// been reached yet (i.e. on work of other streams; a wait on this
  /// stream's own record never blocks, being FIFO). Waits still in progress
  /// are not counted.
  double waitSeconds() const;

private:
  struct Op {
    std::string name;
    std::function<void()> work;
    bool alwaysRun;
  };
  void run();

  mutable std::mutex mutex_;
  std::condition_variable hasWork_;
  std::condition_variable idle_;
  std::deque<Op> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::optional<Error> error_;
  std::shared_ptr<TraceLog> trace_;
  int32_t traceId_ = 0;
  DeviceOrdering *device_;
  std::atomic<int64_t> waitNs_{0};
  std::thread worker_; // Last: started once everything above exists.
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_STREAM_H
