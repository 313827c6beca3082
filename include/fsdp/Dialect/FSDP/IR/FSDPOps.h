//===- FSDPOps.h - fsdp dialect attributes, types and operations -*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPOPS_H
#define FSDP_DIALECT_FSDP_IR_FSDPOPS_H

#include "fsdp/Dialect/FSDP/IR/Collectives.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Interfaces/StorageAliasOpInterface.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPTypes.h.inc"

namespace mlir::fsdp {
class ForwardOp;
class NNModuleOp;
} // namespace mlir::fsdp

#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h.inc"

namespace mlir::fsdp {
/// The operand segment sizes of an fsdp.sgd_step (param, grad, momentum
/// buffer, step, skip_if), for building one from an operand list.
NamedAttribute sgdOperandSegments(Builder &b, bool momentum, bool skip);
} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_IR_FSDPOPS_H
