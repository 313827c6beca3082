//===- JitProgram.h - a lowered train step, parsed and JIT-compiled -*- C++ -*-===//

#ifndef FSDP_TOOLS_FSDP_RUN_JITPROGRAM_H
#define FSDP_TOOLS_FSDP_RUN_JITPROGRAM_H

#include "runner/StepProgram.h"

#include <memory>
#include <string>

namespace fsdp {

/// The module fsdp-opt lowered (`--fsdp-pipeline="... lower=true"`): its
/// program description and, once compiled, the step function.
class JitProgram : public driver::StepProgram {
public:
  ~JitProgram() override;
  /// Parses `path` and checks that it was lowered; prints MLIR diagnostics
  /// and returns null on failure.
  static std::unique_ptr<JitProgram> load(const std::string &path);

  const driver::Program &program() const override { return program_; }
  /// JIT-compiles the module (once); throws std::runtime_error on failure.
  driver::StepFn step() override;

private:
  JitProgram();
  struct State;
  std::unique_ptr<State> state_;
  driver::Program program_;
};

} // namespace fsdp

#endif
