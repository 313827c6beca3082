//===- Heartbeat.cpp - Ranks tell each other they are alive ---------------===//
#include "Heartbeat.h"

#include <condition_variable>
#include <mutex>
#include <thread>

namespace fsdp {
namespace rt {

namespace {
using Clock = std::chrono::steady_clock;
const char *kFailedKey = "heartbeat/failed";
std::string counterKey(int32_t rank) {
  return "heartbeat/" + std::to_string(rank);
}
} // namespace

/// Shared with the thread, which may outlive the Heartbeat.
struct Heartbeat::State {
  std::shared_ptr<Store> store;
  int32_t rank, size;
  std::chrono::milliseconds timeout;

  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::string toPublish, published;
  int64_t neighbourCount = -1;
  Clock::time_point neighbourMoved = Clock::now(), storeAnswered = Clock::now();

  void beat() {
    store->add(counterKey(rank), 1);
    int64_t seen = store->add(counterKey((rank + 1) % size), 0);
    std::string mine, theirs;
    {
      std::lock_guard<std::mutex> lock(mutex);
      mine.swap(toPublish);
    }
    if (!mine.empty())
      store->set(kFailedKey, std::vector<char>(mine.begin(), mine.end()));
    else if (store->check(kFailedKey)) {
      std::vector<char> v = store->get(kFailedKey, timeout);
      theirs.assign(v.begin(), v.end());
    }
    std::lock_guard<std::mutex> lock(mutex);
    Clock::time_point now = Clock::now();
    storeAnswered = now;
    if (seen != neighbourCount) {
      neighbourCount = seen;
      neighbourMoved = now;
    }
    if (published.empty() && !theirs.empty())
      published = theirs;
  }

  void run() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      lock.unlock();
      try {
        beat();
      } catch (...) {
        // The store did not answer: silence() tells once it lasts.
      }
      lock.lock();
      wake.wait_for(lock, timeout / 5, [&] { return stopping; });
    }
  }
};

Heartbeat::Heartbeat(std::shared_ptr<Store> store, int32_t rank, int32_t size,
                     std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>()) {
  state_->store = std::move(store);
  state_->rank = rank;
  state_->size = size;
  state_->timeout = timeout;
  std::thread([state = state_] { state->run(); }).detach();
}

Heartbeat::~Heartbeat() {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
}

std::string Heartbeat::published() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->published.empty()
             ? ""
             : "another rank failed: " + state_->published;
}

std::string Heartbeat::silence() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  Clock::time_point now = Clock::now();
  auto ms = [&](Clock::time_point since) {
    return std::to_string(
        std::chrono::duration_cast<std::chrono::milliseconds>(now - since)
            .count());
  };
  if (now - state_->storeAnswered > state_->timeout)
    return "the rendezvous store (served by rank 0, or by torchrun's agent) "
           "has not answered for " +
           ms(state_->storeAnswered) + " ms: its server stalled or gone?";
  if (now - state_->neighbourMoved > state_->timeout)
    return "rank " + std::to_string((state_->rank + 1) % state_->size) +
           " sent no heartbeat for " + ms(state_->neighbourMoved) +
           " ms (FSDPRT_HEARTBEAT_TIMEOUT_MS): stalled or gone?";
  return "";
}

void Heartbeat::publish(const std::string &failure) {
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->toPublish = failure;
  }
  state_->wake.notify_all();
}

} // namespace rt
} // namespace fsdp
