//===- DifferentiableOpInterface.h - reverse-mode autodiff ------*- C++ -*-===//

#ifndef FSDP_INTERFACES_DIFFERENTIABLEOPINTERFACE_H
#define FSDP_INTERFACES_DIFFERENTIABLEOPINTERFACE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallVector.h"

#include "fsdp/Interfaces/DifferentiableOpInterface.h.inc"

#endif // FSDP_INTERFACES_DIFFERENTIABLEOPINTERFACE_H
