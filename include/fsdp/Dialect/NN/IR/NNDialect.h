//===- NNDialect.h - the nn dialect ------------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_NN_IR_NNDIALECT_H
#define FSDP_DIALECT_NN_IR_NNDIALECT_H

#include "mlir/IR/Dialect.h"

#include "fsdp/Dialect/NN/IR/NNDialect.h.inc"

#endif // FSDP_DIALECT_NN_IR_NNDIALECT_H
