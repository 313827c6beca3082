//===- NNBase.td - the nn dialect, its enums and type constraints -*- tablegen -*-===//

#ifndef FSDP_DIALECT_NN_IR_NNBASE_TD
#define FSDP_DIALECT_NN_IR_NNBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::mlir::nn";
  let summary = "Neural-network compute on statically shaped tensors";
  let description = [{
    The compute vocabulary of a training step: one op per kernel of the
    runtime, each with PyTorch's semantics (`nn.linear` is `F.linear`,
    `nn.cross_entropy` is `F.cross_entropy`, ...). Tensors are ranked and
    statically shaped; data is f32, bf16 or f16, indices i32 or i64. Every op
    verifies shapes and element types and infers its result types, so passes
    can build ops without spelling result types.
  }];
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def NN_Reduction : I32EnumAttr<"Reduction", "how a loss reduces over elements",
    [I32EnumAttrCase<"mean", 0>, I32EnumAttrCase<"sum", 1>]> {
  let cppNamespace = "::mlir::nn";
  let genSpecializedAttr = 0;
}
def NN_ReductionAttr : EnumAttr<NN_Dialect, NN_Reduction, "reduction"> {
  let assemblyFormat = "`<` $value `>`";
}

def NN_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "GELU formula: exact (erf) or the tanh approximation",
    [I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"tanh", 1>]> {
  let cppNamespace = "::mlir::nn";
  let genSpecializedAttr = 0;
}
def NN_GeluApproximationAttr
    : EnumAttr<NN_Dialect, NN_GeluApproximation, "approximation"> {
  let assemblyFormat = "`<` $value `>`";
}

def NN_Distribution : I32EnumAttr<"Distribution",
    "what nn.random draws: uniform in [a, b) or normal (mean a, std b)",
    [I32EnumAttrCase<"uniform", 0>, I32EnumAttrCase<"normal", 1>]> {
  let cppNamespace = "::mlir::nn";
  let genSpecializedAttr = 0;
}
def NN_DistributionAttr
    : EnumAttr<NN_Dialect, NN_Distribution, "distribution"> {
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def NN_UnaryFn : I32EnumAttr<"UnaryFn",
    "pointwise math function of nn.unary_grad",
    [I32EnumAttrCase<"tanh", 0>, I32EnumAttrCase<"sigmoid", 1>,
     I32EnumAttrCase<"exp", 2>, I32EnumAttrCase<"log", 3>,
     I32EnumAttrCase<"sqrt", 4>, I32EnumAttrCase<"rsqrt", 5>,
     I32EnumAttrCase<"abs", 6>, I32EnumAttrCase<"pow", 7>,
     I32EnumAttrCase<"clamp", 8>, I32EnumAttrCase<"erf", 9>,
     I32EnumAttrCase<"sin", 10>, I32EnumAttrCase<"cos", 11>,
     I32EnumAttrCase<"acos", 12>, I32EnumAttrCase<"asin", 13>,
     I32EnumAttrCase<"atan", 14>]> {
  let cppNamespace = "::mlir::nn";
  let genSpecializedAttr = 0;
}
def NN_UnaryFnAttr : EnumAttr<NN_Dialect, NN_UnaryFn, "unary_fn"> {
  let assemblyFormat = "`<` $value `>`";
}

def NN_FloatElement : AnyTypeOf<[F32, BF16, F16], "f32, bf16 or f16">;
def NN_FloatTensor : StaticShapeTensorOf<[F32, BF16, F16]>;
def NN_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def NN_AnyTensor : StaticShapeTensorOf<[F32, BF16, F16, I32, I64]>;

def NN_InUnitInterval : AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() >= 0.0 && "
          "::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() < 1.0">,
    "whose value is in [0, 1)">;
def NN_Probability : ConfinedAttr<F64Attr, [NN_InUnitInterval]>;

def NN_FloatPositive : AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0.0">,
    "whose value is positive">;
def NN_PositiveF64 : ConfinedAttr<F64Attr, [NN_FloatPositive]>;

#endif // FSDP_DIALECT_NN_IR_NNBASE_TD
