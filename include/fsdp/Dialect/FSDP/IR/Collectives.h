//===- Collectives.h - what a communicating op issues, and where *- C++ -*-===//
//
// The vocabulary of CollectiveOpInterface (FSDPOps.td): the step's streams
// (PyTorch FSDP's compute, all-gather and reduce-scatter streams, and CPU
// offload's copy and host streams), the collective kinds, and one
// collective an op issues. An op says once which collectives it is made of
// (fsdp.reduce_grads on a 2-D mesh: a reduce-scatter over the shard group,
// then an all-reduce over the replicate group) and on which stream; the
// report, the step-time model and the lowering all read that.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_FSDP_IR_COLLECTIVES_H
#define FSDP_DIALECT_FSDP_IR_COLLECTIVES_H

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/IR/BuiltinTypes.h"

namespace mlir::fsdp {

/// All-gathers on their own stream, gradient reductions (and the other
/// reductions) on another, everything else on the compute stream; with CPU
/// offload, host-to-device and device-to-host copies each on their own
/// stream and the optimizer on a host stream. The values are the lowered
/// step's stream arguments, in order (the STREAM rows of the runtime's
/// StepAbi.def; CollectiveOps.cpp checks the order at compile time).
enum class StreamKind {
  Compute = 0,
  AllGather = 1,
  ReduceScatter = 2,
  HostToDevice = 3,
  DeviceToHost = 4,
  Host = 5
};
constexpr int kNumStreams = 0
#define FSDPRT_STEP_STREAM(name, label, placement) +1
#include "fsdp/rt/StepAbi.def"
    ;
/// "compute", "all-gather", ...: the names traces and reports use (the
/// labels of StepAbi.def, which the runner names its streams with).
StringRef streamName(StreamKind stream);

enum class CollectiveKind { AllGather, ReduceScatter, AllReduce, Broadcast };
/// "all_gather", ...: the runtime's entry point and the report's kind.
StringRef collectiveKindName(CollectiveKind kind);

/// One collective an op issues.
struct CollectiveStep {
  CollectiveKind kind;
  MeshGroup group;
  /// Ranks taking part (1: nothing moves).
  int64_t groupSize;
  /// The full tensor's type: the gathered result, the scattered input, the
  /// reduced or broadcast tensor. Its bytes are what a ring moves.
  RankedTensorType dataType;
};

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_IR_COLLECTIVES_H
