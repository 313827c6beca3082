//===- Backends.h - Communicator backends built into the runtime -*- C++
//-*-===//
#ifndef FSDP_RT_COMM_BACKENDS_H
#define FSDP_RT_COMM_BACKENDS_H

#include "fsdp/rt/Comm.h"

#include <map>
#include <string>

namespace fsdp {
namespace rt {
namespace comm {

std::unique_ptr<Communicator> createGlooCommunicator(const CommSetup &setup);
std::unique_ptr<Communicator> createNcclCommunicator(const CommSetup &setup);

/// "gloo" and "nccl" when the runtime was built with them.
void registerBuiltinCommBackends(std::map<std::string, CommFactory> &factories);

} // namespace comm
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMM_BACKENDS_H
