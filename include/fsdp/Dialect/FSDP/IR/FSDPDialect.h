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

namespace mlir::fsdp {

/// Bytes of one element (sub-byte types take a whole byte), and of a ranked
/// tensor (0 for any other type): how every analysis and the lowering count
/// memory and traffic.
int64_t elementBytes(Type elementType);
int64_t tensorBytes(Type type);
inline int64_t tensorBytes(Value value) { return tensorBytes(value.getType()); }

} // namespace mlir::fsdp

#endif // FSDP_DIALECT_FSDP_IR_FSDPDIALECT_H
