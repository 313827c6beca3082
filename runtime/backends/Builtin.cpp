//===- Builtin.cpp - The backends and communicators built in ---------------===//
//
// Adding a backend: its folder under backends/ (or comm/) with a CMake file
// that defines FSDPRT_HAVE_<NAME> on fsdp_runtime, and one line here.
//
//===----------------------------------------------------------------------===//
#include "backends/Builtin.h"

#if FSDPRT_HAVE_CPU_BACKEND
#include "backends/cpu/CpuBackend.h"
#endif
#if FSDPRT_HAVE_CUDA
#include "backends/cuda/CudaBackend.h"
#endif

namespace fsdp {
namespace rt {

void registerBuiltinBackends(std::map<std::string, BackendFactory> &factories) {
#if FSDPRT_HAVE_CPU_BACKEND
  factories["cpu"] = cpu::createCpuBackend;
#endif
#if FSDPRT_HAVE_CUDA
  factories["cuda"] = cuda::createCudaBackend;
#endif
}

void registerBuiltinCommunicators(
    std::map<std::string, CommFactory> &factories) {
#if FSDPRT_HAVE_GLOO
  factories["gloo"] = comm::createGlooCommunicator;
#endif
#if FSDPRT_HAVE_NCCL
  factories["nccl"] = comm::createNcclCommunicator;
#endif
}

} // namespace rt
} // namespace fsdp
