//===- NNCustomVJPOps.td - a hand-written backward -------------*- tablegen -*-===//
//
// A torch.autograd.Function whose backward is not the derivative of its
// forward (a gradient reversal layer, a straight-through estimator, a
// clipped or approximate gradient): its forward's ops stay in the forward,
// and its backward is a region the autodiff inlines as the VJP. Included
// by NNOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_NN_IR_NNCUSTOMVJPOPS_TD
#define FSDP_DIALECT_NN_IR_NNCUSTOMVJPOPS_TD

def NN_CustomVJPOp : NN_PureOp<"custom_vjp", [IsolatedFromAbove,
    AttrSizedOperandSegments, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<DifferentiableOpInterface,
                              ["isDifferentiableOperand"]>,
    DeclareOpInterfaceMethods<StorageAliasOpInterface, ["isStorageRename"]>]> {
  let summary = "values whose gradient a hand-written backward gives "
                "(torch.autograd.Function)";
  let description = [{
    The results are `outputs`, the float values a torch.autograd.Function's
    forward computed from `inputs`; the gradient does not flow back through
    the ops computing `outputs` but through `backward`, as torch calls the
    Function's `backward(ctx, *grad_outputs)`. The region's block arguments
    are the `saved` tensors (what `ctx.save_for_backward` kept) and then one
    cotangent per result (zeros for a result that does not reach the loss,
    as torch materialises them); it yields the cotangent of each input, in
    its shape. The region computes in the dtypes it declares: the VJP casts
    what it reads and yields when mixed precision changed the forward's.
    fsdp-build-train-step inlines the region as the op's VJP and then
    replaces the op with its `outputs`; each result is its output's storage
    (a rename, as `stop_gradient`), so it would run nothing anyway. The backward's
    own ops are not differentiated (no double backward) and draw no random
    numbers.

    ```mlir
    // A gradient reversal layer: y = x, dx = -0.5 dy.
    %y = nn.custom_vjp %x inputs(%x : tensor<4x8xf32>) : tensor<4x8xf32> {
    ^bb0(%dy: tensor<4x8xf32>):
      %dx = nn.scale %dy {factor = -0.5 : f64} : tensor<4x8xf32>
      nn.yield %dx : tensor<4x8xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<NN_FloatTensor>:$outputs,
                       Variadic<NN_FloatTensor>:$inputs,
                       Variadic<NN_AnyTensor>:$saved);
  let results = (outs Variadic<NN_FloatTensor>:$results);
  let regions = (region SizedRegion<1>:$backward);
  let assemblyFormat = [{
    $outputs (`inputs` `(` $inputs^ `:` type($inputs) `)`)?
    (`saved` `(` $saved^ `:` type($saved) `)`)? attr-dict `:` type($outputs)
    $backward
  }];
  let hasRegionVerifier = 1;
}

def NN_YieldOp : NN_Op<"yield", [Pure, Terminator,
                                 HasParent<"CustomVJPOp">]> {
  let summary = "the cotangents of nn.custom_vjp's inputs";
  let arguments = (ins Variadic<NN_AnyTensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif // FSDP_DIALECT_NN_IR_NNCUSTOMVJPOPS_TD
