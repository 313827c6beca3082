# MLIR's and LLVM's headers, precompiled once and shared by the compiler's
# libraries, tools and unit tests (FSDP_PRECOMPILED_HEADERS, on by default).
# Parsing them is most of a compiler source file's compile time: 8.2 of
# Prefetch.cpp's 11.5 s under clang -ftime-trace. Only headers from outside
# this repository go in, so that editing one of ours rebuilds only the files
# that include it.
option(FSDP_PRECOMPILED_HEADERS
       "Precompile the MLIR and LLVM headers the compiler includes" ON)

set(FSDP_PRECOMPILED_MLIR_HEADERS
  <llvm/ADT/DenseMap.h>
  <llvm/ADT/MapVector.h>
  <llvm/ADT/STLExtras.h>
  <llvm/ADT/SetVector.h>
  <llvm/ADT/SmallVector.h>
  <llvm/ADT/StringMap.h>
  <llvm/ADT/StringSet.h>
  <llvm/ADT/TypeSwitch.h>
  <llvm/Support/FormatVariadic.h>
  <llvm/Support/raw_ostream.h>
  <mlir/Bytecode/BytecodeOpInterface.h>
  <mlir/Dialect/Arith/IR/Arith.h>
  <mlir/Dialect/Func/IR/FuncOps.h>
  <mlir/IR/Builders.h>
  <mlir/IR/BuiltinAttributes.h>
  <mlir/IR/BuiltinOps.h>
  <mlir/IR/BuiltinTypes.h>
  <mlir/IR/Diagnostics.h>
  <mlir/IR/DialectImplementation.h>
  <mlir/IR/IRMapping.h>
  <mlir/IR/MLIRContext.h>
  <mlir/IR/OpDefinition.h>
  <mlir/IR/OpImplementation.h>
  <mlir/IR/PatternMatch.h>
  <mlir/Interfaces/InferTypeOpInterface.h>
  <mlir/Interfaces/SideEffectInterfaces.h>
  <mlir/Pass/Pass.h>
  <mlir/Pass/PassManager.h>
)

# The header's one compilation, with the flags every LLVM-style target here
# gets (llvm_update_compile_flags: no exceptions): a target whose
# flags differ (fsdp-run and fsdp-compile have exceptions on) cannot reuse it.
if(FSDP_PRECOMPILED_HEADERS)
  add_library(FSDPPrecompiledMLIRHeaders OBJECT
              ${CMAKE_CURRENT_LIST_DIR}/PrecompiledHeaders.cpp)
  llvm_update_compile_flags(FSDPPrecompiledMLIRHeaders)
  target_precompile_headers(FSDPPrecompiledMLIRHeaders PRIVATE
                            ${FSDP_PRECOMPILED_MLIR_HEADERS})
endif()

# fsdp_use_precompiled_mlir_headers(target...): each target (a name given to
# add_mlir_library means its object library) compiles with the header.
function(fsdp_use_precompiled_mlir_headers)
  if(NOT FSDP_PRECOMPILED_HEADERS)
    return()
  endif()
  foreach(name ${ARGN})
    set(target ${name})
    if(TARGET obj.${name})
      set(target obj.${name})
    endif()
    target_precompile_headers(${target} REUSE_FROM FSDPPrecompiledMLIRHeaders)
  endforeach()
endfunction()
