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
// * a collective is issued onto the issuing worker's own queue
//   (queueHandle(): NCCL takes the cudaStream_t), after the work already
//   there, so that nothing waits on the host between a producer and its
//   collective, and consumers wait for it as for any other work;
// * Stream::synchronize and event synchronisation wait on the host for the
//   markers.
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
  /// The calling thread's device queue as the vendor library knows it (a
  /// cudaStream_t), for a library that issues onto it (NCCL).
  virtual void *queueHandle() = 0;
  /// Whether the calling thread's device work is being captured into a
  /// graph (recorded, not run: its markers cannot be waited for).
  virtual bool capturing() = 0;
};

/// Markers the next operation this thread enqueues on a stream must wait
/// for on the device: Context::resolve defers here the free markers of a
/// buffer's reused bytes, Stream::enqueue takes them.
void deferDeviceWaits(DeviceMarkers markers);
DeviceMarkers takeDeferredDeviceWaits();

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_DEVICEORDERING_H
