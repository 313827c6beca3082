//===- StepTime.h - predicted step time of a scheduled step -----*- C++ -*-===//
//
// A first-order cost model, so that fsdp-report can say before launch how
// long a step takes and how much communication the schedule hides: GEMMs
// (linear, matmul, attention) cost FLOPs at a sustained rate, every other
// kernel its bytes at a memory bandwidth, collectives the ring algorithm's
// bytes at a link bandwidth plus a latency per ring step, and every op a
// fixed overhead. The step is simulated on the lowering's streams in
// program order: an op starts when its stream is free and its operands are
// ready, so prefetching and overlap show up as they will run.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STEPTIME_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STEPTIME_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace mlir::fsdp {

/// What one rank's machine sustains. The defaults are 2 ranks sharing the
/// 2-vCPU CI machine with Gloo over loopback, as bench/step_time_model.py
/// measured them (the "ci-cpu" machine of namedMachineProfile).
struct MachineProfile {
  double gemmGflops = 36.0;     // sustained GEMM rate, GFLOP/s
  /// GEMMs of 16-bit operands (bf16, f16; tensor cores on a GPU), GFLOP/s;
  /// 0: at gemmGflops (the CPU backend widens them to f32).
  double gemmGflops16 = 0.0;
  double memoryGBps = 4.5;      // elementwise kernels, GB/s
  double linkGBps = 0.16;       // collective bus bandwidth per rank, GB/s
  double linkLatencyUs = 30.0;  // per ring step, µs
  double opOverheadUs = 30.0;   // per kernel or collective call, µs
  /// CPU offload's copies between host and device memory (PCIe on a GPU),
  /// GB/s; 0: at memoryGBps (the CPU backend's copies are memcpys).
  double hostLinkGBps = 0.0;
  /// Device memory beside the arena that each stream running GEMMs holds
  /// for cuBLAS / cuBLASLt (the CUDA backend's 32 MiB); 0: none (CPU).
  int64_t gemmWorkspaceBytes = 0;

  std::string describe() const;
};

/// The machine fsdp-report and the lowering know as `name` ("ci-cpu",
/// "h100"); for another name an error at `loc` from `pass` naming the
/// known ones.
FailureOr<MachineProfile> namedMachineProfile(llvm::StringRef name,
                                              Location loc,
                                              llvm::StringRef pass);

struct StepTime {
  double total = 0;         // predicted step time, seconds
  double compute = 0;       // busy time of the compute stream
  double communication = 0; // busy time of the two communication streams
  /// The part of the step the compute stream spends waiting for
  /// communication: total - compute.
  double exposed() const { return total - compute; }
};

StepTime predictStepTime(func::FuncOp step, const MachineProfile &profile);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STEPTIME_H
