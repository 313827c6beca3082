//===- NNOps.h - nn dialect operations ---------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_NN_IR_NNOPS_H
#define FSDP_DIALECT_NN_IR_NNOPS_H

#include "fsdp/Dialect/NN/IR/NNDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"

#include <cmath> // INFINITY in nn.clamp's bounds
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "fsdp/Interfaces/DifferentiableOpInterface.h"
#include "fsdp/Interfaces/StorageAliasOpInterface.h"

#include "fsdp/Dialect/NN/IR/NNEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/NN/IR/NNAttrs.h.inc"

#include "fsdp/Dialect/NN/IR/NNOpInterfaces.h.inc"

#define GET_OP_CLASSES
#include "fsdp/Dialect/NN/IR/NNOps.h.inc"

#endif // FSDP_DIALECT_NN_IR_NNOPS_H
