//===- FSDPDialect.h - the fsdp dialect --------------------------*- C++ -*-===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
#define FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

// Before the dialect: the helpers of its discardable attributes (the train
// step contract) are typed with these attributes.
#include "fsdp/Dialect/FSDP/IR/FSDPEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h.inc"

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h.inc"

#endif // FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
