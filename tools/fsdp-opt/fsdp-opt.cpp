//===- fsdp-opt.cpp - the fsdp-mlir optimizer driver -----------------------===//
//
// mlir-opt with our dialects and passes, plus only the upstream dialects and
// passes the pipeline uses. Every mlir-opt flag works the same way.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::nn::NNDialect, mlir::fsdp::FSDPDialect,
                  mlir::func::FuncDialect, mlir::arith::ArithDialect>();
  mlir::func::registerInlinerExtension(registry);

  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerInlinerPass();
  mlir::registerSymbolDCEPass();
  mlir::fsdp::registerFSDPPasses();

  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "fsdp-mlir optimizer driver\n", registry));
}
