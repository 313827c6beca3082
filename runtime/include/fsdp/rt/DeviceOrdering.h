//===- DeviceOrdering.h - Device-side ordering of asynchronous backends ---===//
//
// A backend whose calls return before their device work has run (CUDA)
// gives each runtime stream's worker thread its own device queue and
// implements DeviceOrdering, so that the host orders only the issue of work
// and the device orders its execution:
// * an event record also records a marker in the recording worker's queue,
//   and a stream's wait on that event makes its queue wait for the marker
//   (cudaEventRecord / cudaStreamWaitEvent);
// * a freed arena range remembers the marker of its free, and operations
//   touching bytes reused from it wait for that marker until it is passed;
// * Stream::synchronize, event synchronisation and collectives (which hand
//   memory to another library's queue) wait on the host for the markers.
// Backends that finish their work inside each call (CPU) have none.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_DEVICEORDERING_H
#define FSDP_RT_DEVICEORDERING_H

#include <memory>
#include <vector>

namespace fsdp {
namespace rt {

/// A point in one worker's device queue.
class DeviceMarker {
public:
  virtual ~DeviceMarker();
  /// Blocks the calling thread until the device has passed the marker.
  virtual void synchronize() = 0;
  /// Whether the device has passed the marker.
  virtual bool done() = 0;
};

using DeviceMarkers = std::vector<std::shared_ptr<DeviceMarker>>;

class DeviceOrdering {
public:
  virtual ~DeviceOrdering();
  /// A marker after the device work the calling thread has issued so far.
  virtual std::shared_ptr<DeviceMarker> record() = 0;
  /// The calling thread's later device work runs after `marker`.
  virtual void wait(DeviceMarker &marker) = 0;
  /// Blocks until the device work the calling thread has issued is done.
  virtual void synchronize() = 0;
};

/// Markers the next operation this thread enqueues on a stream must wait
/// for on the device: Context::resolve defers here the free markers of a
/// buffer's reused bytes, Stream::enqueue takes them.
void deferDeviceWaits(DeviceMarkers markers);
DeviceMarkers takeDeferredDeviceWaits();

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_DEVICEORDERING_H
