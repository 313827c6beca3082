//===- Backends.cpp - The one place that knows which backends exist -------===//
#include "Backends.h"

namespace fsdp {
namespace rt {
namespace comm {

void registerBuiltinCommBackends(
    std::map<std::string, CommFactory> &factories) {
#if FSDPRT_HAVE_GLOO
  factories["gloo"] = createGlooCommunicator;
#endif
#if FSDPRT_HAVE_NCCL
  factories["nccl"] = createNcclCommunicator;
#endif
}

} // namespace comm
} // namespace rt
} // namespace fsdp
