//===- NNOps.td - nn dialect operations ----------------------*- tablegen -*-===//
//
// One op per runtime kernel, with PyTorch's semantics. Ops whose result type
// follows from their operands and attributes infer it (InferTypeOpAdaptor);
// the textual form still spells result types so that IR reads on its own.
//
// Over 800 lines because ODS is declarative: every op is its signature and
// its documentation, forward ops first, then their gradients (the VJPs are
// in NNDifferentiation.cpp, the verifiers in NNOps.cpp and NNGradOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_NN_IR_NNOPS_TD
#define FSDP_DIALECT_NN_IR_NNOPS_TD

include "fsdp/Dialect/NN/IR/NNBase.td"
include "fsdp/Interfaces/DifferentiableOpInterface.td"
include "fsdp/Interfaces/StorageAliasOpInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic, traits>;

// An op drawing from the counter-based generator: its numbers are a pure
// function of (seed, step, rng_id, element index). fsdp-build-train-step
// gives every inlined site (each call, each micro-batch) its own rng_id, and
// the lowering folds the rank into it (CallBuilder::rngKey).
def NN_RandomSiteOpInterface : OpInterface<"RandomSiteOpInterface"> {
  let cppNamespace = "::mlir::nn";
  let methods = [
    InterfaceMethod<"The site's key.", "int64_t", "getRngSite", (ins), [{}],
      [{ return int64_t($_op.getRngId()); }]>,
    InterfaceMethod<"Keys the site anew.", "void", "setRngSite",
      (ins "int64_t":$id), [{}],
      [{ $_op.setRngIdAttr(::mlir::IntegerAttr::get(
             ::mlir::IntegerType::get($_op.getContext(), 64), id)); }]>,
  ];
}

// A forward op: reverse-mode autodiff asks it for its VJP
// (NNDifferentiation.cpp).
def NN_Differentiable : DeclareOpInterfaceMethods<DifferentiableOpInterface>;

// An op computing a value from its operands only.
class NN_PureOp<string mnemonic, list<Trait> traits = []>
    : NN_Op<mnemonic, !listconcat([Pure], traits)>;

// Elementwise op of one tensor: the result has the operand's type.
class NN_UnaryOp<string mnemonic, list<Trait> traits = []>
    : NN_PureOp<mnemonic, !listconcat([SameOperandsAndResultType,
                                        InferTypeOpInterface,
                                        NN_Differentiable], traits)> {
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// Elementwise op of two tensors with NumPy/PyTorch trailing broadcasting.
class NN_BinaryOp<string mnemonic, string formula>
    : NN_PureOp<mnemonic, [InferTypeOpAdaptor, NN_Differentiable]> {
  let summary = "elementwise " # formula # " with broadcasting";
  let description = [{
    `result = }] # formula # [{` elementwise. Shapes broadcast as in PyTorch:
    aligned from the last dimension, each pair of sizes equal or one of them 1.
    Both operands have the same element type.

    ```mlir
    %y = nn.}] # mnemonic # [{ %a, %b : (tensor<4x16x32xf32>, tensor<16x32xf32>) -> tensor<4x16x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def NN_LinearOp : NN_PureOp<"linear", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "affine map x·Wᵀ + b (torch.nn.functional.linear)";
  let description = [{
    `input` is `[..., in]`, `weight` is `[out, in]` (PyTorch's layout), the
    optional `bias` is `[out]`; the result is `[..., out]`.

    ```mlir
    %y = nn.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       Optional<NN_FloatTensor>:$bias);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_MatmulOp : NN_PureOp<"matmul", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "batched matrix product (torch.matmul on rank >= 2)";
  let description = [{
    `lhs` is `[..., M, K]` and `rhs` is `[..., K, N]` (after the optional
    transposes of their last two dimensions); batch dimensions broadcast.

    ```mlir
    %s = nn.matmul %q, %k {transpose_rhs} : (tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// add, sub and mul also take integer tensors, wrapping as torch's do:
// position ids and masks computed at run time (RoBERTa's
// `(cumsum(mask) + past) * mask + padding_idx`); no gradient flows there.
class NN_ArithOp<string mnemonic, string formula>
    : NN_BinaryOp<mnemonic, formula> {
  let arguments = (ins NN_AnyTensor:$lhs, NN_AnyTensor:$rhs);
  let results = (outs NN_AnyTensor:$result);
}
def NN_AddOp : NN_ArithOp<"add", "lhs + rhs">;
def NN_SubOp : NN_ArithOp<"sub", "lhs - rhs">;
def NN_MulOp : NN_ArithOp<"mul", "lhs * rhs">;

def NN_DivOp : NN_BinaryOp<"div", "lhs / rhs">;
// torch.fmod: lhs − trunc(lhs / rhs)·rhs computed exactly (C's fmod), with
// lhs's sign. torch.remainder of floats and division rounded to the floor
// are built on it, as aten builds them.
def NN_FmodOp : NN_BinaryOp<"fmod", "fmod(lhs, rhs)">;

// torch.maximum / torch.minimum: a NaN operand is the result.
def NN_MaximumOp : NN_BinaryOp<"maximum", "max(lhs, rhs)">;
def NN_MinimumOp : NN_BinaryOp<"minimum", "min(lhs, rhs)">;

/// The subgradient weights of maximum / minimum with respect to lhs (swap
/// the operands for rhs's), as torch's derivatives: what the VJPs multiply
/// the cotangent by.
class NN_WinWeightOp<string mnemonic, string wins, string op>
    : NN_PureOp<mnemonic, [InferTypeOpAdaptor]> {
  let summary = "1 where lhs " # wins # " rhs, 1/2 where equal, else 0";
  let description = [{
    d }] # op # [{(lhs, rhs) / d lhs elementwise, with broadcasting: 1
    where lhs }] # wins # [{ rhs (or either is NaN), 1/2 where they are
    equal, 0 elsewhere (torch's subgradient, which splits a tie).

    ```mlir
    %w = nn.}] # mnemonic # [{ %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}
def NN_MaxWeightOp : NN_WinWeightOp<"max_weight", "exceeds", "max">;
def NN_MinWeightOp : NN_WinWeightOp<"min_weight", "is below", "min">;

// Masks are float tensors of 1 and 0 (PyTorch's bool tensors): torch.where
// (c, x, y) is keep(x, c) + keep(y, 1 - c), masked_fill alike, so the
// unselected side never reaches the result (an -inf or NaN there stays out).
def NN_KeepOp : NN_BinaryOp<"keep", "rhs != 0 ? lhs : 0">;
/// A comparison: 1 where it holds, else 0, in the operands' float type; no
/// gradient flows through it.
class NN_CompareOp<string mnemonic, string formula>
    : NN_BinaryOp<mnemonic, "(" # formula # ") ? 1 : 0">;
def NN_LtOp : NN_CompareOp<"lt", "lhs < rhs">;
def NN_LeOp : NN_CompareOp<"le", "lhs <= rhs">;
def NN_GtOp : NN_CompareOp<"gt", "lhs > rhs">;
def NN_GeOp : NN_CompareOp<"ge", "lhs >= rhs">;
def NN_EqOp : NN_CompareOp<"eq", "lhs == rhs">;
def NN_NeOp : NN_CompareOp<"ne", "lhs != rhs">;

// Pointwise math: the result has the operand's type; the VJP is one
// nn.unary_grad of the same function (`fn`) and parameters (`a`, `b`).
class NN_MathOp<string mnemonic, string formula, string a = "0.0",
                string b = "0.0"> : NN_UnaryOp<mnemonic> {
  let summary = formula # " (torch." # mnemonic # ")";
  let description = [{
    ```mlir
    %y = nn.}] # mnemonic # [{ %x : tensor<4x16xf32>
    ```
  }];
  let extraClassDeclaration = [{
    static ::mlir::nn::UnaryFn getFn() { return ::mlir::nn::UnaryFn::}]
      # mnemonic # [{; }
    double getParamA() { return }] # a # [{; }
    double getParamB() { return }] # b # [{; }
  }];
}

def NN_TanhOp : NN_MathOp<"tanh", "hyperbolic tangent">;
def NN_SigmoidOp : NN_MathOp<"sigmoid", "1 / (1 + exp(-x))">;
def NN_ExpOp : NN_MathOp<"exp", "e^x">;
def NN_LogOp : NN_MathOp<"log", "natural logarithm">;
def NN_SqrtOp : NN_MathOp<"sqrt", "square root">;
def NN_RsqrtOp : NN_MathOp<"rsqrt", "1 / sqrt(x)">;
def NN_AbsOp : NN_MathOp<"abs", "|x|">;
def NN_ErfOp : NN_MathOp<"erf", "the error function">;
def NN_SinOp : NN_MathOp<"sin", "sine">;
def NN_CosOp : NN_MathOp<"cos", "cosine">;
def NN_AcosOp : NN_MathOp<"acos", "arccosine (NaN past ±1)">;
def NN_AsinOp : NN_MathOp<"asin", "arcsine (NaN past ±1)">;
def NN_AtanOp : NN_MathOp<"atan", "arctangent">;

def NN_PowOp : NN_MathOp<"pow", "x ** exponent", "getExponent().convertToDouble()"> {
  let description = [{
    A constant exponent (torch.pow(x, 2.0), `x ** 0.5`).

    ```mlir
    %y = nn.pow %x {exponent = 2.0 : f64} : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, F64Attr:$exponent);
}

def NN_ClampOp : NN_MathOp<"clamp", "min(max(x, min), max)",
    "getMin() ? getMin()->convertToDouble() : -INFINITY",
    "getMax() ? getMax()->convertToDouble() : INFINITY"> {
  let description = [{
    torch.clamp with constant bounds; either may be absent, not both, and
    `min` <= `max`. The gradient passes where min <= x <= max.

    ```mlir
    %y = nn.clamp %x {min = 0.0 : f64, max = 6.0 : f64} : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
  let hasVerifier = 1;
}

def NN_ScaleOp : NN_UnaryOp<"scale"> {
  let summary = "multiplication by a constant";
  let description = [{
    ```mlir
    %y = nn.scale %x {factor = 0.5 : f64} : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, F64Attr:$factor);
}

def NN_ReluOp : NN_UnaryOp<"relu"> {
  let summary = "max(x, 0)";
}

def NN_GeluOp : NN_UnaryOp<"gelu"> {
  let summary = "GELU, exact (erf) or tanh-approximated (F.gelu)";
  let description = [{
    `approximate` is PyTorch's argument: `none` is x·Φ(x), `tanh` the GPT-2
    approximation.

    ```mlir
    %y = nn.gelu %x {approximate = #nn.approximation<tanh>} : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
      DefaultValuedAttr<NN_GeluApproximationAttr,
                        "::mlir::nn::GeluApproximation::none">:$approximate);
}

def NN_SiluOp : NN_UnaryOp<"silu"> {
  let summary = "x·sigmoid(x) (F.silu)";
}

def NN_DropoutOp : NN_Op<"dropout", [SameOperandsAndResultType,
                                      InferTypeOpInterface,
                                      NN_Differentiable,
                                      NN_RandomSiteOpInterface]> {
  let summary = "inverted dropout with a counter-based random mask";
  let description = [{
    Zeroes each element with probability `p` and scales the others by
    1/(1-p), as F.dropout in training mode. The mask is a pure function of the
    run's seed, the step, `rng_id` (distinct per dropout site) and the element
    index, so it does not depend on the number of ranks or threads and the
    backward recomputes it instead of storing it.

    ```mlir
    %y = nn.dropout %x {p = 1.000000e-01 : f64, rng_id = 3 : i64} : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_Probability:$p,
                       I64Attr:$rng_id);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_RandomOp : NN_Op<"random", [NN_RandomSiteOpInterface]> {
  let summary = "uniform or normal random numbers from the counter-based "
                "generator";
  let description = [{
    A tensor of `uniform` numbers in [a, b) or `normal` ones (mean a,
    standard deviation b): torch.rand / torch.randn and their `_like`
    forms, e.g. a VAE's reparameterisation noise or a diffusion model's
    noise and time steps. As nn.dropout's mask, the numbers are a pure
    function of the run's seed, the step, `rng_id` (distinct per site) and
    the element index, so they do not depend on the number of ranks or
    threads, and a recomputation (activation checkpointing) draws them
    again. No gradient flows through them.

    ```mlir
    %n = nn.random {a = 0.0 : f64, b = 1.0 : f64, distribution = #nn.distribution<normal>, rng_id = 2 : i64} : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_DistributionAttr:$distribution, F64Attr:$a,
                       F64Attr:$b, I64Attr:$rng_id);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def NN_LayerNormOp : NN_PureOp<"layer_norm", [NN_Differentiable, InferTypeOpAdaptor,
                                               AttrSizedOperandSegments]> {
  let summary = "layer normalization over the last dimension";
  let description = [{
    F.layer_norm with `normalized_shape` = the last dimension `[D]`; the
    optional `weight` and `bias` are `[D]`.

    ```mlir
    %y = nn.layer_norm %x weight %g bias %b {epsilon = 1.0e-05 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       Optional<NN_FloatTensor>:$weight,
                       Optional<NN_FloatTensor>:$bias,
                       DefaultValuedAttr<NN_PositiveF64, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input (`weight` $weight^)? (`bias` $bias^)? "
                       "attr-dict `:` functional-type(operands, results)";
}

def NN_RMSNormOp : NN_PureOp<"rms_norm", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "root-mean-square normalization over the last dimension";
  let description = [{
    x / sqrt(mean(x²) + eps) · weight over the last dimension `[D]`, as
    torch.nn.RMSNorm (Llama).

    ```mlir
    %y = nn.rms_norm %x weight %g {epsilon = 1.0e-06 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       Optional<NN_FloatTensor>:$weight,
                       DefaultValuedAttr<NN_PositiveF64, "1e-6">:$epsilon);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input (`weight` $weight^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_BatchNormOp : NN_Op<"batch_norm", [Pure, InferTypeOpAdaptor,
                                          NN_Differentiable,
    DeclareOpInterfaceMethods<StorageAliasOpInterface>]> {
  let summary = "batch normalization with running statistics";
  let description = [{
    F.batch_norm over the channel dimension 1 of `input` `[N, C, ...]`.
    In training mode it normalizes with the batch statistics (biased
    variance) and returns the updated running statistics
    (`(1 - momentum)·running + momentum·batch`, unbiased variance); in eval
    mode it normalizes with the running statistics and returns them unchanged.
    Value semantics: the caller stores the new statistics in its buffers.

    ```mlir
    %y, %mean, %var = nn.batch_norm %x, %w, %b, %rm, %rv {training} : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_FloatTensor:$bias, NN_FloatTensor:$running_mean,
                       NN_FloatTensor:$running_var,
                       DefaultValuedAttr<NN_PositiveF64, "1e-5">:$epsilon,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       UnitAttr:$training);
  let results = (outs NN_FloatTensor:$result, NN_FloatTensor:$new_running_mean,
                      NN_FloatTensor:$new_running_var);
  let assemblyFormat = "$input `,` $weight `,` $bias `,` $running_mean `,` "
      "$running_var attr-dict `:` functional-type(operands, results)";
}

def NN_SoftmaxOp : NN_PureOp<"softmax", [SameOperandsAndResultType,
                                          InferTypeOpInterface,
                                          NN_Differentiable]> {
  let summary = "softmax along one dimension";
  let description = [{
    ```mlir
    %p = nn.softmax %x {dim = -1 : i64} : tensor<4x10xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$dim);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Transformer building blocks
//===----------------------------------------------------------------------===//

def NN_EmbeddingOp : NN_PureOp<"embedding", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "table lookup (F.embedding)";
  let description = [{
    `indices` `[...]` of i32/i64 select rows of `table` `[V, D]`; the result
    is `[..., D]`. Indices out of `[0, V)` are a runtime error. With
    `padding_idx` (nn.Embedding's), that row gets no gradient.

    ```mlir
    %e = nn.embedding %ids, %wte {padding_idx = 0 : i64} : (tensor<4x16xi64>, tensor<64x32xf32>) -> tensor<4x16x32xf32>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$indices, NN_FloatTensor:$table,
                       OptionalAttr<I64Attr>:$padding_idx);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$indices `,` $table attr-dict `:` functional-type(operands, results)";
}

def NN_AttentionOp : NN_PureOp<"attention", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "multi-head scaled dot-product attention";
  let description = [{
    F.scaled_dot_product_attention on packed heads: `query` is
    `[B, Tq, H·D]`, `key` and `value` are `[B, Tk, Hkv·D]` with `num_heads` H
    and `num_kv_heads` Hkv (default H; fewer for grouped-query attention, H a
    multiple of Hkv). Self-attention passes the same sequence for all three;
    cross-attention passes another sequence as key/value. `causal` masks
    position j > i (top-left aligned, as PyTorch's `is_causal`). `scale`
    defaults to 1/sqrt(D). The result is `[B, Tq, H·D]`; the projections are
    separate `nn.linear` ops.

    `bias`, when present, is added to the scaled scores before the mask and
    the softmax (SDPA's float `attn_mask`): `[Bb, Hb, Tq, Tk]` with Bb 1 or
    B and Hb 1 or H, broadcast; an additive padding mask (0 / −inf or a
    large negative value) or a learned bias (T5's relative positions),
    whose gradient is `nn.attention_grad`'s last result.

    `keep_stats` adds the softmax statistics as a second result, f32
    `[B, H, Tq]`, for `nn.attention_grad` (as on `nn.packed_attention`).

    ```mlir
    %o = nn.attention %q, %k, %v {num_heads = 4 : i64, causal} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
    %m = nn.attention %q, %k, %v bias %b {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x1x16x16xf32>) -> tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$query, NN_FloatTensor:$key,
                       NN_FloatTensor:$value, Optional<NN_FloatTensor>:$bias,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$num_kv_heads,
                       UnitAttr:$causal,
                       OptionalAttr<NN_PositiveF64>:$scale,
                       UnitAttr:$keep_stats);
  let results = (outs NN_FloatTensor:$result,
                      Optional<StaticShapeTensorOf<[F32]>>:$stats);
  let assemblyFormat = "$query `,` $key `,` $value (`bias` $bias^)? attr-dict "
                       "`:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Heads of key/value (num_heads unless grouped-query attention).
    int64_t getKeyValueHeads() {
      return getNumKvHeads().value_or(getNumHeads());
    }
  }];
}

def NN_PackedAttentionOp : NN_PureOp<"packed_attention",
                                     [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "self-attention on one packed query / key / value tensor";
  let description = [{
    nn.attention of the slices of `qkv` `[B, T, (H + 2·Hkv)·D]` along its
    last dimension: the query is `[..., 0 : H·D]`, the key and the value
    the next `Hkv·D` each — GPT-2's `c_attn` output — read in place instead
    of split into three copies (and their gradients written into one
    `[B, T, (H + 2·Hkv)·D]` gradient instead of concatenated).
    `fsdp-pack-attention` makes it from an `nn.split` feeding one
    `nn.attention`. Attributes mean what they mean on `nn.attention`; no
    bias. The result is `[B, T, H·D]`.

    With `keep_stats` (set by `fsdp-keep-attention-stats` where the train
    step differentiates it), a second result holds the softmax statistics
    for `nn.packed_attention_grad`: f32 `[B, H, T]`, each query row's
    log-sum-exp of its scaled, masked scores (what FlashAttention and
    PyTorch's SDPA keep), so that the backward need not run the forward
    again.

    ```mlir
    %o = nn.packed_attention %qkv {causal, num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> tensor<2x16x32xf32>
    %o2, %stats = nn.packed_attention %qkv {causal, keep_stats, num_heads = 4 : i64} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x4x16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$qkv,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$num_kv_heads,
                       UnitAttr:$causal,
                       OptionalAttr<NN_PositiveF64>:$scale,
                       UnitAttr:$keep_stats);
  let results = (outs NN_FloatTensor:$result,
                      Optional<StaticShapeTensorOf<[F32]>>:$stats);
  let assemblyFormat = "$qkv attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Heads of key/value (num_heads unless grouped-query attention).
    int64_t getKeyValueHeads() {
      return getNumKvHeads().value_or(getNumHeads());
    }
  }];
}

def NN_RoPEOp : NN_PureOp<"rope", [SameOperandsAndResultType,
                                    InferTypeOpInterface, NN_Differentiable]> {
  let summary = "rotary position embedding (Llama)";
  let description = [{
    Rotates each pair (x[2i], x[2i+1]) of every head of `input`
    `[B, T, H·D]` by the angle t·theta^(-2i/D) at position t in [0, T), as
    Meta's Llama reference does. D must be even. `inverse` rotates by the
    opposite angle: the rotation is orthogonal, so that is its VJP.

    ```mlir
    %q2 = nn.rope %q {num_heads = 4 : i64, theta = 1.0e+04 : f64} : tensor<2x16x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       DefaultValuedAttr<NN_PositiveF64, "10000.0">:$theta,
                       UnitAttr:$inverse);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape and type manipulation
//===----------------------------------------------------------------------===//

def NN_CastOp : NN_PureOp<"cast", [NN_Differentiable]> {
  let summary = "element type conversion (Tensor.to(dtype))";
  let description = [{
    Converts between any of f32, bf16, f16, i32 and i64, as torch does:
    to a float type rounding to nearest even, from a float type to an
    integer type truncating toward zero (`mask.int()`, `x.long()`), between
    integer types wrapping. The shape is unchanged. Only float to float
    carries a gradient.

    ```mlir
    %h = nn.cast %x : tensor<4x16xf32> to tensor<4x16xbf16>
    %ids = nn.cast %mask : tensor<4x16xf32> to tensor<4x16xi32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def NN_StopGradientOp : NN_PureOp<"stop_gradient", [SameOperandsAndResultType,
    InferTypeOpInterface, NN_Differentiable,
    DeclareOpInterfaceMethods<StorageAliasOpInterface, ["isStorageRename"]>]> {
  let summary = "the value, with no gradient through it (Tensor.detach())";
  let description = [{
    The operand's value; the loss's gradient does not flow back through it
    (its VJP gives its operand none), as torch's `detach()`. It only marks
    the differentiation: fsdp-build-train-step replaces it with its operand
    once the step is differentiated. Its result is its operand's storage
    (a rename, as `reshape`), so it would run nothing anyway.

    ```mlir
    %t = nn.stop_gradient %x : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_IdRangeOp : NN_PureOp<"id_range", [SameOperandsAndResultType,
    InferTypeOpInterface, NN_Differentiable,
    DeclareOpInterfaceMethods<StorageAliasOpInterface,
                              ["isStorageRename", "checksRenamedStorage"]>]> {
  let summary = "integer ids that must lie in [0, count) or equal `ignore`";
  let description = [{
    The operand's value, with the range torch checks its ids against: each
    in [0, `count`) or equal to `ignore` where given. A one-hot of class
    labels built from comparisons (F.one_hot, cross_entropy with class
    weights or no reduction) would silently give a zero row for a label out
    of range, where torch raises; this op carries torch's check. Where the
    ids are a train-step input (through reshapes, slices and pads), the
    runner checks each batch against it as it loads it and stops the run
    naming the element, as it does for nn.embedding's ids and
    nn.cross_entropy's targets; synthetic data draws them in the range.
    Its result is its operand's storage (a rename, as `reshape`: no copy);
    where it stands the step also checks the ids (fsdprt_index_check: ids
    computed in the step, a Session's batches), the error naming the op's
    location. Its ids get no gradient.

    ```mlir
    %ids = nn.id_range %labels {count = 10 : i64, ignore = -100 : i64} : tensor<8xi64>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$count,
                       OptionalAttr<I64Attr>:$ignore);
  let results = (outs NN_IndexTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def NN_ReshapeOp : NN_PureOp<"reshape", [NN_Differentiable,
    DeclareOpInterfaceMethods<StorageAliasOpInterface, ["isStorageRename"]>]> {
  let summary = "same elements, another shape (Tensor.reshape)";
  let description = [{
    ```mlir
    %y = nn.reshape %x : tensor<4x16x64xf32> to tensor<64x64xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def NN_TransposeOp : NN_PureOp<"transpose", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "permutation of dimensions (Tensor.permute)";
  let description = [{
    Result dimension i is input dimension `permutation[i]`.

    ```mlir
    %y = nn.transpose %x {permutation = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def NN_SplitOp : NN_PureOp<"split", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "split into consecutive chunks along a dimension";
  let description = [{
    torch.split with explicit `sizes`, which must add up to the size of
    dimension `dim`.

    ```mlir
    %q, %k, %v = nn.split %qkv {dim = 2 : i64, sizes = array<i64: 32, 32, 32>} : (tensor<2x16x96xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, I64Attr:$dim,
                       DenseI64ArrayAttr:$sizes);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def NN_ConcatOp : NN_PureOp<"concat", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "concatenation along a dimension (torch.cat)";
  let description = [{
    ```mlir
    %y = nn.concat %a, %b {dim = 1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Variadic<NN_FloatTensor>:$inputs, I64Attr:$dim);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
}

def NN_SliceOp : NN_PureOp<"slice", [NN_Differentiable]> {
  let summary = "a window of one dimension (x[..., start:end:step, ...])";
  let description = [{
    Elements `start`, `start + step`, ... below `end` of dimension `dim`
    (`ceil((end - start) / step)` of them), every other dimension whole;
    any element type. `step` (default 1) is PyTorch's slice step: GPT-J's
    interleaved rotary reads `x[..., ::2]` and `x[..., 1::2]`. The VJP pads
    the cotangent with zeros back to the input's shape (step 1) or
    scatters it into zeros (`nn.slice_grad`).

    ```mlir
    %y = nn.slice %x {dim = 3 : i64, start = 0 : i64, end = 4 : i64} : (tensor<2x4x16x8xf32>) -> tensor<2x4x16x4xf32>
    %odd = nn.slice %x {dim = 3 : i64, start = 1 : i64, end = 8 : i64, step = 2 : i64} : (tensor<2x4x16x8xf32>) -> tensor<2x4x16x4xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input, I64Attr:$dim, I64Attr:$start,
                       I64Attr:$end,
                       ConfinedAttr<DefaultValuedAttr<I64Attr, "1">,
                                    [IntPositive]>:$step);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_PadOp : NN_PureOp<"pad", [NN_Differentiable]> {
  let summary = "constant padding of one dimension (F.pad, mode constant)";
  let description = [{
    `low` elements of `value` before dimension `dim` and `high` after it;
    any element type (HF's causal-LM loss pads its labels with -100). The
    VJP slices the cotangent back.

    ```mlir
    %y = nn.pad %x {dim = 1 : i64, low = 0 : i64, high = 1 : i64, value = -100.0 : f64} : (tensor<2x16xi64>) -> tensor<2x17xi64>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input, I64Attr:$dim, I64Attr:$low,
                       I64Attr:$high, DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_CumsumOp : NN_PureOp<"cumsum", [SameOperandsAndResultType,
                                        InferTypeOpInterface,
                                        NN_Differentiable]> {
  let summary = "running sum along one dimension (torch.cumsum)";
  let description = [{
    `result[..., i, ...] = sum of input[..., j, ...] for j <= i` along `dim`
    (negative counts from the end), or for j >= i with `reverse` (the VJP
    of a cumsum is the reversed cumsum of its cotangent). Float tensors
    accumulate in f64, each prefix rounded to f32 (as torch's CPU kernel
    for f32; bf16 / f16 then round from f32); integer tensors (RoBERTa's
    position ids count a padding mask) accumulate in i64 and have no
    gradient.
    torch.cumsum of an i32 tensor gives i64: the importer casts first.

    ```mlir
    %c = nn.cumsum %mask {dim = 1 : i64} : tensor<4x16xi64>
    %g = nn.cumsum %dy {dim = -1 : i64, reverse} : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input, I64Attr:$dim, UnitAttr:$reverse);
  let results = (outs NN_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

class NN_ReduceOp<string mnemonic, string what>
    : NN_PureOp<mnemonic, [InferTypeOpAdaptor, NN_Differentiable]> {
  let summary = what # " over a set of dimensions";
  let description = [{
    Reduces the dimensions listed in `dims` (negative values count from the
    end; each at most once); `keepdim` keeps them with size 1, as PyTorch.
    Listing every dimension gives a 0-d tensor.

    ```mlir
    %s = nn.}] # mnemonic # [{ %x {dims = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdim);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum", "sum">;
def NN_ReduceMeanOp : NN_ReduceOp<"reduce_mean", "mean">;

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

// The geometry every convolution op carries, one entry per spatial dim
// (1 for conv1d, 2 for conv2d): PyTorch's stride, padding before
// (`pad_low`) and after (`pad_high`, which differs from pad_low only for
// padding='same' with an even receptive field), dilation, and groups.
defvar NN_ConvGeometry = (ins DenseI64ArrayAttr:$stride,
                              DenseI64ArrayAttr:$pad_low,
                              DenseI64ArrayAttr:$pad_high,
                              DenseI64ArrayAttr:$dilation,
                              ConfinedAttr<I64Attr, [IntPositive]>:$groups);

def NN_ConvOp : NN_PureOp<"conv", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "1-D or 2-D convolution (F.conv1d / F.conv2d)";
  let description = [{
    `input` is `[N, C, L]` or `[N, C, H, W]`, `weight` `[O, C/groups, k...]`
    (PyTorch's layout), the optional `bias` `[O]`. Output size per spatial
    dim: `(in + pad_low + pad_high - dilation·(k - 1) - 1) / stride + 1`.
    The VJP is `nn.conv_transpose`, `nn.conv_grad_weight` and the bias's
    sum over N and the spatial dims.

    ```mlir
    %y = nn.conv %x, %w, %b {stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
    ```
  }];
  let arguments = !con((ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                            Optional<NN_FloatTensor>:$bias), NN_ConvGeometry);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

// The window of a max pooling, one entry per spatial dim: F.max_pool's
// kernel_size, stride, padding (both sides, read as -inf) and dilation.
defvar NN_PoolWindow = (ins DenseI64ArrayAttr:$kernel,
                            DenseI64ArrayAttr:$stride,
                            DenseI64ArrayAttr:$padding,
                            DenseI64ArrayAttr:$dilation);

def NN_MaxPoolOp : NN_PureOp<"max_pool", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "1-D or 2-D max pooling (F.max_pool1d / F.max_pool2d)";
  let description = [{
    `input` is `[N, C, L]` or `[N, C, H, W]`; each output element is the
    maximum of its window (padding never wins). Output size per spatial
    dim: `(in + 2·padding - dilation·(kernel - 1) - 1) / stride + 1`
    (ceil_mode off). The VJP, `nn.max_pool_grad`, routes each cotangent to
    the first maximum of its window in row-major order, as PyTorch.

    ```mlir
    %y = nn.max_pool %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
    ```
  }];
  let arguments = !con((ins NN_FloatTensor:$input), NN_PoolWindow);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

// Where the compiler pads the vocabulary (fsdp-pad-vocab), the logits'
// last dimension holds `num_classes` classes followed by padding columns:
// they take no part in the loss and their gradient is zero.
defvar NN_NumClasses = OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>;
defvar NN_ClassCount = [{
  /// The classes: num_classes where the vocabulary is padded, else the
  /// logits' whole last dimension.
  int64_t getClassCount() {
    return getNumClasses().value_or(
        ::llvm::cast<::mlir::ShapedType>(getLogits().getType())
            .getShape().back());
  }
}];

def NN_CrossEntropyOp : NN_PureOp<"cross_entropy", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "softmax cross-entropy with class-index targets";
  let description = [{
    F.cross_entropy with `logits` `[..., C]` and integer `targets` `[...]`.
    Targets equal to `ignore_index` contribute nothing; `mean` divides by the
    number of targets not ignored, as PyTorch. The result is a 0-d tensor.
    With `num_classes`, only the first `num_classes` columns are classes
    (the rest pad the vocabulary to an aligned width).

    ```mlir
    %loss = nn.cross_entropy %logits, %targets {reduction = #nn.reduction<sum>} : (tensor<64x23xf32>, tensor<64xi64>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
      DefaultValuedAttr<NN_ReductionAttr, "::mlir::nn::Reduction::mean">:$reduction,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      NN_NumClasses:$num_classes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $targets attr-dict `:` "
                       "functional-type(operands, results)";
  // F.cross_entropy's defaults: mean over the targets not ignored, -100.
  let builders = [OpBuilder<(ins "::mlir::Value":$logits,
                                 "::mlir::Value":$targets), [{
    build($_builder, $_state, logits, targets, ::mlir::nn::Reduction::mean,
          -100, ::mlir::IntegerAttr());
  }]>];
  let extraClassDeclaration = NN_ClassCount;
}

def NN_MSELossOp : NN_PureOp<"mse_loss", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "mean (or summed) squared error";
  let description = [{
    ```mlir
    %loss = nn.mse_loss %y, %target : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$target,
      DefaultValuedAttr<NN_ReductionAttr, "::mlir::nn::Reduction::mean">:$reduction);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $target attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Broadcast
//===----------------------------------------------------------------------===//

def NN_BroadcastOp : NN_PureOp<"broadcast", [NN_Differentiable]> {
  let summary = "expands size-1 and missing leading dims (Tensor.expand)";
  let description = [{
    The VJP of a reduction: repeats the input to the result shape under
    PyTorch's broadcasting rules.

    ```mlir
    %y = nn.broadcast %x : tensor<4x1xf32> to tensor<2x4x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Gradient kernels: the VJPs that are not compositions of forward ops
//===----------------------------------------------------------------------===//

class NN_ActivationGradOp<string mnemonic, string of>
    : NN_PureOp<mnemonic, [SameOperandsAndResultType, InferTypeOpInterface]> {
  let summary = "gradient of " # of # " with respect to its input";
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($input)";
}

def NN_ReluGradOp : NN_ActivationGradOp<"relu_grad", "nn.relu"> {
  let description = [{
    `grad` where `input` > 0, else 0 (PyTorch's threshold_backward).

    ```mlir
    %gx = nn.relu_grad %g, %x : tensor<4x16xf32>
    ```
  }];
}

def NN_SiluGradOp : NN_ActivationGradOp<"silu_grad", "nn.silu">;

def NN_GeluGradOp : NN_ActivationGradOp<"gelu_grad", "nn.gelu"> {
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
      DefaultValuedAttr<NN_GeluApproximationAttr,
                        "::mlir::nn::GeluApproximation::none">:$approximate);
}

def NN_UnaryGradOp : NN_PureOp<"unary_grad", [SameOperandsAndResultType,
                                                InferTypeOpInterface]> {
  let summary = "gradient of a pointwise math op with respect to its input";
  let description = [{
    `grad` · f'(`input`) for the function `fn` of nn.tanh ... nn.clamp, with
    its parameters `a`, `b` (pow's exponent; clamp's bounds, ±inf for none).

    ```mlir
    %gx = nn.unary_grad %g, %x {fn = #nn.unary_fn<pow>, a = 2.0 : f64} : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
      NN_UnaryFnAttr:$fn, DefaultValuedAttr<F64Attr, "0.0">:$a,
      DefaultValuedAttr<F64Attr, "0.0">:$b);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($input)";
}

def NN_LayerNormGradOp : NN_PureOp<"layer_norm_grad", [InferTypeOpAdaptor]> {
  let summary = "gradients of nn.layer_norm (input, weight, bias)";
  let description = [{
    Recomputes the mean and inverse standard deviation of `input`; without a
    `weight` the scale is 1. The weight and bias gradients are `[D]`.

    ```mlir
    %gx, %gw, %gb = nn.layer_norm_grad %g, %x weight %w {epsilon = 1.0e-05 : f64} : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       Optional<NN_FloatTensor>:$weight,
                       DefaultValuedAttr<NN_PositiveF64, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = "$grad `,` $input (`weight` $weight^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_RMSNormGradOp : NN_PureOp<"rms_norm_grad", [InferTypeOpAdaptor]> {
  let summary = "gradients of nn.rms_norm (input, weight)";
  let description = [{
    ```mlir
    %gx, %gw = nn.rms_norm_grad %g, %x weight %w : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<32xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       Optional<NN_FloatTensor>:$weight,
                       DefaultValuedAttr<NN_PositiveF64, "1e-6">:$epsilon);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad);
  let assemblyFormat = "$grad `,` $input (`weight` $weight^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_BatchNormGradOp : NN_PureOp<"batch_norm_grad", [InferTypeOpAdaptor]> {
  let summary = "gradients of nn.batch_norm (input, weight, bias)";
  let description = [{
    In training mode the statistics are the batch's (recomputed from
    `input`) and the input gradient flows through them; in eval mode they are
    the running statistics, constants of the step.

    ```mlir
    %gx, %gw, %gb = nn.batch_norm_grad %g, %x, %w, %rm, %rv {training} : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_FloatTensor:$weight, NN_FloatTensor:$running_mean,
                       NN_FloatTensor:$running_var,
                       DefaultValuedAttr<NN_PositiveF64, "1e-5">:$epsilon,
                       UnitAttr:$training);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = "$grad `,` $input `,` $weight `,` $running_mean `,` "
      "$running_var attr-dict `:` functional-type(operands, results)";
}

def NN_SliceGradOp : NN_PureOp<"slice_grad"> {
  let summary = "gradient of a strided nn.slice: the cotangent scattered into zeros";
  let description = [{
    The result (the sliced input's type) is zero but at positions `start`,
    `start + step`, ... of dimension `dim`, which hold `grad`'s slices in
    order (torch's slice_backward); `grad` may hold fewer slices than the
    dimension has from `start` (a slice that ended early, `x[:, 1:5:2]`). Only the VJP of an `nn.slice` whose
    step exceeds 1 makes it; a step-1 slice's gradient is an `nn.pad`.

    ```mlir
    %gx = nn.slice_grad %g {dim = 3 : i64, start = 1 : i64, step = 2 : i64} : (tensor<2x4x16x4xf32>) -> tensor<2x4x16x8xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, I64Attr:$dim,
                       ConfinedAttr<I64Attr, [IntNonNegative]>:$start,
                       ConfinedAttr<I64Attr, [IntPositive]>:$step);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_EmbeddingGradOp : NN_PureOp<"embedding_grad", [InferTypeOpAdaptor]> {
  let summary = "gradient of nn.embedding with respect to the table";
  let description = [{
    Adds every row of `grad` `[..., D]` into row `indices[...]` of a zero
    `[num_embeddings, D]` table, in a fixed order (deterministic).

    ```mlir
    %gt = nn.embedding_grad %g, %ids {num_embeddings = 64 : i64} : (tensor<4x16x32xf32>, tensor<4x16xi64>) -> tensor<64x32xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_IndexTensor:$indices,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_embeddings);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $indices attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_LinearGradOp : NN_PureOp<"linear_grad", [InferTypeOpAdaptor]> {
  let summary = "gradients of an nn.linear with a bias (input, weight, bias)";
  let description = [{
    `grad` is `[rows, out]` and `input` `[rows, in]` (the layer's leading
    dimensions flattened), `weight` `[out, in]`: input_grad = grad·W,
    weight_grad = gradᵀ·input and bias_grad = grad's column sums, in one
    kernel call (on CUDA the bias gradient is cuBLASLt's epilogue of the
    weight-gradient GEMM, as PyTorch's addmm backward).

    ```mlir
    %gx, %gw, %gb = nn.linear_grad %g, %x, %w : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<16x8xf32>) -> (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_FloatTensor:$weight);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = "$grad `,` $input `,` $weight attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_LinearGeluOp : NN_PureOp<"linear_gelu", [InferTypeOpAdaptor]> {
  let summary = "an nn.linear and the tanh nn.gelu of its result in one op";
  let description = [{
    `pre` = nn.linear(`input`, `weight`, `bias`) and `result` =
    nn.gelu(`pre`) with the tanh approximation (the only GELU cuBLASLt's
    epilogue computes). The train step forms it after it is built
    (fsdp-pipeline's `fuse-bias-gelu`), so it has no VJP: the backward
    reads `pre` through nn.gelu_grad or nn.linear_gelu_grad. On CUDA it is
    one GEMM with cuBLASLt's GELU_AUX_BIAS epilogue (GELU of the f32
    accumulator, `pre` written as the aux output); the CPU backend runs the
    two unfused kernels.

    ```mlir
    %pre, %y = nn.linear_gelu %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       Optional<NN_FloatTensor>:$bias);
  let results = (outs NN_FloatTensor:$pre, NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_LinearGeluGradOp : NN_PureOp<"linear_gelu_grad", [InferTypeOpAdaptor]> {
  let summary = "nn.linear_grad whose input gradient goes through a tanh GELU";
  let description = [{
    The gradients of nn.linear_grad (`grad` `[rows, out]`, `input`
    `[rows, in]`, `weight` `[out, in]`) with `input_grad` = nn.gelu_grad
    (tanh) of grad·W at `pre` (`[rows, in]`, the GELU's input, which is
    the layer's input's pre-activation). Formed by `fuse-bias-gelu` from
    an nn.linear_grad whose input gradient only an nn.gelu_grad reads. On
    CUDA the input-gradient GEMM applies the GELU derivative in cuBLASLt's
    DGELU epilogue; the CPU backend runs the two unfused kernels.

    ```mlir
    %gx, %gw, %gb = nn.linear_gelu_grad %g, %x, %w, %pre : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_FloatTensor:$weight, NN_FloatTensor:$pre);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = "$grad `,` $input `,` $weight `,` $pre attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_ConvTransposeOp : NN_PureOp<"conv_transpose", [NN_Differentiable]> {
  let summary = "1-D or 2-D transposed convolution (F.conv_transpose1d / 2d)";
  let description = [{
    The adjoint of `nn.conv` with the same geometry and weight: each
    element of `input` `[N, O, spatial...]` scatters its products with the
    weight `[O, C/groups, k...]` (PyTorch's conv_transpose layout) into the
    result `[N, C, spatial...]`, which is also nn.conv's gradient with
    respect to its input. The result's size is not determined by the
    geometry alone (a strided convolution drops trailing rows; PyTorch's
    `output_padding` adds them back), so it is spelled and checked:
    convolving the result with the geometry gives `input`'s shape. PyTorch's
    `padding` p is `pad_low = pad_high = p`. There is no bias (the importer
    adds it). The VJP is `nn.conv` of the cotangent (d input) and
    `nn.conv_grad_weight` of `input` against the cotangent (d weight).

    ```mlir
    %y = nn.conv_transpose %x, %w {stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
    ```
  }];
  let arguments = !con((ins NN_FloatTensor:$input, NN_FloatTensor:$weight),
                       NN_ConvGeometry);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_ConvGradWeightOp : NN_PureOp<"conv_grad_weight"> {
  let summary = "gradient of nn.conv with respect to its weight";
  let description = [{
    The correlation of `input` with `grad` summed over the batch; the
    result has the conv weight's type, spelled and checked: convolving
    `input` with it gives `grad`'s shape. It is also `nn.conv_transpose`'s
    weight gradient, with that op's input as `grad` and its cotangent as
    `input`.

    ```mlir
    %gw = nn.conv_grad_weight %g, %x {stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<2x3x8x8xf32>) -> tensor<4x3x3x3xf32>
    ```
  }];
  let arguments = !con((ins NN_FloatTensor:$grad, NN_FloatTensor:$input),
                       NN_ConvGeometry);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_MaxPoolGradOp : NN_PureOp<"max_pool_grad"> {
  let summary = "gradient of nn.max_pool with respect to its input";
  let description = [{
    Each element of `grad` added into the input position of its window's
    first maximum (recomputed from `input`); zero elsewhere. The result has
    `input`'s type; `grad` must have the pooling's result shape.

    ```mlir
    %gx = nn.max_pool_grad %g, %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = !con((ins NN_FloatTensor:$grad, NN_FloatTensor:$input),
                       NN_PoolWindow);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_AttentionGradOp : NN_PureOp<"attention_grad",
                                   [InferTypeOpAdaptor, AttrSizedOperandSegments]> {
  let summary = "gradients of nn.attention (query, key, value)";
  let description = [{
    Recomputes the attention probabilities from query and key (as
    FlashAttention's backward does) rather than storing them. Attributes
    mean what they mean on `nn.attention`. With a `bias`, the last result
    is its gradient (the scores' gradient summed over the dimensions the
    bias broadcasts along). `saved`, when present, is the forward's result
    and softmax statistics (`keep_stats`), read instead of computed again.

    ```mlir
    %gq, %gk, %gv = nn.attention_grad %g, %q, %k, %v {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$query,
                       NN_FloatTensor:$key, NN_FloatTensor:$value,
                       Optional<NN_FloatTensor>:$bias,
                       Variadic<AnyRankedTensor>:$saved,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$num_kv_heads,
                       UnitAttr:$causal,
                       OptionalAttr<NN_PositiveF64>:$scale);
  let results = (outs NN_FloatTensor:$query_grad, NN_FloatTensor:$key_grad,
                      NN_FloatTensor:$value_grad,
                      Optional<NN_FloatTensor>:$bias_grad);
  let assemblyFormat = "$grad `,` $query `,` $key `,` $value (`bias` $bias^)? "
                       "(`saved` $saved^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_PackedAttentionGradOp : NN_PureOp<"packed_attention_grad",
                                         [InferTypeOpAdaptor]> {
  let summary = "gradient of nn.packed_attention (one packed q / k / v)";
  let description = [{
    The query, key and value gradients of nn.attention_grad, written as the
    slices of one tensor of `qkv`'s type (no concat). Attributes as
    nn.packed_attention's. `saved`, when present, is the forward's result
    and its softmax statistics (`keep_stats`): the backward reads them
    instead of computing them again; the gradient is the same.

    ```mlir
    %g = nn.packed_attention_grad %d, %qkv {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x96xf32>) -> tensor<2x16x96xf32>
    %g2 = nn.packed_attention_grad %d, %qkv saved %o2, %stats {causal, num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x96xf32>, tensor<2x16x32xf32>, tensor<2x4x16xf32>) -> tensor<2x16x96xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$qkv,
                       Variadic<AnyRankedTensor>:$saved,
                       ConfinedAttr<I64Attr, [IntPositive]>:$num_heads,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntPositive]>>:$num_kv_heads,
                       UnitAttr:$causal,
                       OptionalAttr<NN_PositiveF64>:$scale);
  let results = (outs NN_FloatTensor:$qkv_grad);
  let assemblyFormat = "$grad `,` $qkv (`saved` $saved^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let extraClassDeclaration = [{
    int64_t getKeyValueHeads() {
      return getNumKvHeads().value_or(getNumHeads());
    }
  }];
}

def NN_CrossEntropyGradOp : NN_PureOp<"cross_entropy_grad",
                                      [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<StorageAliasOpInterface, ["reusesOnlyDeadOperand"]>]> {
  let summary = "gradient of nn.cross_entropy with respect to the logits";
  let description = [{
    `grad` is the 0-d cotangent of the loss: the result is
    grad · (softmax(logits) − onehot(targets)), divided by the number of
    targets not ignored for `mean`, zero on ignored rows and on padding
    columns (`num_classes`).

    ```mlir
    %gl = nn.cross_entropy_grad %g, %logits, %targets : (tensor<f32>, tensor<64x23xf32>, tensor<64xi64>) -> tensor<64x23xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$logits,
      NN_IndexTensor:$targets,
      DefaultValuedAttr<NN_ReductionAttr, "::mlir::nn::Reduction::mean">:$reduction,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      NN_NumClasses:$num_classes);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $logits `,` $targets attr-dict `:` "
                       "functional-type(operands, results)";
  let extraClassDeclaration = NN_ClassCount;
}

def NN_CrossEntropyWithGradOp : NN_PureOp<"cross_entropy_with_grad",
                                          [InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<StorageAliasOpInterface, ["reusesOnlyDeadOperand"]>]> {
  let summary = "nn.cross_entropy and its logits gradient in one pass";
  let description = [{
    The loss of nn.cross_entropy and the logits' gradient of
    nn.cross_entropy_grad for the cotangent `grad`, from one pass over the
    logits. The train step uses it where the loss's cotangent is known when
    the loss is computed (a step's loss term): the logits are read once
    instead of twice, and where nothing reads them afterwards the gradient
    overwrites them.

    ```mlir
    %loss, %gl = nn.cross_entropy_with_grad %logits, %targets, %g : (tensor<64x23xf32>, tensor<64xi64>, tensor<f32>) -> (tensor<f32>, tensor<64x23xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$logits, NN_IndexTensor:$targets,
      NN_FloatTensor:$grad,
      DefaultValuedAttr<NN_ReductionAttr, "::mlir::nn::Reduction::mean">:$reduction,
      DefaultValuedAttr<I64Attr, "-100">:$ignore_index,
      NN_NumClasses:$num_classes);
  let results = (outs NN_FloatTensor:$loss, NN_FloatTensor:$logits_grad);
  let assemblyFormat = "$logits `,` $targets `,` $grad attr-dict `:` "
                       "functional-type(operands, results)";
  let extraClassDeclaration = NN_ClassCount;
}

def NN_AddLayerNormOp : NN_PureOp<"add_layer_norm", [InferTypeOpAdaptor,
                                                     AttrSizedOperandSegments]> {
  let summary = "a residual nn.add and the nn.layer_norm of its sum in one pass";
  let description = [{
    `sum` = `lhs` + `rhs` (same type, no broadcasting) and `result` =
    nn.layer_norm(`sum`) with the optional `[D]` `weight` and `bias`. The
    train step forms it after it is built (fsdp-pipeline's
    `fuse-add-layer-norm`), so it has no VJP: the backward keeps reading
    `sum` through nn.layer_norm_grad. Each input is read once and both
    outputs written once; the statistics come from `sum` as stored, so the
    results are those of the two ops.

    ```mlir
    %s, %y = nn.add_layer_norm %a, %b weight %g bias %c {epsilon = 1.0e-05 : f64} : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$lhs, NN_FloatTensor:$rhs,
                       Optional<NN_FloatTensor>:$weight,
                       Optional<NN_FloatTensor>:$bias,
                       DefaultValuedAttr<NN_PositiveF64, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$sum, NN_FloatTensor:$result);
  let assemblyFormat = "$lhs `,` $rhs (`weight` $weight^)? (`bias` $bias^)? "
                       "attr-dict `:` functional-type(operands, results)";
}

include "fsdp/Dialect/NN/IR/NNRoutingOps.td"
include "fsdp/Dialect/NN/IR/NNCustomVJPOps.td"

def NN_AddLayerNormGradOp : NN_PureOp<"add_layer_norm_grad",
                                     [InferTypeOpAdaptor]> {
  let summary = "nn.layer_norm_grad with its input gradient summed with an "
                "addend";
  let description = [{
    The results of nn.layer_norm_grad (`grad`, `input`, the optional
    `weight`), except that `input_grad` is `addend` + the layer norm's
    input gradient: in a pre-norm residual block the gradient reaching the
    residual stream. The input gradient is rounded to the element type
    first, then added as nn.add does, so the results are those of
    nn.layer_norm_grad followed by nn.add. `addend` has the input's type
    (no broadcasting). The train step forms it after it is built
    (`fuse-add-layer-norm`), so it has no VJP.

    ```mlir
    %gx, %gw, %gb = nn.add_layer_norm_grad %g, %x, %r weight %w {epsilon = 1.0e-05 : f64} : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_FloatTensor:$addend,
                       Optional<NN_FloatTensor>:$weight,
                       DefaultValuedAttr<NN_PositiveF64, "1e-5">:$epsilon);
  let results = (outs NN_FloatTensor:$input_grad, NN_FloatTensor:$weight_grad,
                      NN_FloatTensor:$bias_grad);
  let assemblyFormat = "$grad `,` $input `,` $addend (`weight` $weight^)? "
                       "attr-dict `:` functional-type(operands, results)";
}

#endif // FSDP_DIALECT_NN_IR_NNOPS_TD
