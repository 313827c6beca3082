//===- Passes.h - conversions to the runtime and LLVM ------------*- C++ -*-===//

#ifndef FSDP_CONVERSION_PASSES_H
#define FSDP_CONVERSION_PASSES_H

#include "fsdp/Dialect/RT/IR/RTOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::fsdp {

#define GEN_PASS_DECL
#include "fsdp/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "fsdp/Conversion/Passes.h.inc"

} // namespace mlir::fsdp

#endif // FSDP_CONVERSION_PASSES_H
