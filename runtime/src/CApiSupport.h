//===- CApiSupport.h - Shared plumbing of the C ABI -------------*- C++ -*-===//
//
// Every fsdprt_* function body runs inside guarded(): exceptions become a
// status code plus a thread-local message prefixed with the function name.
// Kernel entry points validate everything they can on the calling thread
// (handles, dims, extents) and only then enqueue work on the stream.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_SRC_CAPISUPPORT_H
#define FSDP_RT_SRC_CAPISUPPORT_H

#include "Context.h"
#include "fsdp/rt/Error.h"
#include "fsdp/rt/backend/Shape.h"

#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>

namespace fsdp {
namespace rt {
namespace capi {

void setLastError(const std::string &message);

template <typename F> int32_t guarded(const char *function, F &&body) {
  try {
    body();
    return FSDPRT_OK;
  } catch (const Error &e) {
    setLastError(std::string(function) + ": " + e.what());
    return static_cast<int32_t>(e.status());
  } catch (const std::bad_alloc &) {
    setLastError(std::string(function) + ": host allocation failed");
    return FSDPRT_ERR_OUT_OF_MEMORY;
  } catch (const std::exception &e) {
    setLastError(std::string(function) + ": internal error: " + e.what());
    return FSDPRT_ERR_INTERNAL;
  }
}

std::shared_ptr<Context> getContext(int64_t handle);

inline void requireOut(const void *ptr, const char *what) {
  if (!ptr)
    fail(Status::InvalidArgument, what, " must not be null");
}

/// Throws unless v >= 0; returns v.
int64_t nonNegative(int64_t v, const char *what);
/// a * b with overflow check.
int64_t mul(int64_t a, int64_t b);
/// Throws unless v > 0.
void requirePositive(int64_t v, const char *what);
/// The dtype of an index operand (I32 or I64).
DType indexDType(int32_t code, const char *what);
/// `dim` (negative counts from the end) as an index into a shape of `rank`.
int32_t normalizeDim(int64_t dim, size_t rank, const char *what);

/// outer, size, inner of a shape around `dim`.
struct Around {
  int64_t outer = 1, size, inner = 1;
  Around(const Shape &s, int32_t dim) : size(s[dim]) {
    for (int32_t i = 0; i < dim; ++i)
      outer *= s[i];
    for (size_t i = dim + 1; i < s.size(); ++i)
      inner *= s[i];
  }
};

/// A kernel launch being prepared: resolves operands against the context,
/// then enqueues a closure on the stream.
class Launch {
public:
  /// `op` names the operation in stream error messages ("linear_forward").
  Launch(int64_t ctx, int64_t stream, int32_t dtype, const char *op);
  Launch(int64_t ctx, int64_t stream, const char *op);

  DType dtype() const { return dtype_; }
  Context &context() { return *ctx_; }
  /// The context's backend, or on a host stream the host's.
  Backend &backend() { return host_ ? ctx_->hostBackend() : ctx_->backend(); }

  /// Operand of numel elements of `dt` (default: the launch dtype).
  void *operand(int64_t buf, int64_t off, int64_t numel, const char *what);
  void *operand(int64_t buf, int64_t off, int64_t numel, DType dt,
                const char *what);
  /// buf == 0 means absent: returns nullptr.
  void *optional(int64_t buf, int64_t off, int64_t numel, const char *what);

  void enqueue(std::function<void()> work);

  /// While the context captures a step graph: the device copy of a
  /// per-step value that each launch sets to value(its StepValues), for
  /// the kernel to read instead of the value passed now; null otherwise.
  template <typename T, typename F> const T *live(F value) {
    return static_cast<const T *>(ctx_->liveValue(
        sizeof(T), [value](const StepValues &v, void *out) {
          T t = value(v);
          std::memcpy(out, &t, sizeof(T));
        }));
  }

private:
  std::shared_ptr<Context> ctx_;
  std::shared_ptr<Stream> stream_;
  bool host_ = false; // a host stream: operands must be host memory
  DType dtype_ = DType::F32;
  const char *op_;
};

} // namespace capi
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_SRC_CAPISUPPORT_H
