//===- StepGraphs.h - CUDA graphs of whole steps ----------------*- C++ -*-===//
//
// The CUDA side of Context's step graphs (Backend.h's graph* calls). A
// capture starts on an origin stream of its own; each worker stream joins
// it by waiting on an event recorded there, and leaves it by recording an
// event the origin waits on before the capture ends: every worker's work
// between join and leave is one graph (cudaStreamCaptureModeRelaxed, so
// the host threads of the other streams are not restricted). A graph owns
// * its live block (device) and the pinned host copy that each launch
//   fills and copies in, ahead of the graph on the same stream;
// * the verdict slots (pinned) of the index checks captured in it, read
//   where the launching stream is next synchronised;
// * pinned copies of the host bytes copied in while capturing (a compiled
//   step's constants), which each launch copies in again.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_STEPGRAPHS_H
#define FSDP_RT_CUDA_STEPGRAPHS_H

#include "Device.h"
#include "Kernels.h"

#include "fsdp/rt/backend/IndexCheck.h"

#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace fsdp {
namespace rt {
namespace cuda {

/// An index check queued on a stream whose verdict the host has not read.
struct PendingCheck {
  const char *op;
  IndexKind kind;
  int64_t n;
  IndexRange range;
};
constexpr size_t kVerdictSlots = 64;

/// Fails (OUT_OF_RANGE) with the first bad index of checks[i], whose
/// verdict is verdicts[i], once the device has written them.
void failOnBadIndex(const std::vector<PendingCheck> &checks,
                    const IndexVerdict *verdicts);

class StepGraphs {
public:
  struct Graph {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    void *live = nullptr;           // device
    void *liveHost = nullptr;       // pinned
    cudaEvent_t liveCopied = nullptr; // the last copy out of liveHost
    IndexVerdict *verdicts = nullptr; // pinned, kVerdictSlots
    std::vector<PendingCheck> checks;
    std::vector<void *> snapshots; // pinned
    ~Graph();
  };

  ~StepGraphs();

  /// Starts a capture (any thread); returns the live block.
  void *begin(int64_t liveBytes);
  /// The work queued on `s` from now on is captured / no longer captured.
  void join(cudaStream_t s);
  void leave(cudaStream_t s);
  /// Ends the capture, whatever happened; throws if it failed.
  int64_t end();
  /// While capturing: the verdict slot of a check queued in the capture.
  IndexVerdict *captureCheck(const PendingCheck &check);
  /// While capturing: a pinned copy of `bytes` at `src`, the graph's.
  const void *snapshot(const void *src, int64_t bytes);
  /// Queues the copy of `live` into graph `id`'s block, then the graph, on
  /// `s`; returns the graph (its checks are read after `s` is synchronised).
  const Graph &launch(int64_t id, cudaStream_t s, const void *live,
                      int64_t liveBytes);
  /// No capture is under way and no graph is held.
  bool idle();
  /// Takes graph `id` out (destroy it once no launch of it is left).
  std::unique_ptr<Graph> release(int64_t id);

private:
  struct Capture {
    cudaStream_t origin = nullptr;
    cudaEvent_t start = nullptr;
    std::vector<cudaEvent_t> ends; // one per stream that left
    std::unique_ptr<Graph> graph;
    ~Capture();
  };
  std::mutex mutex_;
  std::unique_ptr<Capture> capture_;
  std::map<int64_t, std::unique_ptr<Graph>> graphs_;
  int64_t nextId_ = 1;
};

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_STEPGRAPHS_H
