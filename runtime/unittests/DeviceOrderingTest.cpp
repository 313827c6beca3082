//===- DeviceOrderingTest.cpp - device-side ordering plumbing -------------===//
//
// An asynchronous backend (CUDA) orders its device queues through
// DeviceOrdering: event records and waits, frees and the first use of
// reused bytes, stream synchronisation. A fake ordering that logs which
// worker records, waits and synchronises what checks that plumbing without
// a GPU (on the CUDA host emulation every stream operation is synchronous,
// so ordering mistakes would not show there).
//
//===----------------------------------------------------------------------===//
#include "src/Arena.h"
#include "fsdp/rt/backend/DeviceOrdering.h"
#include "src/Stream.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fsdp {
namespace rt {
namespace test {
namespace {

struct FakeMarker : DeviceMarker {
  FakeMarker(int queue, int id) : queue(queue), id(id) {}
  void synchronize() override { synchronized = true; }
  bool done() override { return isDone; }
  const int queue, id;
  bool synchronized = false, isDone = false;
};

/// Each calling thread is one device queue, numbered on first use.
class FakeOrdering : public DeviceOrdering {
public:
  std::shared_ptr<DeviceMarker> record() override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto m = std::make_shared<FakeMarker>(queueLocked(), ++markers_);
    log_.push_back("q" + std::to_string(m->queue) + " record m" +
                   std::to_string(m->id));
    return m;
  }
  void wait(DeviceMarker &marker) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto &m = static_cast<FakeMarker &>(marker);
    log_.push_back("q" + std::to_string(queueLocked()) + " wait m" +
                   std::to_string(m.id) + " of q" + std::to_string(m.queue));
  }
  void synchronize() override {
    std::lock_guard<std::mutex> lock(mutex_);
    log_.push_back("q" + std::to_string(queueLocked()) + " synchronize");
  }
  void *queueHandle() override { return nullptr; }
  bool capturing() override { return false; }
  /// A host-side note in the log, from the thread that runs it.
  void note(const std::string &what) {
    std::lock_guard<std::mutex> lock(mutex_);
    log_.push_back("q" + std::to_string(queueLocked()) + " " + what);
  }
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mutex_);
    return log_;
  }

private:
  int queueLocked() {
    auto [it, added] = queues_.try_emplace(std::this_thread::get_id(), 0);
    if (added)
      it->second = static_cast<int>(queues_.size());
    return it->second;
  }
  std::mutex mutex_;
  std::map<std::thread::id, int> queues_;
  std::vector<std::string> log_;
  int markers_ = 0;
};

TEST(DeviceOrdering, WaitOnAnEventWaitsForTheRecordersMarker) {
  FakeOrdering device;
  Stream a(nullptr, "a", &device), b(nullptr, "b", &device);
  auto event = std::make_shared<Event>();
  a.enqueue("produce", [&] { device.note("produce"); });
  a.record(event);
  b.wait(event);
  b.enqueue("consume", [&] { device.note("consume"); });
  b.synchronize();
  a.synchronize();
  // Queue 1 is a's worker (first to touch the device), queue 2 b's.
  EXPECT_EQ(device.log(), (std::vector<std::string>{
                              "q1 produce", "q1 record m1", "q2 wait m1 of q1",
                              "q2 consume", "q2 synchronize",
                              "q1 synchronize"}));
}

// CPU offload's host stream has no device queue: its wait on a device
// stream's event blocks its worker until the device has passed the marker
// (the gradient's copy to the host has landed), then runs host work.
TEST(DeviceOrdering, AHostStreamWaitsOnTheHostForTheDevice) {
  FakeOrdering device;
  Stream a(nullptr, "a", &device), host(nullptr, "host", nullptr);
  auto event = std::make_shared<Event>();
  a.record(event);
  a.synchronize();
  auto marker = std::static_pointer_cast<FakeMarker>(
      event->markerOf(event->lastTicket()));
  ASSERT_TRUE(marker);
  bool synchronizedFirst = false;
  host.wait(event);
  host.enqueue("update", [&] { synchronizedFirst = marker->synchronized; });
  host.synchronize();
  EXPECT_TRUE(synchronizedFirst);
}

TEST(DeviceOrdering, AWaitKeepsTheMarkerOfTheRecordItBoundTo) {
  FakeOrdering device;
  Stream a(nullptr, "a", &device), b(nullptr, "b", &device);
  auto event = std::make_shared<Event>();
  std::mutex gate;
  gate.lock(); // b's worker blocks here until a has recorded twice
  b.enqueue("blocked", [&] { std::lock_guard<std::mutex> g(gate); });
  a.record(event);
  b.wait(event); // bound to the first record
  a.record(event);
  a.synchronize();
  gate.unlock();
  b.synchronize();
  auto log = device.log();
  EXPECT_NE(std::find(log.begin(), log.end(), "q2 wait m1 of q1"), log.end())
      << "the wait must use the first record's marker, not the latest";
}

TEST(DeviceOrdering, EventSynchronizeWaitsForTheDevice) {
  FakeOrdering device;
  Stream a(nullptr, "a", &device);
  auto event = std::make_shared<Event>();
  a.record(event);
  event->synchronize(event->lastTicket());
  auto marker = std::static_pointer_cast<FakeMarker>(
      event->markerOf(event->lastTicket()));
  ASSERT_TRUE(marker);
  EXPECT_TRUE(marker->synchronized);
  EXPECT_FALSE(event->passed(event->lastTicket())); // device not there yet
  marker->isDone = true;
  EXPECT_TRUE(event->passed(event->lastTicket()));
  a.synchronize();
}

TEST(DeviceOrdering, DeferredWaitsGoToTheNextOperationOnly) {
  FakeOrdering device;
  Stream a(nullptr, "a", &device);
  auto freed = std::make_shared<FakeMarker>(9, 7);
  deferDeviceWaits({freed});
  a.enqueue("first_use", [&] { device.note("first use"); });
  a.enqueue("second_use", [&] { device.note("second use"); });
  a.synchronize();
  EXPECT_EQ(device.log(),
            (std::vector<std::string>{"q1 wait m7 of q9", "q1 first use",
                                      "q1 second use", "q1 synchronize"}));
}

TEST(DeviceOrdering, ReusedArenaBytesCarryTheMarkersOfTheirFrees) {
  Arena arena(4096);
  arena.allocateAt(0, 256);
  arena.allocateAt(256, 256);
  auto first = std::make_shared<FakeMarker>(1, 1),
       second = std::make_shared<FakeMarker>(2, 2);
  arena.markPending(0);
  arena.release(0, first);
  arena.markPending(256);
  arena.release(256, second);
  DeviceMarkers reuse;
  arena.allocateAt(128, 256, &reuse); // overlaps both freed ranges
  EXPECT_EQ(reuse.size(), 2u);
  DeviceMarkers fresh;
  arena.allocateAt(1024, 64, &fresh); // never used before
  EXPECT_TRUE(fresh.empty());
  // A marker the device has passed orders nothing any more.
  first->isDone = true;
  arena.markPending(128);
  arena.release(128);
  DeviceMarkers again;
  arena.allocateAt(0, 64, &again);
  ASSERT_EQ(again.size(), 0u) << "only the passed marker covers [0, 64)";
  DeviceMarkers tail;
  arena.allocateAt(320, 64, &tail);
  ASSERT_EQ(tail.size(), 1u);
  EXPECT_EQ(tail[0], second);
}

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
