//===- DifferentiableOpInterface.td - reverse-mode autodiff --*- tablegen -*-===//
//
// The contract between an op and the reverse-mode autodiff of
// `fsdp-build-train-step`: given the cotangents of an op's results, the op
// builds the cotangents of its operands out of ordinary ops.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_INTERFACES_DIFFERENTIABLEOPINTERFACE_TD
#define FSDP_INTERFACES_DIFFERENTIABLEOPINTERFACE_TD

include "mlir/IR/OpBase.td"

def DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let cppNamespace = "::mlir::fsdp";
  let description = [{
    An op whose vector-Jacobian product (VJP) can be expressed with other ops.
    Reverse-mode autodiff visits ops in reverse order, sums the cotangents of
    each result over all its uses, and asks the op for the cotangents of its
    operands. Integer operands (indices, targets) have no cotangent.
  }];

  let methods = [
    InterfaceMethod<[{
        Whether operand `index` can receive a cotangent (false for integer
        inputs such as token ids or class targets).
      }],
      "bool", "isDifferentiableOperand", (ins "unsigned":$index),
      /*methodBody=*/"",
      /*defaultImplementation=*/[{
        return ::mlir::isa<::mlir::FloatType>(
            ::mlir::getElementTypeOrSelf($_op->getOperand(index).getType()));
      }]>,
    InterfaceMethod<[{
        Builds, at the builder's insertion point, the cotangent of every
        operand given the cotangents of the results (a null value stands for a
        result that does not influence the loss). Returns one value per
        operand, null for an operand without a cotangent.
      }],
      "::mlir::FailureOr<::llvm::SmallVector<::mlir::Value>>", "buildVJP",
      (ins "::mlir::OpBuilder &":$builder,
           "::mlir::ValueRange":$resultCotangents)>,
  ];
}

#endif // FSDP_INTERFACES_DIFFERENTIABLEOPINTERFACE_TD
