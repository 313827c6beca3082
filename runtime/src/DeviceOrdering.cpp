//===- DeviceOrdering.cpp - Device-side ordering of asynchronous backends -===//
#include "fsdp/rt/backend/DeviceOrdering.h"

namespace fsdp {
namespace rt {

DeviceMarker::~DeviceMarker() = default;
DeviceOrdering::~DeviceOrdering() = default;

// Resolving a buffer and enqueueing the operation that uses it happen on
// the same host thread, one after the other.
static thread_local DeviceMarkers deferredWaits;

void deferDeviceWaits(DeviceMarkers markers) {
  for (auto &m : markers)
    deferredWaits.push_back(std::move(m));
}

DeviceMarkers takeDeferredDeviceWaits() {
  DeviceMarkers out;
  out.swap(deferredWaits);
  return out;
}

} // namespace rt
} // namespace fsdp
