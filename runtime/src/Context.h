//===- Context.h - One rank's runtime state ---------------------*- C++ -*-===//
//
// A context is what a rank's generated step talks to: its rank and world
// size, its backend, its arena and the buffers in it, its streams and events,
// and the delay-injection configuration. All methods are thread-safe (a
// program may drive several streams from several host threads).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CONTEXT_H
#define FSDP_RT_CONTEXT_H

#include "Arena.h"
#include "fsdp/rt/backend/Backend.h"
#include "Delay.h"
#include "HandleTable.h"
#include "Stream.h"
#include "Trace.h"
#include "Watchdog.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {

class Communicator;

/// What each launch of a step graph takes anew: how many steps after the
/// captured one it runs, the learning-rate factor and the loss scale then.
struct StepValues {
  int64_t stepsSinceCapture;
  double lrFactor;
  double lossScale;
};
/// Writes a per-step value for `values` into `out` (its bytes).
using LiveRefresh = std::function<void(const StepValues &values, void *out)>;

struct Buffer {
  int64_t offset; // in the arena; 0 for a host buffer
  int64_t size;
  /// A host buffer's memory (CPU offload), outside the arena; null for
  /// arena buffers.
  std::shared_ptr<char> host;
  /// Device markers of the frees of the bytes it reuses: its uses wait for
  /// them until the device has passed them (asynchronous backends only,
  /// DeviceOrdering.h).
  DeviceMarkers reuseWaits;
};

class Context {
public:
  Context(const std::string &backend, int32_t rank, int32_t worldSize,
          int64_t arenaBytes, int numThreads);
  ~Context(); // Synchronises every stream first.

  int32_t rank() const { return rank_; }
  int32_t worldSize() const { return worldSize_; }
  Backend &backend() { return *backend_; }
  Arena &arena() { return arena_; }
  const DelayConfig &delays() const { return delays_; }
  /// The learning-rate schedule's factor (fsdprt_context_set_lr_factor).
  double lrFactor() const { return lrFactor_; }
  void setLrFactor(double factor) { lrFactor_ = factor; }
  /// The dynamic loss scale (fsdprt_context_set_loss_scale).
  double lossScale() const { return lossScale_; }
  void setLossScale(double scale) { lossScale_ = scale; }
  /// Added to the offsets of allocateAt from now on: a second program's
  /// planned buffers placed after the first's persistent bytes.
  void setArenaBase(int64_t base);
  /// Per-stream operation records; its clock starts at context creation.
  TraceLog &trace() { return *trace_; }

  int64_t allocate(int64_t bytes);
  int64_t allocateAt(int64_t offset, int64_t bytes);
  /// A buffer in host memory the device copies from and to asynchronously
  /// (pinned on GPUs): CPU offload's parameters, gradients and state.
  int64_t allocateHost(int64_t bytes);
  bool isHostBuffer(int64_t buffer) const;
  /// Invalidates the handle now; releases the bytes when `stream` gets there.
  void free(int64_t buffer, int64_t stream);
  int64_t bufferSize(int64_t buffer) const;
  /// Address of [offset, offset+bytes) of a live buffer; throws OutOfRange
  /// (naming `what`) if the range is not inside the buffer. Defers the
  /// buffer's pending reuse waits to the operation this thread enqueues
  /// next.
  void *resolve(int64_t buffer, int64_t offset, int64_t bytes,
                const char *what) const;

  int64_t createStream();
  /// A stream whose operations run on the host: kernels through the host
  /// backend (the CPU's) on host buffers; its waits on device work wait on
  /// the host. CPU offload's optimizer runs there.
  int64_t createHostStream();
  bool isHostStream(int64_t handle) const;
  /// The backend of host streams: the context's own when its memory is the
  /// host's, else a CPU backend made on first use.
  Backend &hostBackend();
  void destroyStream(int64_t stream);
  std::shared_ptr<Stream> stream(int64_t handle) const;
  /// Wait for the stream / every stream; while a step graph is being
  /// captured, for the issue only (the work runs at each launch). Either
  /// throws the watchdog's failure, if a stream-ordered collective failed.
  void synchronizeStream(int64_t handle);
  void synchronizeAll();

  /// Communicators are owned by the context so that generated code holds
  /// them as handles like everything else; they outlive the streams. The
  /// stream-ordered ones (NCCL) are watched by the context's watchdog.
  int64_t addCommunicator(std::shared_ptr<Communicator> comm);
  Watchdog &watchdog() { return watchdog_; }
  /// What the communicators hold on the device (Communicator::deviceBytes).
  int64_t communicatorDeviceBytes() const;
  std::shared_ptr<Communicator> communicator(int64_t handle) const;
  void destroyCommunicator(int64_t handle);

  int64_t createEvent();
  void destroyEvent(int64_t event);
  std::shared_ptr<Event> event(int64_t handle) const;

  // Step graphs (CUDA graphs of a whole step, fsdprt_graph_*): the
  // operations issued on every stream between beginCapture and endCapture
  // are recorded into one graph, which launchGraph replays; the per-step
  // values its operations took (liveValue) are refreshed at each launch.
  /// `stepCount`: the captured step's (the step function's step_count).
  void beginCapture(int64_t stepCount);
  /// While capturing: device memory of `bytes` that each launch rewrites
  /// with refresh(its StepValues); null when nothing is being captured.
  void *liveValue(int64_t bytes, LiveRefresh refresh);
  bool capturing() const;
  /// Ends the capture; throws why the step could not be captured.
  int64_t endCapture();
  void launchGraph(int64_t graph, int64_t stream, int64_t stepCount);
  void destroyGraph(int64_t graph);

private:
  struct LiveValue {
    int64_t offset, bytes;
    LiveRefresh refresh;
  };
  struct StepGraph {
    int64_t backendId, stepCount, liveBytes;
    std::vector<LiveValue> values;
  };
  /// The live block of one graph: its per-step values, 16-byte aligned.
  static constexpr int64_t kLiveBytes = int64_t(64) << 10;
  std::vector<std::shared_ptr<Stream>> allStreams() const;
  /// Registers a buffer; its handle.
  int64_t addBuffer(Buffer b);
  /// Queues the stream's joining of the capture (its worker's device queue).
  void joinCapture(Stream &s);

  const int32_t rank_;
  const int32_t worldSize_;
  const DelayConfig delays_;
  double lrFactor_ = 1.0;
  double lossScale_ = 1.0;
  int64_t arenaBase_ = 0;
  // Before the streams, which register with it and keep it alive.
  const std::shared_ptr<TraceLog> trace_ = std::make_shared<TraceLog>();
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> hostBackend_; // when backend_'s is not the host's
  const int numThreads_;
  Arena arena_;
  char *base_ = nullptr;
  mutable std::mutex mutex_;
  HandleTable<Buffer> buffers_{"buffer"};
  std::shared_ptr<Stream> defaultStream_;
  HandleTable<Stream> streams_{"stream"};
  std::set<int64_t> hostStreams_;
  HandleTable<Event> events_{"event"};
  std::unique_ptr<StepGraph> capture_; // being captured
  char *captureLive_ = nullptr;        // its live block
  HandleTable<StepGraph> graphs_{"graph"};
  // Destroyed after the destructor has drained the streams.
  HandleTable<Communicator> comms_{"communicator"};
  // Last: stops polling before the communicators go.
  Watchdog watchdog_;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CONTEXT_H
