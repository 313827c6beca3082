//===- StepLibrary.h - A step library made by fsdp-compile ------*- C++ -*-===//
//
// dlopens a shared object from fsdp-compile, checks its ABI stamp against
// this runtime's (fsdp/rt/StepAbi.h), parses its program description and
// resolves the step. The library's fsdprt_* references bind to the runtime
// already loaded in the process.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_STEPLIBRARY_H
#define FSDP_DRIVER_STEPLIBRARY_H

#include "runner/StepProgram.h"

namespace fsdp {
namespace driver {

/// Whether `path` names a step library (by its extension, .so).
bool isStepLibraryPath(const std::string &path);

/// Throws std::runtime_error naming the file and, for a stamp mismatch,
/// both versions.
std::unique_ptr<StepProgram> loadStepLibrary(const std::string &path);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_STEPLIBRARY_H
