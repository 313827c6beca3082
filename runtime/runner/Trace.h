//===- Trace.h - Merging the ranks' Chrome traces ---------------*- C++ -*-===//
//
// Each rank writes its own trace (fsdprt_trace_write, pid = rank); fsdp-run
// merges them into one file that chrome://tracing and ui.perfetto.dev open
// with one process per rank and one thread per stream.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_TRACE_H
#define FSDP_DRIVER_TRACE_H

#include <string>
#include <vector>

namespace fsdp {
namespace driver {

/// Concatenates the traceEvents of `inputs` (Chrome trace JSON objects, or
/// bare event arrays) into `output`, replaced atomically (temporary file,
/// rename). When every input carries otherData.clock_origin_unix_us (as
/// fsdprt_trace_write writes), each input's events are shifted so that all
/// ranks share the earliest origin: each rank's clock starts at its own
/// context's creation. Throws std::runtime_error naming the file for an
/// unreadable or malformed input or an unwritable output; nothing is
/// written then.
void mergeChromeTraces(const std::vector<std::string> &inputs,
                       const std::string &output);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_TRACE_H
