//===- StorageAliasOpInterface.h - reused storage ---------------*- C++ -*-===//
//
// Which result of an op reuses which operand's storage (the .td says why).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_INTERFACES_STORAGEALIASOPINTERFACE_H
#define FSDP_INTERFACES_STORAGEALIASOPINTERFACE_H

#include "mlir/IR/OpDefinition.h"

#include "fsdp/Interfaces/StorageAliasOpInterface.h.inc"

#endif // FSDP_INTERFACES_STORAGEALIASOPINTERFACE_H
