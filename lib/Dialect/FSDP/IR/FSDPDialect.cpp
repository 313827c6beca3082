//===- FSDPDialect.cpp - the fsdp dialect ----------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::fsdp;

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPTypes.cpp.inc"

void FSDPDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
      >();
  registerAttributes();
  addTypes<
#define GET_TYPEDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPTypes.cpp.inc"
      >();
}

int64_t fsdp::elementBytes(Type elementType) {
  return llvm::divideCeil(elementType.getIntOrFloatBitWidth(), 8);
}

int64_t fsdp::tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? tensor.getNumElements() *
                      elementBytes(tensor.getElementType())
                : 0;
}
