//===- LrScheduleCheck.cpp - The runtime's check of a schedule ------------===//
//
// Its own file: the runtime header declares namespace ::fsdp, which a file
// with `using namespace mlir` cannot tell from mlir::fsdp.
//
//===----------------------------------------------------------------------===//
#include "ProgramDescription.h"

#include "fsdp/rt/LrSchedule.h"

std::string mlir::fsdp::LrScheduleOptions::invalidBecause() const {
  return ::fsdp::rt::LrSchedule{kind, warmupSteps, decaySteps, minLrRatio}
      .invalidBecause();
}
