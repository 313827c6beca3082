//===- Heartbeat.h - Ranks tell each other they are alive -----------------===//
//
// A rank that stops (SIGSTOP, a hung host, a node gone) raises no error in
// its peers' NCCL kernels over NVLink: they would wait out the collective
// timeout. Each rank therefore bumps its counter in the rendezvous store
// every timeout/5 and reads its ring neighbour's; a neighbour whose counter
// stood still for the timeout, or a store that stopped answering (rank 0
// serves it), is reported, and so is a failure another rank published.
// The watchdog (Watchdog.h) stops the job on a silent rank only while this
// rank waits for a collective: a rank that finished cleanly is silent too.
// The store work runs on a thread of its own, so that a store that hangs
// cannot hold up the watchdog; that thread is detached at destruction (a
// store request may block until its timeout).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_HEARTBEAT_H
#define FSDP_RT_HEARTBEAT_H

#include "fsdp/rt/CommStore.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace fsdp {
namespace rt {

class Heartbeat {
public:
  /// `rank` of `size` in the group whose namespace `store` is.
  Heartbeat(std::shared_ptr<Store> store, int32_t rank, int32_t size,
            std::chrono::milliseconds timeout);
  ~Heartbeat();
  Heartbeat(const Heartbeat &) = delete;
  Heartbeat &operator=(const Heartbeat &) = delete;

  /// A failure another rank published, "" if none.
  std::string published();
  /// Why a peer seems gone (its heartbeat or the store silent for the
  /// timeout), "" if none.
  std::string silence();
  /// Tells the other ranks about this rank's failure (once, from the
  /// heartbeat's thread).
  void publish(const std::string &failure);

private:
  struct State;
  std::shared_ptr<State> state_;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_HEARTBEAT_H
