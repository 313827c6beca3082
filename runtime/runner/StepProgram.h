//===- StepProgram.h - A training step ready to run -------------*- C++ -*-===//
//
// What a runner needs of a compiled step: its program description and the
// function. fsdp-run gets both from a lowered module it JIT-compiles;
// fsdprt-run (and fsdp-run) from a step library made by fsdp-compile.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_STEPPROGRAM_H
#define FSDP_DRIVER_STEPPROGRAM_H

#include "runner/Program.h"

#include <functional>
#include <memory>
#include <string>

namespace fsdp {
namespace driver {

class StepProgram {
public:
  virtual ~StepProgram() = default;
  virtual const Program &program() const = 0;
  /// The step function, compiled on first use where that is needed; throws
  /// std::runtime_error when it cannot be had.
  virtual StepFn step() = 0;
};

/// Opens a program for a runner: returns null after printing why it cannot
/// (diagnostics), or throws std::runtime_error with the reason.
using StepProgramLoader =
    std::function<std::unique_ptr<StepProgram>(const std::string &path)>;

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_STEPPROGRAM_H
