//===- CurrentOperation.h - The op a stream worker runs now -----*- C++ -*-===//
//
// Lets a backend's diagnostics (scratch reserves, logs) name the operation
// they serve without reaching into the core's streams.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_BACKEND_CURRENTOPERATION_H
#define FSDP_RT_BACKEND_CURRENTOPERATION_H

#include <string>

namespace fsdp {
namespace rt {

/// The name of the operation the calling stream worker runs now ("" on
/// any other thread).
const std::string &currentOperation();

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_BACKEND_CURRENTOPERATION_H
