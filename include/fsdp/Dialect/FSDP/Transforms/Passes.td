//===- Passes.td - fsdp dialect passes -----------------------*- tablegen -*-===//

#ifndef FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_TD
#define FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def FSDPModelSummaryPass : Pass<"fsdp-model-summary", "::mlir::ModuleOp"> {
  let summary = "Print each model's module tree with parameter counts and bytes";
  let description = [{
    For every `fsdp.model`, prints one row per module (pre-order, children in
    definition order): its fully-qualified name, kind, whether it is an FSDP
    unit (the root always is), the size of a unit's flat parameter ("flat":
    the parameters it owns, tied ones included, before padding), the
    parameters the module declares itself ("own") and those of its whole
    subtree, their bytes, and its buffers. These are the numbers PyTorch's
    size_based_auto_wrap_policy looks at (`sum(p.numel() for p in
    module.parameters())`). The IR is not changed.

    ```
    $ fsdp-opt nested_wrapped.mlir --fsdp-model-summary -o /dev/null
    model nested_wrapped: 496 parameters (496 trainable), 1984 bytes; 0 buffer elements (0 bytes); 4 FSDP units
    module      kind                 unit  flat  own  subtree  bytes  buffers
    (root)      NestedWrappedModule  yes     76    0      496   1984        0
    module      Sequential                         0      496   1984        0
    module.0    Linear                            36       36    144        0
    ...
    ```

    With `json=true` it prints one JSON object per model instead:
    `{"model": ..., "params": ..., "modules": [{"name", "kind", "unit",
    "flat_params", "own_params", "subtree_params", "own_bytes", "subtree_bytes",
    "buffers", "buffer_bytes", "trainable_params"}, ...]}`.
  }];
  let options = [
    Option<"json", "json", "bool", /*default=*/"false",
           "Print JSON instead of a text table">,
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "File to write the summary to ('-' for stdout)">,
  ];
}

#endif // FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_TD
