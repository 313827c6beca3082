//===- Error.h - Runtime error type -----------------------------*- C++ -*-===//
//
// Inside the runtime, failures are exceptions carrying a C ABI status code and
// a message; the C ABI layer catches them, stores the message for
// fsdprt_last_error() and returns the code. That keeps kernels and bookkeeping
// free of status plumbing while the ABI never lets an exception escape.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_ERROR_H
#define FSDP_RT_ERROR_H

#include "fsdp/rt/fsdprt.h"

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace fsdp {
namespace rt {

enum class Status : int32_t {
  Ok = FSDPRT_OK,
  InvalidArgument = FSDPRT_ERR_INVALID_ARGUMENT,
  InvalidHandle = FSDPRT_ERR_INVALID_HANDLE,
  OutOfMemory = FSDPRT_ERR_OUT_OF_MEMORY,
  OutOfRange = FSDPRT_ERR_OUT_OF_RANGE,
  IO = FSDPRT_ERR_IO,
  Format = FSDPRT_ERR_FORMAT,
  Unsupported = FSDPRT_ERR_UNSUPPORTED,
  Internal = FSDPRT_ERR_INTERNAL,
};

class Error : public std::runtime_error {
public:
  Error(Status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  Status status() const { return status_; }

private:
  Status status_;
};

/// Builds a message from streamable pieces: fail(Status::IO, "open ", path).
template <typename... Args>
[[noreturn]] void fail(Status status, Args &&...pieces) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(pieces));
  throw Error(status, os.str());
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_ERROR_H
