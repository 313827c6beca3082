//===- Worker.cpp - The CUDA backend's per-thread execution state ---------===//
//
// Each worker thread's stream, scratch reserve and pinned buffers, its index
// checks' verdicts and its copies to and from host memory (Worker.h). Host
// code only: it queues copies and launchers, and launches no kernel itself.
//
//===----------------------------------------------------------------------===//
#include "Worker.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// Each worker thread's pinned staging buffer for pageable host memory.
constexpr int64_t kPinnedBytes = int64_t(8) << 20;

bool isPinned(const void *p) {
  cudaPointerAttributes attr;
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    cudaGetLastError(); // Clear: unregistered host memory is not an error.
    return false;
  }
  return attr.type == cudaMemoryTypeHost;
}

/// Whether the opt-in switch `name` selects its lean kernels ("lean");
/// unset, empty or "default" keeps the default ones, and any other value
/// fails, so that a misspelt switch is not a silent no-op.
bool leanKernelsSelected(const char *name) {
  const char *v = std::getenv(name);
  std::string kind = v ? v : "";
  if (kind != "" && kind != "default" && kind != "lean")
    fail(Status::InvalidArgument, "cuda backend: ", name, "=", kind,
         " (expected lean or default)");
  return kind == "lean";
}

} // namespace

Workers::Workers(int device, StepGraphs &graphs, bool syncEachCall, bool tf32)
    : device_(device), graphs_(graphs), syncEachCall_(syncEachCall),
      tf32_(tf32), padGemmFlops_(padGemmFlops()),
      leanXent_(leanKernelsSelected("FSDPRT_XENT_KERNELS")),
      norms_(leanKernelsSelected("FSDPRT_NORM_KERNELS") ? NormKernels::Lean
                                                        : NormKernels::Streaming) {
}

Workers::~Workers() {
  // Destructors cannot report: statuses are ignored on teardown.
  cudaSetDevice(device_);
  for (auto &entry : states_) {
    ThreadState &st = entry.second;
    // The workspace's free is queued behind the stream's last GEMM and
    // has happened once the stream is synchronised: the pool's marks of
    // a context made next start from what that context holds (the device
    // counted a destroyed context's pending workspace free as in use,
    // and its completion hid the next context's first scratch).
    if (st.gemm.workspace)
      cudaFreeAsync(st.gemm.workspace, st.stream);
    st.scratch.reset(); // its free is queued the same way
    if (st.stream)      // host-sync: teardown
      cudaStreamSynchronize(st.stream);
#ifdef FSDPRT_HAVE_CUDNN
    st.fused.reset();
    st.conv.reset();
#endif
    st.gemm.lt.reset();
    if (st.gemm.blas)
      cublasDestroy(st.gemm.blas);
    if (st.stream)
      cudaStreamDestroy(st.stream);
    if (st.pinned)
      cudaFreeHost(st.pinned);
    if (st.verdicts)
      cudaFreeHost(st.verdicts);
  }
}

ThreadState &Workers::state() {
  checkCuda(cudaSetDevice(device_), "cudaSetDevice");
  std::lock_guard<std::mutex> lock(mutex_);
  ThreadState &st = states_[std::this_thread::get_id()];
  if (!st.stream) {
    checkCuda(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking),
              "cudaStreamCreateWithFlags");
    st.scratch = std::make_unique<ScratchReserve>(st.stream);
    checkCuda(cudaMallocHost(&st.pinned, kPinnedBytes),
              "cudaMallocHost (pinned staging)");
    checkCuda(cudaMallocHost(reinterpret_cast<void **>(&st.verdicts),
                             kVerdictSlots * sizeof(IndexVerdict)),
              "cudaMallocHost (index verdicts)");
  }
  return st;
}

void Workers::synchronize() {
  // Called for Stream::synchronize, copies to or from host memory and
  // the arena (runSync), every call with
  // FSDPRT_CUDA_SYNC=1 (finishCall), all index-verdict slots in use.
  ThreadState &st = state();
  refuseHostWaitWhileCapturing(st);
  // host-sync: the callers above.
  checkCuda(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize");
  readVerdicts(st);
}

void Workers::synchronizeAll() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto &entry : states_)
    if (entry.second.stream) // host-sync: before the arena is freed
      checkCuda(cudaStreamSynchronize(entry.second.stream),
                "cudaStreamSynchronize");
}

void Workers::refuseHostWaitWhileCapturing(const ThreadState &st) {
  if (st.capturing)
    fail(Status::Unsupported,
         "cuda backend: a host wait for the device (a collective, a copy "
         "to or from host memory) inside a step being captured as a CUDA "
         "graph");
}

Scratch Workers::countedTargets(Exec &e, const char *op, DType targetType,
                                const void *targets, int64_t n, int64_t c,
                                int64_t ignoreIndex) {
  Scratch count(e.s, 8);
  queueCheck(op, IndexKind::Target, targetType, targets, n,
             {c, true, ignoreIndex}, count.as<int64_t>());
  return count;
}

void Workers::queueCheck(const char *op, IndexKind kind, DType type,
                         const void *ids, int64_t n, const IndexRange &range,
                         int64_t *count) {
  ThreadState &st = state();
  PendingCheck check{op, kind, n, range};
  if (st.capturing) // the graph's own slot, read after each launch
    return queueIndexCheck(st.stream, type, ids, n, range.limit,
                           range.hasIgnore, range.ignoreIndex, count,
                           graphs_.captureCheck(check));
  if (st.pending.size() == kVerdictSlots)
    synchronize(); // every verdict slot holds an unread verdict
  queueIndexCheck(st.stream, type, ids, n, range.limit, range.hasIgnore,
                  range.ignoreIndex, count, st.verdicts + st.pending.size());
  st.pending.push_back(check);
}

/// After st's stream has been synchronised: fails with the first bad
/// index of the checks queued since the last read, and of the last graph
/// launched on it (each reported once).
void Workers::readVerdicts(ThreadState &st) {
  std::vector<PendingCheck> pending;
  pending.swap(st.pending);
  const StepGraphs::Graph *launched = st.launched;
  st.launched = nullptr;
  failOnBadIndex(pending, st.verdicts);
  if (launched)
    failOnBadIndex(launched->checks, launched->verdicts);
}

void hostToDevice(Exec &e, void *dst, const void *src, int64_t bytes) {
  if (isPinned(src)) {
    checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, e.s),
              "cudaMemcpyAsync (host to device)");
    return;
  }
  // Pageable memory goes through this thread's pinned buffer; the buffer
  // is refilled only after the previous chunk's copy has completed.
  for (int64_t off = 0; off < bytes; off += kPinnedBytes) {
    int64_t len = std::min(kPinnedBytes, bytes - off);
    std::memcpy(e.pinned, static_cast<const char *>(src) + off, len);
    checkCuda(cudaMemcpyAsync(static_cast<char *>(dst) + off, e.pinned, len,
                              cudaMemcpyHostToDevice, e.s),
              "cudaMemcpyAsync (host to device)");
    // host-sync: the pinned buffer is refilled for the next chunk.
    checkCuda(cudaStreamSynchronize(e.s), "cudaStreamSynchronize (copy)");
  }
}

void deviceToHost(Exec &e, void *dst, const void *src, int64_t bytes) {
  if (isPinned(dst)) {
    checkCuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, e.s),
              "cudaMemcpyAsync (device to host)");
    return;
  }
  for (int64_t off = 0; off < bytes; off += kPinnedBytes) {
    int64_t len = std::min(kPinnedBytes, bytes - off);
    checkCuda(cudaMemcpyAsync(e.pinned, static_cast<const char *>(src) + off,
                              len, cudaMemcpyDeviceToHost, e.s),
              "cudaMemcpyAsync (device to host)");
    // host-sync: the host reads the pinned buffer next.
    checkCuda(cudaStreamSynchronize(e.s), "cudaStreamSynchronize (copy)");
    std::memcpy(static_cast<char *>(dst) + off, e.pinned, len);
  }
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
