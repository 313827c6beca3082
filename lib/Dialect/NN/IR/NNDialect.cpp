//===- NNDialect.cpp - the nn dialect --------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNDialect.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::nn;

#include "fsdp/Dialect/NN/IR/NNDialect.cpp.inc"
#include "fsdp/Dialect/NN/IR/NNEnums.cpp.inc"
#include "fsdp/Dialect/NN/IR/NNOpInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/NN/IR/NNAttrs.cpp.inc"

void NNDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/NN/IR/NNOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/NN/IR/NNAttrs.cpp.inc"
      >();
}
