//===- ScratchReserve.cpp - Per-call scratch, counted once per stream -----===//

#include "ScratchReserve.h"

#include "Device.h"

#include "fsdp/rt/backend/CurrentOperation.h"

#include <algorithm>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// cudaMallocAsync's alignment, which vectorised loads and cuDNN rely on.
constexpr int64_t kAlign = 256;
int64_t aligned(int64_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

thread_local ScratchReserve *active = nullptr;

} // namespace

ScratchReserve::~ScratchReserve() {
  if (base_)
    cudaFreeAsync(base_, stream_); // Cannot throw here; stream-ordered.
}

void ScratchReserve::beginCall(bool movable) {
  movable_ = movable;
  fitLargest();
}

void ScratchReserve::fitLargest() {
  if (movable_ && largest_ > size_)
    fit(largest_);
}

void ScratchReserve::fit(int64_t bytes) {
  // A stream can also join a capture through an event wait: its calls then
  // use the reserve where it is.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  checkCuda(cudaStreamIsCapturing(stream_, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone)
    return;
  if (base_)
    checkCuda(cudaFreeAsync(base_, stream_), "cudaFreeAsync (scratch)");
  base_ = nullptr;
  size_ = 0;
  cudaError_t rc = cudaMallocAsync(&base_, static_cast<size_t>(bytes), stream_);
  if (rc == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    fail(Status::OutOfMemory, "cuda backend: cannot reserve ", bytes,
         " bytes of per-call scratch (op '", currentOperation(), "')");
  }
  checkCuda(rc, "cudaMallocAsync (scratch reserve)");
  size_ = bytes;
}

ScratchPiece ScratchReserve::take(int64_t bytes) {
  ScratchPiece piece;
  piece.bytes = aligned(bytes);
  // Nothing of this call is in the reserve yet: regrow it now rather than
  // hold it beside this call's own allocations.
  if (top_ == 0 && movable_ && piece.bytes > size_)
    fit(std::max(largest_, piece.bytes));
  piece.offset = top_;
  piece.call = call_;
  top_ += piece.bytes;
  extent_ = std::max(extent_, top_);
  if (top_ <= size_) {
    piece.ptr = static_cast<char *>(base_) + piece.offset;
#ifdef FSDPRT_CUDA_EMULATION
    // As a fresh allocation there: a kernel reading scratch it never wrote
    // sees garbage, not the last call's values.
    checkCuda(cudaMemsetAsync(piece.ptr, 0xff, bytes, stream_),
              "cudaMemsetAsync (scratch poison)");
#endif
    return piece;
  }
  piece.owned = true;
  checkCuda(cudaMallocAsync(&piece.ptr, static_cast<size_t>(bytes), stream_),
            "cudaMallocAsync (scratch)");
  return piece;
}

void ScratchReserve::release(const ScratchPiece &piece) {
  if (piece.owned)
    cudaFreeAsync(piece.ptr, stream_); // Cannot throw here; stream-ordered.
  if (piece.call == call_ && piece.offset + piece.bytes == top_)
    top_ = piece.offset;
}

void ScratchReserve::endCall() {
  if (extent_ > largest_) {
    largest_ = extent_;
    largestOp_ = currentOperation();
  }
  top_ = extent_ = 0;
  ++call_;
}

ScratchCall::ScratchCall(ScratchReserve &reserve, bool movable)
    : reserve_(active ? nullptr : &reserve) {
  if (!reserve_)
    return;
  reserve.beginCall(movable);
  active = &reserve;
}

void ScratchCall::finish() {
  ScratchReserve *reserve = reserve_;
  if (!reserve)
    return;
  reserve_ = nullptr;
  active = nullptr;
  reserve->endCall();
  reserve->fitLargest();
}

ScratchCall::~ScratchCall() {
  if (!reserve_)
    return;
  active = nullptr;
  reserve_->endCall();
}

ScratchReserve *activeReserve(cudaStream_t stream) {
  return active && active->stream() == stream ? active : nullptr;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
