//===- Stream.cpp - Host streams and events -------------------------------===//
#include "Stream.h"

#include <chrono>

namespace fsdp {
namespace rt {

namespace {
const std::string kNoOperation;
thread_local const std::string *runningOperation = &kNoOperation;
} // namespace

const std::string &currentOperation() { return *runningOperation; }

uint64_t Event::nextTicket() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++issued_;
}

void Event::signal(uint64_t ticket, std::shared_ptr<DeviceMarker> marker) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    doneAbove_.insert(ticket);
    while (!doneAbove_.empty() && *doneAbove_.begin() == donePrefix_ + 1) {
      doneAbove_.erase(doneAbove_.begin());
      ++donePrefix_;
    }
    if (marker) {
      markers_[ticket] = std::move(marker);
      pruneLocked();
    }
  }
  cv_.notify_all();
}

void Event::pruneLocked() {
  for (auto it = markers_.begin(); it != markers_.end();) {
    if (it->first != issued_ && !pins_.count(it->first))
      it = markers_.erase(it);
    else
      ++it;
  }
}

void Event::pin(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++pins_[ticket];
}

void Event::unpin(uint64_t ticket) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = pins_.find(ticket);
  if (it != pins_.end() && --it->second == 0)
    pins_.erase(it);
  pruneLocked();
}

std::shared_ptr<DeviceMarker> Event::markerOf(uint64_t ticket) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = markers_.find(ticket);
  return it == markers_.end() ? nullptr : it->second;
}

void Event::synchronize(uint64_t ticket) {
  pin(ticket); // a record issued meanwhile must not drop this marker
  waitFor(ticket);
  std::shared_ptr<DeviceMarker> marker = markerOf(ticket);
  unpin(ticket);
  if (marker)
    marker->synchronize();
}

bool Event::passed(uint64_t ticket) {
  pin(ticket);
  bool hostDone = reached(ticket);
  std::shared_ptr<DeviceMarker> marker = hostDone ? markerOf(ticket) : nullptr;
  unpin(ticket);
  return hostDone && (!marker || marker->done());
}

uint64_t Event::lastTicket() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return issued_;
}

bool Event::reachedLocked(uint64_t ticket) const {
  return ticket <= donePrefix_ || doneAbove_.count(ticket) != 0;
}

void Event::waitFor(uint64_t ticket) const {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return reachedLocked(ticket); });
}

bool Event::reached(uint64_t ticket) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return reachedLocked(ticket);
}

Stream::Stream(std::shared_ptr<TraceLog> trace, const std::string &name,
               DeviceOrdering *device)
    : trace_(std::move(trace)), traceId_(trace_ ? trace_->addStream(name) : 0),
      device_(device), worker_([this] { run(); }) {}

Stream::~Stream() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  hasWork_.notify_all();
  worker_.join();
}

void Stream::enqueue(std::string name, std::function<void()> work,
                     bool alwaysRun) {
  DeviceMarkers waits = takeDeferredDeviceWaits();
  if (!waits.empty() && device_)
    work = [this, waits = std::move(waits), work = std::move(work)] {
      for (const auto &marker : waits)
        device_->wait(*marker);
      work();
    };
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(Op{std::move(name), std::move(work), alwaysRun});
  }
  hasWork_.notify_one();
}

void Stream::record(std::shared_ptr<Event> event) {
  uint64_t ticket = event->nextTicket();
  enqueue(
      "event_record",
      [this, event, ticket] {
        event->signal(ticket, device_ ? device_->record() : nullptr);
      },
      /*alwaysRun=*/true);
}

void Stream::wait(std::shared_ptr<Event> event) {
  // Bind the ticket now: later records must not extend this wait.
  uint64_t ticket = event->lastTicket();
  if (ticket == 0)
    return;
  event->pin(ticket);
  // The worker runs this closure, so `this` outlives it.
  enqueue(
      "stream_wait_event",
      [this, event, ticket] {
        if (!event->reached(ticket)) {
          auto start = std::chrono::steady_clock::now();
          event->waitFor(ticket);
          waitNs_ += std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
        }
        std::shared_ptr<DeviceMarker> marker = event->markerOf(ticket);
        event->unpin(ticket);
        // A host stream (no device queue) waits on the host for the device.
        if (marker && device_)
          device_->wait(*marker);
        else if (marker)
          marker->synchronize();
      },
      /*alwaysRun=*/true);
}

void Stream::setName(const std::string &name) {
  if (trace_)
    trace_->setStreamName(traceId_, name);
}

double Stream::waitSeconds() const { return waitNs_.load() * 1e-9; }

void Stream::synchronize() {
  if (device_)
    enqueue(
        "device_synchronize", [this] { device_->synchronize(); },
        /*alwaysRun=*/true);
  drain();
}

void Stream::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  if (error_) {
    Error e = *error_;
    error_.reset();
    throw e;
  }
}

void Stream::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    hasWork_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {
      if (stopping_)
        return;
      continue;
    }
    Op op = std::move(queue_.front());
    queue_.pop_front();
    bool skip = error_.has_value() && !op.alwaysRun;
    busy_ = true;
    lock.unlock();
    std::optional<Error> failure;
    if (!skip) {
      // Sampled per op, so enabling takes effect at the next operation.
      bool traced = trace_ && trace_->enabled();
      int64_t start = traced ? trace_->nowNs() : 0;
      runningOperation = &op.name;
      try {
        op.work();
      } catch (const Error &e) {
        failure = Error(e.status(), "op '" + op.name + "': " + e.what());
      } catch (const std::exception &e) {
        failure = Error(Status::Internal, "op '" + op.name + "': " + e.what());
      }
      runningOperation = &kNoOperation;
      if (traced)
        trace_->add(traceId_, op.name, start, trace_->nowNs());
    }
    lock.lock();
    busy_ = false;
    if (failure && !error_)
      error_ = failure;
    if (queue_.empty())
      idle_.notify_all();
  }
}

} // namespace rt
} // namespace fsdp
