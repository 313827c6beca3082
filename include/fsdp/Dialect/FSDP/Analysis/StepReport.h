//===- StepReport.h - per-rank peak memory and collectives ------*- C++ -*-===//
//
// What a sharded, scheduled train step costs each rank, before launch: the
// peak of its live tensors (the liveness walk of StorageLiveness.h over the
// step's single block, aliases followed, a gathered unit live from its
// all-gather's issue to its reshard) with a breakdown by kind, every
// collective in issue order, and the predicted step time (StepTime.h).
// fsdp-report prints it; the lowering puts it, led by the arena plan, in the
// program description.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_FSDP_ANALYSIS_STEPREPORT_H
#define FSDP_DIALECT_FSDP_ANALYSIS_STEPREPORT_H

#include "fsdp/Dialect/FSDP/Analysis/StepTime.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <string>
#include <vector>

namespace mlir::fsdp {

/// What a live value is, for the peak's breakdown.
enum class MemoryCategory {
  ShardedParams,
  OptimizerState,
  Gradients,
  UnshardedParams,
  Activations,
  Transient,
  InputsAndBuffers
};
constexpr size_t kMemoryCategories = 7;

struct CollectiveRecord {
  std::string kind, unit, phase, stream;
  Type dtype;
  int64_t elements;
  int64_t bytes;
  /// A backward gather over a post-forward group: its ranks (else 0).
  int64_t postForwardGroup = 0;
};

struct StepReport {
  int64_t peakBytes = 0;
  /// Index of the op at the peak in the step's block; -1: the entry.
  int64_t peakIndex = -1;
  Operation *peakOp = nullptr;
  std::array<int64_t, kMemoryCategories> breakdown{};
  /// CPU offload: what lives in host memory for the whole step (not in
  /// the peak, which is device memory), by kind.
  int64_t hostBytes = 0;
  std::array<int64_t, kMemoryCategories> hostBreakdown{};
  std::vector<CollectiveRecord> collectives;
  MachineProfile profile;
  StepTime time;
};

/// A lowered program's arena plan, which leads the report of a lowered step.
struct ArenaPlanSummary {
  int64_t arenaBytes;
  int64_t persistentBytes;
  int64_t livePeakBytes;
  int64_t hostBytes; // the host buffer (CPU offload), 0 without
};

/// Fails (with a diagnostic) on a collective nested in a region.
FailureOr<StepReport> analyzeStep(func::FuncOp step,
                                  const MachineProfile &profile);
void printStepReport(raw_ostream &os, ModelOp model, func::FuncOp step,
                     const StepReport &report,
                     const ArenaPlanSummary *plan = nullptr);
llvm::json::Object stepReportToJson(ModelOp model, func::FuncOp step,
                                    const StepReport &report);

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_ANALYSIS_STEPREPORT_H
