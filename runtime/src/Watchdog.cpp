//===- Watchdog.cpp - Bounds the collectives the host does not wait for ---===//
#include "Watchdog.h"

#include "fsdp/rt/Error.h"

#include <algorithm>

namespace fsdp {
namespace rt {

Watchdog::Watchdog(int32_t rank, std::chrono::milliseconds period)
    : rank_(rank), period_(period) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (thread_.joinable())
    thread_.join();
}

void Watchdog::addCommunicator(std::shared_ptr<Communicator> comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!heartbeat_ && comm->size() > 1 &&
      comm->options().heartbeatTimeout.count() > 0)
    heartbeat_ = std::make_unique<Heartbeat>(comm->store(), comm->rank(),
                                             comm->size(),
                                             comm->options().heartbeatTimeout);
  comms_.push_back(std::move(comm));
  if (!thread_.joinable())
    thread_ = std::thread([this] { run(); });
}

void Watchdog::removeCommunicator(const Communicator *comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto gone = [comm](const auto &p) { return p.get() == comm; };
  comms_.erase(std::remove_if(comms_.begin(), comms_.end(), gone),
               comms_.end());
  watched_.erase(std::remove_if(watched_.begin(), watched_.end(),
                                [&](const Watched &w) { return gone(w.comm); }),
                 watched_.end());
}

void Watchdog::watch(std::shared_ptr<DeviceMarker> done,
                     Clock::time_point deadline, std::string what,
                     std::shared_ptr<Communicator> comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failure_.empty())
    watched_.push_back(
        Watched{std::move(done), deadline, std::move(what), std::move(comm)});
}

void Watchdog::check() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!failure_.empty())
    throw Error(Status::IO, failure_);
}

std::chrono::milliseconds Watchdog::longestTimeout() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::chrono::milliseconds longest{0};
  for (const auto &c : comms_)
    longest = std::max(longest, c->timeout());
  return longest;
}

std::string Watchdog::pollOnce() {
  std::vector<std::shared_ptr<Communicator>> comms;
  std::vector<Watched> watched;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comms = comms_;
    watched = watched_;
  }
  auto failedOn = [&](const Watched &w, const std::string &why) {
    return w.comm ? w.comm->failedOnRank(w.what, why)
                  : w.what + " failed on rank " + std::to_string(rank_) +
                        ": " + why;
  };
  // Finished work first, so that a failure names a collective still
  // running: the oldest of its communicator.
  std::vector<const Watched *> running;
  std::vector<const DeviceMarker *> finished;
  for (const Watched &w : watched) {
    try {
      if (!w.done->done()) {
        running.push_back(&w);
        continue;
      }
    } catch (const Error &e) {
      return failedOn(w, e.what());
    }
    finished.push_back(w.done.get());
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    watched_.erase(
        std::remove_if(watched_.begin(), watched_.end(),
                       [&](const Watched &w) {
                         return std::find(finished.begin(), finished.end(),
                                          w.done.get()) != finished.end();
                       }),
        watched_.end());
  }
  if (heartbeat_) { // made before the thread started, never replaced
    std::string other = heartbeat_->published();
    if (!other.empty())
      return "rank " + std::to_string(rank_) + " stops: " + other;
  }
  // An asynchronous error says what happened: it goes before a deadline.
  for (const auto &c : comms) {
    std::string error = c->asyncError();
    if (error.empty())
      continue;
    auto oldest = std::find_if(running.begin(), running.end(),
                               [&](const Watched *w) { return w->comm == c; });
    return oldest != running.end() ? failedOn(**oldest, error)
                                   : c->failedOnRank("a collective", error);
  }
  if (heartbeat_ && !running.empty()) {
    std::string silence = heartbeat_->silence();
    if (!silence.empty())
      return failedOn(*running.front(), silence + "; every communicator "
                                                  "aborted");
  }
  Clock::time_point now = Clock::now();
  for (const Watched *w : running) {
    if (now <= w->deadline)
      continue;
    std::chrono::milliseconds timeout =
        w->comm ? w->comm->timeout() : longestTimeout();
    return failedOn(*w, "not complete after " +
                            std::to_string(timeout.count()) +
                            " ms (a peer stalled or gone?); every "
                            "communicator aborted");
  }
  return "";
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (stop_.wait_for(lock, period_, [&] { return stopping_; }))
      return;
    lock.unlock();
    std::string failure = pollOnce();
    lock.lock();
    if (failure.empty())
      continue;
    // Recorded first: a synchronisation that returns because of the abort
    // must find it.
    failure_ = failure;
    watched_.clear();
    std::vector<std::shared_ptr<Communicator>> comms = comms_;
    lock.unlock();
    if (heartbeat_)
      heartbeat_->publish(failure);
    for (const auto &c : comms)
      c->abort(failure);
    return;
  }
}

} // namespace rt
} // namespace fsdp
