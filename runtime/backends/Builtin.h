//===- Builtin.h - The backends and communicators built in ------*- C++ -*-===//
//
// The one place that knows which compute backends and communicators this
// library was built with (IREE's drivers/init.c): the core's registries
// start from these lists; others (the tests' emulations) call
// registerBackend / registerCommBackend. Each backend names its own
// communicator (Backend::communicator()).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_BACKENDS_BUILTIN_H
#define FSDP_RT_BACKENDS_BUILTIN_H

#include "fsdp/rt/Comm.h"
#include "fsdp/rt/backend/Backend.h"

#include <map>
#include <string>

namespace fsdp {
namespace rt {

/// "cpu" and "cuda" when the runtime was built with them.
void registerBuiltinBackends(std::map<std::string, BackendFactory> &factories);

/// "gloo" and "nccl" when the runtime was built with them.
void registerBuiltinCommunicators(
    std::map<std::string, CommFactory> &factories);

namespace comm {
std::unique_ptr<Communicator> createGlooCommunicator(const CommSetup &setup);
std::unique_ptr<Communicator> createNcclCommunicator(const CommSetup &setup);
} // namespace comm

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_BACKENDS_BUILTIN_H
