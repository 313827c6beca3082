//===- Arena.cpp - Per-rank buffer arena bookkeeping ----------------------===//
#include "Arena.h"
#include "fsdp/rt/Error.h"

#include <algorithm>

namespace fsdp {
namespace rt {

int64_t Arena::roundUp(int64_t bytes) {
  if (bytes < 0)
    fail(Status::InvalidArgument, "negative buffer size ", bytes);
  if (bytes > INT64_MAX - kAlignment)
    fail(Status::OutOfMemory, "buffer size ", bytes, " is too large");
  // Zero-byte buffers still get a distinct offset.
  int64_t b = std::max<int64_t>(bytes, 1);
  return (b + kAlignment - 1) / kAlignment * kAlignment;
}

int64_t Arena::findGap(int64_t bytes, bool treatPendingAsFree) const {
  int64_t cursor = 0;
  for (const auto &[offset, range] : ranges_) {
    if (treatPendingAsFree && range.pending)
      continue;
    if (offset - cursor >= bytes)
      return cursor;
    cursor = std::max(cursor, offset + range.size);
  }
  return capacity_ - cursor >= bytes ? cursor : -1;
}

bool Arena::overlaps(int64_t offset, int64_t bytes, bool pendingOnly) const {
  for (const auto &[start, range] : ranges_) {
    if (pendingOnly != range.pending)
      continue;
    if (start < offset + bytes && offset < start + range.size)
      return true;
  }
  return false;
}

void Arena::insert(int64_t offset, int64_t bytes, DeviceMarkers *reuse) {
  // Markers the device has passed order nothing any more.
  auto passed = [](const Released &r) { return r.marker->done(); };
  freedMarkers_.erase(
      std::remove_if(freedMarkers_.begin(), freedMarkers_.end(), passed),
      freedMarkers_.end());
  if (reuse)
    for (const Released &r : freedMarkers_)
      if (r.offset < offset + bytes && offset < r.offset + r.size)
        reuse->push_back(r.marker);
  ranges_[offset] = Range{bytes, false};
  inUse_ += bytes;
  highWaterBytes_ = std::max(highWaterBytes_, inUse_);
  highWaterExtent_ = std::max(highWaterExtent_, offset + bytes);
}

int64_t Arena::allocate(int64_t bytes, DeviceMarkers *reuse) {
  int64_t size = roundUp(bytes);
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    int64_t offset = findGap(size, /*treatPendingAsFree=*/false);
    if (offset >= 0) {
      insert(offset, size, reuse);
      return offset;
    }
    if (findGap(size, /*treatPendingAsFree=*/true) < 0)
      fail(Status::OutOfMemory, "arena out of memory: ", bytes,
           " bytes requested, ", inUse_, " of ", capacity_,
           " bytes in use and no contiguous gap is large enough");
    // Only ranges whose stream-ordered free has not run yet are in the way.
    released_.wait(lock);
  }
}

void Arena::allocateAt(int64_t offset, int64_t bytes, DeviceMarkers *reuse) {
  int64_t size = roundUp(bytes);
  if (offset < 0 || offset % kAlignment != 0)
    fail(Status::InvalidArgument, "arena offset ", offset,
         " is not a non-negative multiple of ", kAlignment);
  if (offset > capacity_ - size)
    fail(Status::OutOfMemory, "buffer [", offset, ", ", offset + size,
         ") exceeds the arena capacity of ", capacity_, " bytes");
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (overlaps(offset, size, /*pendingOnly=*/false))
      fail(Status::InvalidArgument, "buffer [", offset, ", ", offset + size,
           ") overlaps a live buffer");
    if (!overlaps(offset, size, /*pendingOnly=*/true))
      break;
    released_.wait(lock);
  }
  insert(offset, size, reuse);
}

void Arena::markPending(int64_t offset) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.find(offset);
  if (it == ranges_.end())
    fail(Status::Internal, "arena has no range at offset ", offset);
  it->second.pending = true;
}

void Arena::release(int64_t offset, std::shared_ptr<DeviceMarker> marker) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = ranges_.find(offset);
    if (it == ranges_.end())
      fail(Status::Internal, "arena has no range at offset ", offset);
    if (marker)
      freedMarkers_.push_back(
          Released{offset, it->second.size, std::move(marker)});
    inUse_ -= it->second.size;
    ranges_.erase(it);
  }
  released_.notify_all();
}

int64_t Arena::bytesInUse() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return inUse_;
}
int64_t Arena::highWaterBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return highWaterBytes_;
}
void Arena::forgetDeviceMarkers() {
  std::lock_guard<std::mutex> lock(mutex_);
  freedMarkers_.clear();
}

void Arena::resetHighWater() {
  std::lock_guard<std::mutex> lock(mutex_);
  highWaterBytes_ = inUse_;
  highWaterExtent_ = 0;
  for (const auto &[offset, range] : ranges_)
    highWaterExtent_ = std::max(highWaterExtent_, offset + range.size);
}

int64_t Arena::highWaterExtent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return highWaterExtent_;
}

} // namespace rt
} // namespace fsdp
