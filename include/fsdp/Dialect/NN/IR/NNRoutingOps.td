//===- NNRoutingOps.td - mixture-of-experts routing ops ------*- tablegen -*-===//
//
// What a Mixtral-style mixture of experts with static shapes needs beyond
// the dense ops: the router's top-k, the integer bookkeeping that sorts
// tokens by expert (sort, histc, floor_div, invert_permutation: no
// gradient) and the experts' GEMM over run-time row segments (torch's
// _grouped_mm, MegaBlocks) with its weight gradient. Included by NNOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_NN_IR_NNROUTINGOPS_TD
#define FSDP_DIALECT_NN_IR_NNROUTINGOPS_TD

def NN_TopkOp : NN_PureOp<"topk", [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "the k largest entries along the last dimension (torch.topk)";
  let description = [{
    `values` `[..., k]` holds the k largest entries of each row of `input`
    `[..., n]`, largest first, and `indices` (i64) their positions; a NaN
    counts as larger than any number (as torch's), and of equal entries the
    lower position comes first. The VJP scatters the values' cotangent back
    to the chosen positions (an nn.embedding_grad over the flattened rows);
    `indices` carry no gradient.

    ```mlir
    %v, %i = nn.topk %p {k = 2 : i64} : (tensor<16x4xf32>) -> (tensor<16x2xf32>, tensor<16x2xi64>)
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$k);
  let results = (outs NN_FloatTensor:$values, NN_IndexTensor:$indices);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def NN_SortOp : NN_PureOp<"sort", [InferTypeOpAdaptor]> {
  let summary = "stable ascending sort along the last dimension (torch.sort)";
  let description = [{
    `values` is each row of `input` sorted ascending, `indices` (i64) the
    positions they came from; equal entries keep their order (torch's
    `stable=True`, which its CPU kernel gives for the default too). Floats
    order NaN last. No gradient: the router sorts expert ids.

    ```mlir
    %s, %perm = nn.sort %ids : (tensor<32xi64>) -> (tensor<32xi64>, tensor<32xi64>)
    ```
  }];
  let arguments = (ins NN_AnyTensor:$input);
  let results = (outs NN_AnyTensor:$values, NN_IndexTensor:$indices);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
}

def NN_HistcOp : NN_PureOp<"histc", [InferTypeOpAdaptor, NN_Differentiable]> {
  let summary = "counts of the input's elements in equal-width bins (torch.histc)";
  let description = [{
    `bins` bins of equal width cover `[min, max]`; an element x in it counts
    in bin `floor((x - min) · bins / (max - min))`, x = max in the last;
    elements outside (and NaN) are not counted. The result `[bins]` has the
    input's element type, as torch's. The counts are piecewise constant, so
    the VJP gives the input none (a load-balancing loss counts the router's
    choices with it).

    ```mlir
    %counts = nn.histc %ids {bins = 4 : i64, min = 0.0, max = 3.0} : (tensor<32xf32>) -> tensor<4xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input,
                       ConfinedAttr<I64Attr, [IntPositive]>:$bins,
                       F64Attr:$min, F64Attr:$max);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_FloorDivOp : NN_PureOp<"floor_div", [InferTypeOpAdaptor]> {
  let summary = "integer division rounding down, with broadcasting (torch.floor_divide)";
  let description = [{
    `floor(lhs / rhs)` elementwise on i32 / i64 tensors broadcast as nn.add
    (the router's token of each sorted (token, slot) pair). A zero divisor
    gives 0 (torch raises). No gradient.

    ```mlir
    %tok = nn.floor_div %perm, %k : (tensor<32xi64>, tensor<i64>) -> tensor<32xi64>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$lhs, NN_IndexTensor:$rhs);
  let results = (outs NN_IndexTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def NN_InvertPermutationOp : NN_PureOp<"invert_permutation",
                                       [SameOperandsAndResultType,
                                        InferTypeOpInterface]> {
  let summary = "the inverse of a permutation: result[input[i]] = i";
  let description = [{
    `input` `[n]` (i32 / i64) must be a permutation of `[0, n)`: the
    sorted-by-expert rows go back to token order through it (what
    `empty_like(p).index_put_([p], arange(n))` computes). An entry outside
    `[0, n)` is a run-time error. No gradient.

    ```mlir
    %inv = nn.invert_permutation %perm : tensor<32xi64>
    ```
  }];
  let arguments = (ins NN_IndexTensor:$input);
  let results = (outs NN_IndexTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def NN_GroupedMatmulOp : NN_PureOp<"grouped_matmul",
                                   [NN_Differentiable, InferTypeOpAdaptor]> {
  let summary = "one GEMM per row segment (torch._grouped_mm)";
  let description = [{
    `input` `[R, K]`, `weight` `[G, K, N]` and `offsets` `[G]` (i32 / i64,
    non-decreasing, each at most R: the END of each group's segment, as a
    cumsum of the group sizes): rows `[offsets[g-1], offsets[g])` (from 0
    for g = 0) of the result `[R, N]` are those rows of `input` times
    `weight[g]`. Rows from `offsets[G-1]` on belong to no group and are 0
    (so they get no gradient). The offsets are run-time values (how many
    tokens each expert got); R, the total, is static. An offset past R is
    a run-time error; offsets out of order are one on the CPU and clamped
    into order on CUDA (which checks ranges only, on the device).
    The VJP: the input's cotangent is the same op on the weights' transpose
    and the weight's is nn.grouped_matmul_grad_weight; offsets have none.

    ```mlir
    %y = nn.grouped_matmul %x, %w, %offs : (tensor<32x32xf32>, tensor<4x32x128xf32>, tensor<4xi32>) -> tensor<32x128xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$input, NN_FloatTensor:$weight,
                       NN_IndexTensor:$offsets);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$input `,` $weight `,` $offsets attr-dict `:` "
                       "functional-type(operands, results)";
}

def NN_GroupedMatmulGradWeightOp : NN_PureOp<"grouped_matmul_grad_weight",
                                             [InferTypeOpAdaptor]> {
  let summary = "gradient of nn.grouped_matmul with respect to its weight";
  let description = [{
    `result[g] = input[seg g]ᵀ · grad[seg g]` `[G, K, N]` for the segments
    of nn.grouped_matmul (`input` `[R, K]`, `grad` `[R, N]`); a group with
    no rows gets zeros.

    ```mlir
    %gw = nn.grouped_matmul_grad_weight %g, %x, %offs : (tensor<32x128xf32>, tensor<32x32xf32>, tensor<4xi32>) -> tensor<4x32x128xf32>
    ```
  }];
  let arguments = (ins NN_FloatTensor:$grad, NN_FloatTensor:$input,
                       NN_IndexTensor:$offsets);
  let results = (outs NN_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input `,` $offsets attr-dict `:` "
                       "functional-type(operands, results)";
}

#endif // FSDP_DIALECT_NN_IR_NNROUTINGOPS_TD
