//===- Arena.h - Per-rank buffer arena bookkeeping --------------*- C++ -*-===//
//
// The compiler plans every buffer of a rank inside one arena; the runtime
// hands out [offset, offset+size) ranges of it and records the high-water
// marks so that the plan's peak-memory estimate can be checked against what
// a run really used. Ranges are 64-byte aligned. Frees are stream-ordered:
// a range is first "pending" (its handle is dead but a stream may still use
// the bytes) and only becomes reusable when the stream releases it, so an
// allocation that would overlap a pending range waits for that release.
// On an asynchronous backend a release carries the device marker of the
// free (DeviceOrdering.h): an allocation reusing those bytes gets the
// markers its uses must wait for until the device has passed them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_ARENA_H
#define FSDP_RT_ARENA_H

#include "fsdp/rt/backend/DeviceOrdering.h"
#include "fsdp/rt/fsdprt.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace fsdp {
namespace rt {

class Arena {
public:
  static constexpr int64_t kAlignment = FSDPRT_ARENA_ALIGNMENT;

  explicit Arena(int64_t capacity) : capacity_(capacity) {}

  /// First fit; waits for pending frees if only they stand in the way;
  /// throws Error(OutOfMemory) otherwise. Returns the offset; `reuse` (if
  /// given) receives the device markers of the frees of the bytes it reuses.
  int64_t allocate(int64_t bytes, DeviceMarkers *reuse = nullptr);
  /// Places a range at `offset` (must be aligned); waits for overlapping
  /// pending frees; throws if it overlaps a live range or the capacity.
  void allocateAt(int64_t offset, int64_t bytes,
                  DeviceMarkers *reuse = nullptr);
  /// The handle is gone; the bytes are still in use until release().
  void markPending(int64_t offset);
  /// `marker` (may be null): where the device passes the free.
  void release(int64_t offset,
               std::shared_ptr<DeviceMarker> marker = nullptr);

  int64_t bytesInUse() const;
  int64_t highWaterBytes() const;
  int64_t highWaterExtent() const;
  /// Both marks restart from the ranges live now.
  void resetHighWater();
  /// Drops the free markers: after a step graph's capture, whose markers
  /// order nothing outside the graph (its work ran or will run whole).
  void forgetDeviceMarkers();

  /// `bytes` (at least 1) rounded up to kAlignment; throws on a negative
  /// or overflowing size.
  static int64_t roundUp(int64_t bytes);

private:
  struct Range {
    int64_t size;
    bool pending;
  };
  /// Offset of the first gap of `bytes`, or -1; with treatPendingAsFree the
  /// answer is where it would fit once pending frees have run.
  int64_t findGap(int64_t bytes, bool treatPendingAsFree) const;
  bool overlaps(int64_t offset, int64_t bytes, bool pendingOnly) const;
  bool anyPending() const;
  void insert(int64_t offset, int64_t bytes, DeviceMarkers *reuse);

  /// Freed bytes whose free the device may not have passed yet.
  struct Released {
    int64_t offset, size;
    std::shared_ptr<DeviceMarker> marker;
  };

  const int64_t capacity_;
  mutable std::mutex mutex_;
  std::condition_variable released_;
  std::map<int64_t, Range> ranges_; // offset -> range, live or pending
  std::vector<Released> freedMarkers_;
  int64_t inUse_ = 0;
  int64_t highWaterBytes_ = 0;
  int64_t highWaterExtent_ = 0;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_ARENA_H
