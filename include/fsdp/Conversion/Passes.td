//===- Passes.td - conversions to the runtime and LLVM --------*- tablegen -*-===//

#ifndef FSDP_CONVERSION_PASSES_TD
#define FSDP_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertFSDPToRTPass : Pass<"convert-fsdp-to-rt", "::mlir::ModuleOp"> {
  let summary = "Lower a scheduled train step to runtime calls with streams, "
                "events and a static memory plan";
  let description = [{
    Takes the output of `fsdp-pipeline` (a train step with unshard / wait /
    reshard / reduce_grads and the optimizer) and rewrites the step into a
    function of `rt` ops with the C ABI fsdp-run calls:

    ```mlir
    func.func @<model>_train_step(%ctx: !rt.context, %persistent: !rt.buffer,
        %compute: !rt.stream, %all_gather: !rt.stream,
        %reduce_scatter: !rt.stream, %shard: !rt.comm, %replicate: !rt.comm,
        %step_count: i64)
    ```

    **Streams.** All-gathers (`fsdp.unshard`) run on the all-gather stream,
    gradient reductions (`fsdp.reduce_grads`: reduce-scatter, then the
    replicate all-reduce for hybrid sharding, or one all-reduce for no-shard)
    and other collectives on the reduce-scatter stream, everything else on
    the compute stream. A stream waits for an event recorded on another
    stream right after the op producing a value it reads (`fsdp.wait` is
    where compute waits for a gather); a buffer read on several streams is
    freed on the stream of its last reader after waiting for the others'
    last reads.

    **Memory.** Flat parameter shards, optimizer state, inputs, constants
    and the loss live in the persistent buffer the runner allocates at arena
    offset 0 (their offsets are in the program description). Every other
    tensor gets an offset from a liveness-based static plan (best fit,
    largest first, 64-byte aligned, as the runtime's arena): `rt.alloc_at`
    when it is defined (a gathered unit when its all-gather is issued) and a
    stream-ordered `rt.free` after its last use (a gathered unit at its
    `fsdp.reshard`). Views and reshapes alias their source; optimizer steps
    update the shards in place. Nothing is allocated inside a step that the
    plan did not place.

    **Fused optimizer.** With `fused-optimizer`, the SGD, AdamW and Lion
    updates that follow one another (the optimizer step after the
    backward) become one `rt.call @<optimizer>_multi_step` for each set of
    them, or of their parameter groups' segments, with the same gradient
    dtype, hyperparameters and skip flag: one launch for every unit's shard
    instead of one per flat parameter or segment, the same bits.

    **Program description.** The module gets `fsdp.program`, a JSON string
    with what the runner needs (units, parameter names, shapes and
    initializers, persistent offsets, inputs, the loss, mesh, the plan's
    size) and the pre-launch report (`fsdp-report`'s text plus the plan),
    and the `fsdp.model` is removed.

    **Learning-rate schedule.** The options below are recorded in the
    description; fsdp-run evaluates the schedule before each step (its
    `--lr-schedule`, `--warmup-steps`, `--decay-steps` and `--min-lr-ratio`
    replace them) and the optimizer calls apply the compiled lr times its
    factor, as LambdaLR does: linear warmup (step + 1) / (warmup + 1), then
    constant, or a cosine or linear decay over `decay-steps` (0: to the
    run's last step) down to `min-lr-ratio` of the peak.
  }];
  let options = [
    Option<"lrSchedule", "lr-schedule", "std::string", /*default=*/"\"constant\"",
           "constant | cosine | linear">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "Linear warmup of the learning rate, in steps">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "Steps of the decay after the warmup (0: to the run's end)">,
    Option<"minLrRatio", "min-lr-ratio", "double", /*default=*/"0.0",
           "The decay's floor, a fraction of the peak learning rate">,
    Option<"fusedOptimizer", "fused-optimizer", "bool", /*default=*/"false",
           "Each run of SGD / AdamW / Lion updates as one multi-tensor "
           "call per set of equal hyperparameters (torch.optim's "
           "fused=True; off until measured on a GPU)">,
    Option<"machine", "machine", "std::string", /*default=*/"\"ci-cpu\"",
           "The machine whose rates the embedded report's predicted step "
           "time uses (fsdp-report's machine): ci-cpu | h100">,
  ];
  let dependentDialects = ["::mlir::rt::RTDialect", "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect"];
}

def ConvertRTToLLVMPass : Pass<"convert-rt-to-llvm", "::mlir::ModuleOp"> {
  let summary = "Turn rt ops into calls of the runtime's C ABI with status checks";
  let description = [{
    Every function of `rt` ops becomes an `llvm.func` returning i32: handles
    become i64, each op a call of its `fsdprt_*` function, and each call is
    followed by a branch that returns its status if it is not FSDPRT_OK.
    `rt.array` becomes a stack array, `rt.copy_constant` a private constant
    global. Steps must be straight-line (one block), as convert-fsdp-to-rt
    produces them.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // FSDP_CONVERSION_PASSES_TD
