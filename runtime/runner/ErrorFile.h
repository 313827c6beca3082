//===- ErrorFile.h - Failures on stderr and for torchrun --------*- C++ -*-===//
//
// torchrun gives each worker a file (TORCHELASTIC_ERROR_FILE) and prints
// what a failed worker wrote there as the "Root Cause" of its summary;
// without it the summary says only the exit code.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_ERRORFILE_H
#define FSDP_DRIVER_ERRORFILE_H

#include <string>

namespace fsdp {
namespace driver {

/// Writes `message` to TORCHELASTIC_ERROR_FILE in the layout torch's
/// elastic error handler writes ({"message": {"message", "extraInfo":
/// {"py_callstack", "timestamp"}}}); nothing when it is unset. Best effort:
/// a failing write is reported on stderr, never thrown.
void recordErrorForTorchrun(const std::string &message);

/// Writes `line` (ending in a newline) to stderr in one write: the ranks
/// and the launcher share stderr, and a message written in pieces would
/// interleave with another process's.
void printLine(const std::string &line);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_ERRORFILE_H
