//===- CApiTrace.cpp - C ABI: stream names, tracing, wait times -----------===//
//
// The workers of a context's streams record what they run (TraceLog); these
// entry points switch that on, name the streams, write the Chrome trace and
// report how long a stream sat blocked on other streams' events. Streams are
// host worker threads on every backend (the CUDA backend synchronises its
// device work inside each call), so the same code serves all of them.
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

extern "C" {

int32_t fsdprt_stream_set_name(int64_t ctx, int64_t stream, const char *name) {
  return guarded(__func__, [&] {
    requireOut(name, "name");
    if (!*name)
      fail(Status::InvalidArgument, "name must not be empty");
    getContext(ctx)->stream(stream)->setName(name);
  });
}

int32_t fsdprt_trace_enable(int64_t ctx, int32_t enabled) {
  return guarded(__func__,
                 [&] { getContext(ctx)->trace().setEnabled(enabled != 0); });
}

int32_t fsdprt_trace_write(int64_t ctx, const char *path, int32_t pid) {
  return guarded(__func__, [&] {
    requireOut(path, "path");
    if (!*path)
      fail(Status::InvalidArgument, "path must not be empty");
    if (pid < 0)
      fail(Status::InvalidArgument, "pid must be non-negative, got ", pid);
    getContext(ctx)->trace().writeChromeTrace(path, pid);
  });
}

int32_t fsdprt_stream_wait_seconds(int64_t ctx, int64_t stream, double *out) {
  return guarded(__func__, [&] {
    requireOut(out, "out");
    *out = getContext(ctx)->stream(stream)->waitSeconds();
  });
}

} // extern "C"
