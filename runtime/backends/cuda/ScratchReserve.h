//===- ScratchReserve.h - Per-call scratch, a reserve a stream -*- C++ -*-===//
//
// The device scratch a backend call needs beside its operands (f32 staging
// of 16-bit operands, cuDNN's workspace, padded GEMM operands, partial sums)
// comes from one reserve per stream instead of a cudaMallocAsync per call:
// like the GEMM workspace, it is counted once, so the device's high-water
// mark is the arena + the workspaces + the reserves, the same every step,
// and a captured step graph holds no memory nodes.
//
// Within a call, pieces are laid out as a stack (a piece freed on top is
// reused); the call's pieces are free again when it ends, since every use
// of a piece is a kernel on the call's own stream, before the next call's
// in stream order. A piece beyond the reserve is allocated on its own
// (stream-ordered, as before) and the call's extent is remembered; at its
// end the call regrows the reserve to that extent with a stream-ordered
// free and allocation, unless the reserve may not move then (the stream
// capturing, a step graph holding pointers into it: the next call that may
// move it does). A call whose first piece is larger than the reserve
// regrows it at once, so as not to hold the old one beside its own pieces.
// After the first eager step, every call fits.
//
// A launched step graph's kernels use the reserves of the streams they were
// captured on: nothing else is issued on those streams until the launch has
// completed (fsdprt_graph_launch's contract, as for the arena's buffers).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_CUDA_SCRATCHRESERVE_H
#define FSDP_RT_CUDA_SCRATCHRESERVE_H

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

namespace fsdp {
namespace rt {
namespace cuda {

/// A piece of a call's scratch (Device.h's Scratch holds one).
struct ScratchPiece {
  void *ptr = nullptr;
  int64_t offset = 0, bytes = 0; // in the call's stack layout
  uint64_t call = 0;             // the call it belongs to
  bool owned = false;            // beyond the reserve: allocated on its own
};

class ScratchReserve {
public:
  explicit ScratchReserve(cudaStream_t stream) : stream_(stream) {}
  /// Queues the reserve's free on its stream (teardown).
  ~ScratchReserve();
  ScratchReserve(const ScratchReserve &) = delete;
  ScratchReserve &operator=(const ScratchReserve &) = delete;

  /// Starts a call; `movable`: the reserve may regrow (the stream is not
  /// capturing and no step graph uses it), to the largest extent seen.
  void beginCall(bool movable);
  /// Regrows the reserve to the largest extent seen if it may move.
  void fitLargest();
  /// The next `bytes` of the current call's scratch.
  ScratchPiece take(int64_t bytes);
  /// Gives a piece back (reused if it is on top of the call's stack).
  void release(const ScratchPiece &piece);
  /// The call is over: all its pieces are free again.
  void endCall();

  cudaStream_t stream() const { return stream_; }
  int64_t bytes() const { return size_; }
  /// The largest call's extent and the operation it belonged to.
  int64_t largestCall() const { return largest_; }
  const std::string &largestOp() const { return largestOp_; }

private:
  void fit(int64_t bytes);

  cudaStream_t stream_;
  void *base_ = nullptr;
  int64_t size_ = 0;
  bool movable_ = false;
  int64_t top_ = 0, extent_ = 0; // the current call's stack
  uint64_t call_ = 1;
  int64_t largest_ = 0;
  std::string largestOp_;
};

/// Makes Scratch take its pieces from `reserve` on this thread while the
/// outermost ScratchCall lives (a backend call); `movable`: the reserve may
/// regrow (the stream is not capturing and no step graph uses it).
class ScratchCall {
public:
  ScratchCall(ScratchReserve &reserve, bool movable);
  /// Ends the call once its scratch is released, regrowing the reserve to
  /// the call's extent where it did not fit (throws where that fails).
  void finish();
  /// Ends the call if finish() did not (an exception), without regrowing.
  ~ScratchCall();
  ScratchCall(const ScratchCall &) = delete;
  ScratchCall &operator=(const ScratchCall &) = delete;

private:
  ScratchReserve *reserve_; // null: not the outermost call, or finished
};

/// The reserve of the backend call running on this thread, if it serves
/// `stream`; null otherwise (the scratch is allocated on its own).
ScratchReserve *activeReserve(cudaStream_t stream);

} // namespace cuda
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CUDA_SCRATCHRESERVE_H
