//===- ProgramDescription.h - what fsdp-run needs to know -------*- C++ -*-===//

#ifndef FSDP_LIB_CONVERSION_FSDPTORT_PROGRAMDESCRIPTION_H
#define FSDP_LIB_CONVERSION_FSDPTORT_PROGRAMDESCRIPTION_H

#include "StepLowering.h"

#include <string>

namespace mlir::fsdp {

/// The learning-rate schedule fsdp-run applies (convert-fsdp-to-rt's
/// options), recorded in the description.
struct LrScheduleOptions {
  std::string kind = "constant";
  int64_t warmupSteps = 0, decaySteps = 0;
  double minLrRatio = 0.0;
  /// Why the runner would refuse it ("" if it would not): the runtime's own
  /// check (fsdp/rt/LrSchedule.h), so the ranges are written once.
  std::string invalidBecause() const;
};

/// The `fsdp.program` JSON (runtime/runner/Program.h documents its fields):
/// units with their parameters' names, shapes, flat offsets and
/// initializers; persistent offsets of shards, optimizer state, inputs and
/// the loss; the mesh; the plan's size and the report.
FailureOr<std::string> describeProgram(ModelOp model, func::FuncOp step,
                                       const StepLayout &layout,
                                       StringRef report,
                                       const LrScheduleOptions &schedule);

} // namespace mlir::fsdp

#endif
