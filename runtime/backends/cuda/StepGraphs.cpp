//===- StepGraphs.cpp - CUDA graphs of whole steps ------------------------===//
#include "StepGraphs.h"

#include <cstring>

namespace fsdp {
namespace rt {
namespace cuda {

void failOnBadIndex(const std::vector<PendingCheck> &checks,
                    const IndexVerdict *verdicts) {
  for (size_t i = 0; i < checks.size(); ++i) {
    const IndexVerdict &v = verdicts[i];
    const PendingCheck &p = checks[i];
    if (v.firstBad >= p.n)
      continue;
    failOnIndex(p.op, p.kind, p.range, v.value, v.firstBad);
  }
}

// Destructors cannot report: statuses are ignored on teardown.
StepGraphs::Graph::~Graph() {
  if (exec)
    cudaGraphExecDestroy(exec);
  if (graph)
    cudaGraphDestroy(graph);
  if (live)
    cudaFree(live);
  if (liveHost)
    cudaFreeHost(liveHost);
  if (liveCopied)
    cudaEventDestroy(liveCopied);
  if (verdicts)
    cudaFreeHost(verdicts);
  for (void *p : snapshots)
    cudaFreeHost(p);
}

StepGraphs::Capture::~Capture() {
  for (cudaEvent_t e : ends)
    cudaEventDestroy(e);
  if (start)
    cudaEventDestroy(start);
  if (origin)
    cudaStreamDestroy(origin);
}

StepGraphs::~StepGraphs() = default;

void *StepGraphs::begin(int64_t liveBytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_)
    fail(Status::InvalidArgument, "cuda backend: a capture is under way");
  auto c = std::make_unique<Capture>();
  c->graph = std::make_unique<Graph>();
  Graph &g = *c->graph;
  // Allocated before the capture starts: not part of the graph.
  auto bytes = static_cast<size_t>(std::max<int64_t>(liveBytes, 16));
  checkCuda(cudaMalloc(&g.live, bytes), "cudaMalloc (graph live block)");
  checkCuda(cudaMallocHost(&g.liveHost, bytes),
            "cudaMallocHost (graph live block)");
  checkCuda(cudaMallocHost(reinterpret_cast<void **>(&g.verdicts),
                           kVerdictSlots * sizeof(IndexVerdict)),
            "cudaMallocHost (graph index verdicts)");
  checkCuda(cudaEventCreateWithFlags(&g.liveCopied, cudaEventDisableTiming),
            "cudaEventCreateWithFlags");
  checkCuda(cudaEventCreateWithFlags(&c->start, cudaEventDisableTiming),
            "cudaEventCreateWithFlags");
  checkCuda(cudaStreamCreateWithFlags(&c->origin, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags");
  checkCuda(cudaStreamBeginCapture(c->origin, cudaStreamCaptureModeRelaxed),
            "cudaStreamBeginCapture");
  cudaError_t rc = cudaEventRecord(c->start, c->origin);
  if (rc != cudaSuccess) {
    cudaGraph_t dropped = nullptr;
    cudaStreamEndCapture(c->origin, &dropped);
    if (dropped)
      cudaGraphDestroy(dropped);
    checkCuda(rc, "cudaEventRecord (capture start)");
  }
  capture_ = std::move(c);
  return g.live;
}

void StepGraphs::join(cudaStream_t s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capture_)
    fail(Status::Internal, "cuda backend: no capture to join");
  checkCuda(cudaStreamWaitEvent(s, capture_->start, 0),
            "cudaStreamWaitEvent (joining the capture)");
}

void StepGraphs::leave(cudaStream_t s) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capture_)
    fail(Status::Internal, "cuda backend: no capture to leave");
  cudaEvent_t e = nullptr;
  checkCuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming),
            "cudaEventCreateWithFlags");
  capture_->ends.push_back(e);
  checkCuda(cudaEventRecord(e, s), "cudaEventRecord (leaving the capture)");
}

IndexVerdict *StepGraphs::captureCheck(const PendingCheck &check) {
  std::lock_guard<std::mutex> lock(mutex_);
  Graph &g = *capture_->graph;
  if (g.checks.size() == kVerdictSlots)
    fail(Status::Unsupported, "cuda backend: a captured step holds more than ",
         kVerdictSlots, " index checks");
  g.checks.push_back(check);
  return g.verdicts + g.checks.size() - 1;
}

const void *StepGraphs::snapshot(const void *src, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<void *> &kept = capture_->graph->snapshots;
  void *p = nullptr;
  size_t size = static_cast<size_t>(std::max<int64_t>(bytes, 1));
  checkCuda(cudaMallocHost(&p, size),
            "cudaMallocHost (graph constant)");
  kept.push_back(p);
  std::memcpy(p, src, static_cast<size_t>(bytes));
  return p;
}

int64_t StepGraphs::end() {
  std::unique_ptr<Capture> c;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    c = std::move(capture_);
  }
  if (!c)
    fail(Status::InvalidArgument, "cuda backend: no capture to end");
  // Every stream that joined rejoins the origin, then the capture ends
  // (also after a failure: its streams leave capture mode with it).
  cudaError_t rc = cudaSuccess;
  for (cudaEvent_t e : c->ends)
    if (rc == cudaSuccess)
      rc = cudaStreamWaitEvent(c->origin, e, 0);
  cudaGraph_t graph = nullptr;
  cudaError_t ended = cudaStreamEndCapture(c->origin, &graph);
  c->graph->graph = graph;
  checkCuda(rc, "cudaStreamWaitEvent (rejoining the origin)");
  checkCuda(ended, "cudaStreamEndCapture");
  checkCuda(cudaGraphInstantiate(&c->graph->exec, graph, 0),
            "cudaGraphInstantiate");
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t id = nextId_++;
  graphs_[id] = std::move(c->graph);
  return id;
}

const StepGraphs::Graph &StepGraphs::launch(int64_t id, cudaStream_t s,
                                            const void *live,
                                            int64_t liveBytes) {
  Graph *g;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = graphs_.find(id);
    if (it == graphs_.end())
      fail(Status::InvalidArgument, "cuda backend: no graph ", id);
    g = it->second.get();
  }
  if (liveBytes > 0) {
    // host-sync: the pinned copy is rewritten once its last copy is done.
    checkCuda(cudaEventSynchronize(g->liveCopied), "cudaEventSynchronize");
    std::memcpy(g->liveHost, live, static_cast<size_t>(liveBytes));
    checkCuda(cudaMemcpyAsync(g->live, g->liveHost,
                              static_cast<size_t>(liveBytes),
                              cudaMemcpyHostToDevice, s),
              "cudaMemcpyAsync (graph live block)");
    checkCuda(cudaEventRecord(g->liveCopied, s), "cudaEventRecord");
  }
  checkCuda(cudaGraphLaunch(g->exec, s), "cudaGraphLaunch");
  return *g;
}

bool StepGraphs::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !capture_ && graphs_.empty();
}

std::unique_ptr<StepGraphs::Graph> StepGraphs::release(int64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = graphs_.find(id);
  if (it == graphs_.end())
    fail(Status::InvalidArgument, "cuda backend: no graph ", id);
  std::unique_ptr<Graph> g = std::move(it->second);
  graphs_.erase(it);
  return g;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
