//===- RTOps.h - the rt dialect, its types and operations -------*- C++ -*-===//

#ifndef FSDP_DIALECT_RT_IR_RTOPS_H
#define FSDP_DIALECT_RT_IR_RTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "fsdp/Dialect/RT/IR/RTDialect.h.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/RT/IR/RTTypes.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/RT/IR/RTOps.h.inc"

namespace mlir::rt {

/// Kind of one parameter of a runtime entry point (RTEntryPoints.def).
enum class ParamKind {
  Ctx,
  Stream,
  Event,
  Comm,
  Buf,
  I32,
  I64,
  F64,
  Array,
  String
};

/// The parameters of fsdprt_<name>, or null if rt.call may not name it.
const llvm::SmallVector<ParamKind> *lookupEntryPoint(llvm::StringRef name);

/// The lowered step's arguments, in order (StepAbi.def; fsdprt_step_fn).
enum class StepArg : unsigned {
#define FSDPRT_STEP_ARG(name, kind) name,
#include "fsdp/rt/StepAbi.def"
};
constexpr unsigned kNumStepArgs = 0
#define FSDPRT_STEP_ARG(name, kind) +1
#include "fsdp/rt/StepAbi.def"
    ;
/// The argument names (the lowered function's rt.name attributes).
llvm::ArrayRef<llvm::StringLiteral> stepArgNames();
/// The argument types: !rt.context, !rt.buffer, !rt.stream, !rt.comm, i64.
llvm::SmallVector<Type> stepArgTypes(MLIRContext *context);

} // namespace mlir::rt

#endif // FSDP_DIALECT_RT_IR_RTOPS_H
