//===- CpuBackend.h - The CPU backend ---------------------------*- C++ -*-===//
#ifndef FSDP_RT_CPU_CPUBACKEND_H
#define FSDP_RT_CPU_CPUBACKEND_H

#include "fsdp/rt/backend/Backend.h"

#include <memory>

namespace fsdp {
namespace rt {
namespace cpu {

/// numThreads <= 0 means std::thread::hardware_concurrency().
std::unique_ptr<Backend> createCpuBackend(int numThreads);

} // namespace cpu
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_CPU_CPUBACKEND_H
