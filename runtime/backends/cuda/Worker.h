//===- Worker.h - The CUDA backend's per-thread execution state -*- C++ -*-===//
//
// The runtime's streams are host worker threads (src/Stream.h). Each worker
// thread that calls the CUDA backend gets its own CUDA stream (non-blocking),
// scratch reserve, pinned buffers and, at its first GEMM, cuBLAS handle
// (Gemm.h), so the work of different runtime streams overlaps on the
// device. A backend call runs through Workers::run: it queues its kernels,
// copies and GEMMs on the calling thread's stream and returns. The host
// waits for the device only where it must: copies to or from host memory,
// Stream::synchronize and event synchronisation; index checks leave their
// verdicts in pinned memory, read at those points. FSDPRT_CUDA_SYNC=1 makes
// every call wait for its work, as before.
//
// Buffer lifetimes (where each buffer is last used before it is freed):
// * Scratch (f32 staging of 16-bit operands, attention probabilities, row
//   statistics, partial sums, cuDNN's workspaces): pieces of the calling
//   thread's reserve (ScratchReserve.h), used by kernels on its own CUDA
//   stream only, so the next call on that stream reuses them in stream
//   order. Held between calls, as the GEMM workspace.
// * Pinned host staging buffers (one per worker thread) are reused only
//   after the copy that read or wrote them has been synchronised.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_WORKER_H
#define FSDP_RT_CUDA_WORKER_H

#include "Device.h"
#include "Gemm.h"
#include "Kernels.h"
#include "ScratchReserve.h"
#include "StepGraphs.h"
#ifdef FSDPRT_HAVE_CUDNN
#include "CudnnConv.h"
#include "FusedAttention.h"
#endif

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fsdp {
namespace rt {
namespace cuda {

/// One worker thread's CUDA stream and what its calls use on it, made by
/// Workers::state.
struct ThreadState {
  cudaStream_t stream = nullptr;
  GemmHandles gemm;
  std::unique_ptr<ScratchReserve> scratch; // the calls' scratch (Device.h)
  void *pinned = nullptr;
  IndexVerdict *verdicts = nullptr;  // kVerdictSlots, pinned host memory
  std::vector<PendingCheck> pending; // pending[i]'s verdict is verdicts[i]
  bool capturing = false;            // the stream is in a step graph capture
  const StepGraphs::Graph *launched = nullptr; // checks read at synchronize
#ifdef FSDPRT_HAVE_CUDNN
  bool fusedTried = false;
  std::unique_ptr<FusedAttention> fused; // null: cuDNN could not be loaded
  bool convTried = false;
  std::unique_ptr<CudnnConv> conv; // null: cuDNN could not be loaded
#endif
};

/// What a backend call runs on.
struct Exec {
  cudaStream_t s;
  ThreadState *st;
  void *pinned;
  double padGemmFlops; // gemm(): see padGemmFlops()
  bool tf32;           // f32 GEMMs may round their inputs to TF32
  bool leanXent;       // FSDPRT_XENT_KERNELS=lean (CrossEntropyLean.h)
  NormKernels norms;   // FSDPRT_NORM_KERNELS (Kernels.h)

  cublasHandle_t blas() const { return gemm().blas; }
  LtMatmul *lt() const { return gemm().lt.get(); }

private:
  GemmHandles &gemm() const; // Gemm.cpp
};

/// The state of every worker thread that has called the backend, and the
/// calls' way onto it.
class Workers {
public:
  /// `graphs` tells run() whether a step is being captured; `syncEachCall`
  /// is FSDPRT_CUDA_SYNC=1, `tf32` FSDPRT_CUDA_TF32=1.
  Workers(int device, StepGraphs &graphs, bool syncEachCall, bool tf32);
  /// Frees every thread's stream, handles and buffers (statuses ignored).
  ~Workers();
  Workers(const Workers &) = delete;
  Workers &operator=(const Workers &) = delete;

  /// The calling thread's CUDA stream, pinned buffer and index verdicts,
  /// created on first use (its GEMM handles at its first GEMM, Exec).
  /// Entries are never erased while the backend lives (std::map
  /// references stay valid).
  ThreadState &state();

  /// Queues `body`'s device work on the calling thread's stream.
  template <typename F> void run(F &&body) {
    ThreadState &st = state();
    Exec e{st.stream, &st, st.pinned, padGemmFlops_, tf32_, leanXent_, norms_};
    // A captured graph's kernels hold pointers into the reserve.
    ScratchCall call(*st.scratch, !st.capturing && graphs_.idle());
    body(e);
    call.finish(); // body's scratch is released
    finishCall();
  }
  /// Runs `body` and waits for its device work (host memory, allocation).
  template <typename F> void runSync(F &&body) {
    refuseHostWaitWhileCapturing(state());
    run(std::forward<F>(body));
    synchronize();
  }
  /// Ends a call whose work is queued on the calling thread's stream.
  void finishCall() {
    if (syncEachCall_)
      synchronize();
  }
  /// Waits for the calling thread's device work and reads its index checks'
  /// verdicts (failing on a bad index).
  void synchronize();
  /// Waits for every thread's device work (before memory they may still
  /// use is freed).
  void synchronizeAll();
  /// Calls f(ThreadState &) for every thread, holding the lock.
  template <typename F> void forEach(F &&f) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto &entry : states_)
      f(entry.second);
  }

  /// Queues an index check on the calling thread's stream. Its verdict is
  /// read where that stream is next synchronised (Stream::synchronize, a
  /// copy to the host such as the loss's, a collective), which then fails
  /// naming `op` and the first bad index: no host wait inside the step.
  void queueCheck(const char *op, IndexKind kind, DType type, const void *ids,
                  int64_t n, const IndexRange &range, int64_t *count);
  /// The count of targets not ignored (a mean divides by it) in scratch on
  /// the call's stream, their range check queued (queueCheck).
  Scratch countedTargets(Exec &e, const char *op, DType targetType,
                         const void *targets, int64_t n, int64_t c,
                         int64_t ignoreIndex);

private:
  /// A graph replays device work only: what the host must wait for cannot
  /// be captured (fails the capture, and the step runs eagerly).
  static void refuseHostWaitWhileCapturing(const ThreadState &st);
  static void readVerdicts(ThreadState &st);

  const int device_;
  StepGraphs &graphs_;
  const bool syncEachCall_;
  const bool tf32_;
  const double padGemmFlops_;
  const bool leanXent_;
  const NormKernels norms_;
  std::mutex mutex_;
  std::map<std::thread::id, ThreadState> states_;
};

/// Copies between device memory and host memory on e's stream: queued
/// where the host memory is pinned, else through the thread's pinned
/// buffer a chunk at a time, each chunk waited for. Called through runSync,
/// which waits for the rest.
void hostToDevice(Exec &e, void *dst, const void *src, int64_t bytes);
void deviceToHost(Exec &e, void *dst, const void *src, int64_t bytes);

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_WORKER_H
