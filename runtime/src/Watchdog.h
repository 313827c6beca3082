//===- Watchdog.h - Bounds the collectives the host does not wait for -----===//
//
// A stream-ordered collective (Comm.h) returns once issued, and nothing on
// the host waits for it. The context's watchdog does: each is watched from
// its issue until the device passes the marker recorded after it, against
// its communicator's timeout, and every stream-ordered communicator's
// asynchronous error is polled. The first failure (an asynchronous error:
// a peer gone, calls that do not match; or a deadline passed: a peer
// stalled) aborts every watched communicator, so that the kernels waiting
// for peers leave their streams and nothing hangs, and is thrown by the
// context's next synchronisation, naming the collective, its group and
// this rank. A step graph's launch is watched the same way, as a whole.
// With the first communicator of more than one rank (the world) comes a
// heartbeat (Heartbeat.h): a peer silent while this rank waits for a
// collective fails the job after FSDPRT_HEARTBEAT_TIMEOUT_MS (10 s), not
// the collective timeout (FSDPRT_COLLECTIVE_TIMEOUT_MS, 300 s), and a
// failure found here is published for the other ranks, which stop too.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_WATCHDOG_H
#define FSDP_RT_WATCHDOG_H

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/backend/DeviceOrdering.h"
#include "Heartbeat.h"

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace fsdp {
namespace rt {

class Watchdog {
public:
  using Clock = std::chrono::steady_clock;
  /// `rank` names this process in errors; `period` is how often the
  /// device and the communicators are polled.
  Watchdog(int32_t rank, std::chrono::milliseconds period);
  ~Watchdog(); // Stops polling; aborts nothing.
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  /// Polls `comm`'s asynchronous error from now on (starts the thread).
  void addCommunicator(std::shared_ptr<Communicator> comm);
  void removeCommunicator(const Communicator *comm);
  /// Watches device work ending at `done` until `deadline`. `what` names
  /// it ("all_gather (issue tag 3)"); `comm` is the communicator it runs
  /// on, null for work on all of them (a step graph).
  void watch(std::shared_ptr<DeviceMarker> done, Clock::time_point deadline,
             std::string what, std::shared_ptr<Communicator> comm);
  /// Throws Error(IO) with the first failure, if there was one.
  void check();
  /// The longest timeout of the watched communicators (0 without any).
  std::chrono::milliseconds longestTimeout();

private:
  struct Watched {
    std::shared_ptr<DeviceMarker> done;
    Clock::time_point deadline;
    std::string what;
    std::shared_ptr<Communicator> comm;
  };
  void run();
  /// One poll; the failure found, "" if none.
  std::string pollOnce();

  const int32_t rank_;
  const std::chrono::milliseconds period_;
  std::mutex mutex_;
  std::condition_variable stop_;
  bool stopping_ = false;
  std::vector<std::shared_ptr<Communicator>> comms_;
  std::vector<Watched> watched_;
  std::string failure_;
  std::unique_ptr<Heartbeat> heartbeat_;
  std::thread thread_; // started by the first addCommunicator
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_WATCHDOG_H
