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

def FSDPAutoWrapPass : Pass<"fsdp-auto-wrap", "::mlir::ModuleOp"> {
  let summary = "Choose the FSDP units of each model (auto_wrap_policy)";
  let description = [{
    Marks modules as FSDP units (`unit`) the way PyTorch's auto-wrap
    policies choose which submodules to wrap in FullyShardedDataParallel:

    - `size`: size_based_auto_wrap_policy with `min-params`. Bottom-up, a
      module is wrapped when the parameters of its subtree that no wrapped
      descendant already holds reach the threshold; a module whose whole
      subtree is below it is not even recursed into; kinds in
      `force-leaf-kinds` (default: MultiheadAttention) are not recursed
      into (nor wrapped: their parameters stay with an ancestor), kinds in
      `exclude-kinds` (default: ModuleList, ModuleDict) are never wrapped.
      The root is not wrapped by the policy; it is a unit anyway.
    - `module-kind`: ModuleWrapPolicy / transformer_auto_wrap_policy: every
      module whose `kind` is listed in `kinds`.
    - `always`: always_wrap_policy: every module, parameter-less containers
      included.
    - `none`: keep the units marked in the IR (manual `wrap()`).

    The root is always a unit (the outer FullyShardedDataParallel). A
    parameter belongs to its nearest enclosing unit; one read by several
    modules (tied weights) to the lowest unit enclosing all its readers
    (`fsdp-model-summary` shows each unit's flat parameter). As in PyTorch,
    auto-wrapping a model that already has units below the root is an error;
    a listed kind that matches no module is a warning.

    ```mlir
    // fsdp-opt --fsdp-auto-wrap="policy=module-kind kinds=Block"
    fsdp.module @"0" kind "Block" {      =>   fsdp.module @"0" kind "Block" unit {
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"\"none\"",
           "size | module-kind | always | none">,
    Option<"minParams", "min-params", "int64_t", /*default=*/"100000000",
           "size policy: minimum number of unwrapped parameters (PyTorch's "
           "min_num_params, default 1e8)">,
    ListOption<"kinds", "kinds", "std::string",
               "module-kind policy: the module kinds to wrap">,
    ListOption<"forceLeafKinds", "force-leaf-kinds", "std::string",
               "size policy: kinds not recursed into (default: "
               "MultiheadAttention)">,
    ListOption<"excludeKinds", "exclude-kinds", "std::string",
               "size policy: kinds never wrapped (default: ModuleList, "
               "ModuleDict)">,
  ];
}

def FSDPPadVocabPass : Pass<"fsdp-pad-vocab", "::mlir::ModuleOp"> {
  let summary = "Pad a language model head's vocabulary to an aligned width";
  let description = [{
    A vocabulary that is not a multiple of 8 (GPT-2's 50257) misaligns the
    lm head's GEMMs: cuBLAS runs them several times slower, and a backend
    padding them at run time (inductor's pad_mm) copies the logits, the
    step's largest tensor, at every call. This pass pads at compile time,
    as nanoGPT's 50304 does by hand: in each model's forwards, an
    `nn.linear` (or `nn.matmul` by a matrix) whose logits reach an
    `nn.cross_entropy` (through reshapes, casts, slices of other
    dimensions and the calls of a module returning them) gets its weight zero-padded (`nn.pad`; a bias too) to the
    next multiple of `multiple` classes; its logits are that wide, and the
    losses get `num_classes`, so the padding columns take no part in them
    and their gradient is zero. Any other use of the logits (a forward's
    returned logits) reads them sliced back to the vocabulary. Parameters,
    checkpoints and the loss are unchanged; the weight's gradient is the
    padded one sliced back (nn.pad's VJP). Heads with fewer than
    `min-classes` classes are left alone: their logits are small, and the
    padding could be a large fraction of them.
  }];
  let dependentDialects = ["::mlir::nn::NNDialect"];
  let options = [
    Option<"multiple", "multiple", "int64_t", /*default=*/"64",
           "Pad the vocabulary to a multiple of this">,
    Option<"minClasses", "min-classes", "int64_t", /*default=*/"4096",
           "Leave heads with fewer classes alone">,
  ];
}

def FSDPPackAttentionPass : Pass<"fsdp-pack-attention", "::mlir::ModuleOp"> {
  let summary = "Attention on one packed q / k / v projection, without copies";
  let description = [{
    In each model's forwards, an `nn.attention` (no bias) whose query, key
    and value are the three results of one `nn.split` along the last
    dimension, read by nothing else — GPT-2's `c_attn` output split into
    q, k, v — becomes `nn.packed_attention` of the split's input: the
    kernels read the three slices in place (cuDNN takes token-strided
    tensors; the other kernels copy), and the backward writes the three
    gradients into one tensor instead of concatenating them. The split is
    erased, and with it unused nn ops of the forward. Numerics are unchanged.
  }];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def FSDPKeepAttentionStatsPass
    : Pass<"fsdp-keep-attention-stats", "::mlir::func::FuncOp"> {
  let summary = "The backward of attention reads the forward's softmax "
                "statistics";
  let description = [{
    In a train step, each `nn.packed_attention_grad` or `nn.attention_grad`
    without `saved` gets the result and softmax statistics of its forward:
    the last `nn.packed_attention` / `nn.attention` before it of the same
    inputs and attributes (the step's own forward, or its recomputation
    under activation checkpointing). The forward becomes `keep_stats` (its
    second result, f32 `[B, H, Tq]`, one log-sum-exp per query row) and the
    backward takes both, as FlashAttention and PyTorch's SDPA do. cuDNN's backward then
    no longer runs the forward again; the CPU and cuBLAS backward skip
    their row maxima and sums. The step keeps the forward's result alive
    until the backward (the output projection's backward needs it anyway)
    and `4·B·H·Tq` bytes per attention. Gradients are unchanged, bit for
    bit.
  }];
  let dependentDialects = ["::mlir::nn::NNDialect"];
}

def FSDPBuildTrainStepPass : Pass<"fsdp-build-train-step", "::mlir::ModuleOp"> {
  let summary = "Build one training step: forward, reverse-mode backward, optimizer";
  let description = [{
    For each `fsdp.model @M`, adds `func.func @M_train_step` computing one
    optimizer step:

    1. the root forward is inlined, module calls included, once per
       micro-batch (`grad-accum-steps`), with the micro-batch's data as
       arguments;
    2. the backward is generated by reverse-mode autodiff through
       `DifferentiableOpInterface`: cotangents of a value used several times
       are summed (tied parameters included); parameters with
       `requires_grad = false` get no gradient, no optimizer state and no
       update;
    3. gradients are summed over micro-batches, each micro-batch's loss being
       scaled by 1/grad-accum-steps (so a mean loss over the global batch
       gets the full-batch gradient), clipped by global norm
       (`clip-grad-norm`), and applied by `fsdp.sgd_step` or
       `fsdp.adamw_step` (Adam: with `l2_weight_decay`) with PyTorch's
       semantics.

    The function is self-describing for the runtime: arguments are every
    parameter (definition order, `{fsdp.param = "module.0.weight"}`), the
    optimizer state of each trainable one (`fsdp.state`), the step count
    (`fsdp.step_count`), every buffer
    (`fsdp.buffer`) and each micro-batch's inputs (`fsdp.input`,
    `fsdp.micro_batch`); results are the mean loss (`fsdp.loss`), the total
    gradient norm when clipping (`fsdp.grad_norm`), then the new trainable
    parameters, state, step count and buffers.

    Unit boundaries stay visible: every generated op carries
    `fsdp.unit` (the FQN of the FSDP unit it belongs to, "" for the root)
    and `fsdp.phase` (`#fsdp<phase forward>`, `backward`, `optimizer`), and, with several
    micro-batches, `fsdp.micro_batch`; the adds that sum a gradient over
    micro-batches carry `fsdp.grad_accumulation`. `no-sync` records (as
    `fsdp.grad_sync = #fsdp<grad_sync last_micro_batch>` on the function) that
    the unsharded sum is to be reduced once, after the last micro-batch, like
    PyTorch's no_sync(); by default fsdp-shard reduces every micro-batch's
    gradient on its own and sums the shards.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::fsdp::FSDPDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::nn::NNDialect"];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd | adam | adamw | lion | adafactor">,
    Option<"lr", "lr", "double", /*default=*/"-1.0",
           "Learning rate (default: 1e-3; 1e-4 for lion, 1e-2 for "
           "adafactor)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0",
           "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (default: 0.01 for adamw, else 0, as PyTorch; "
           "adam adds it to the gradient, adamw decays the parameter)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "Adam / AdamW / Lion beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"-1.0",
           "Adam / AdamW / Lion beta2 (default: 0.999; 0.99 for lion)">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam / AdamW eps">,
    Option<"beta2Decay", "beta2-decay", "double", /*default=*/"-0.8",
           "Adafactor beta2_decay: beta2 of step t is 1 - t^beta2_decay">,
    Option<"eps1", "eps1", "double", /*default=*/"-1.0",
           "Adafactor eps[0], the smallest second moment (default: f32 "
           "machine epsilon, as torch's None)">,
    Option<"eps2", "eps2", "double", /*default=*/"1e-3",
           "Adafactor eps[1], the smallest parameter RMS">,
    Option<"clipThreshold", "clip-threshold", "double", /*default=*/"1.0",
           "Adafactor d: updates are scaled down to this RMS">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0.0",
           "Clip gradients to this global norm (0: no clipping)">,
    Option<"clipNormType", "clip-norm-type", "double", /*default=*/"2.0",
           "clip_grad_norm_'s norm_type: p > 0, or inf (the largest "
           "|gradient element|)">,
    Option<"gradAccumSteps", "grad-accum-steps", "int64_t", /*default=*/"1",
           "Micro-batches per optimizer step">,
    Option<"noSync", "no-sync", "bool", /*default=*/"false",
           "Reduce gradients only after the last micro-batch">,
    ListOption<"paramGroups", "param-groups", "std::string",
               "Parameter groups, first match wins: SELECTOR:SETTING[:...] "
               "with SELECTOR ndim<K, ndim>=K, kind=CLASS or a name glob and "
               "SETTING weight-decay=X, lr-scale=X or the optimizer's beta1, "
               "beta2, eps (adam, adamw) or momentum, dampening (sgd)">,
    Option<"noDecay1d", "no-decay-1d", "bool", /*default=*/"false",
           "No weight decay for parameters of fewer than 2 dimensions "
           "(biases, norm weights), as nanoGPT">,
    Option<"lossScale", "loss-scale", "std::string", /*default=*/"\"none\"",
           "none | dynamic: GradScaler's dynamic loss scaling (for f16)">,
    Option<"mode", "mode", "std::string", /*default=*/"\"train\"",
           "train | eval: eval builds the forward alone (model.eval() under "
           "torch.no_grad(): dropout off, BatchNorm on its running "
           "statistics; no gradient, optimizer or state)">,
    Option<"fuseAddLayerNorm", "fuse-add-layer-norm", "bool",
           /*default=*/"false",
           "A residual nn.add and the nn.layer_norm of its sum become one "
           "nn.add_layer_norm once the step is built, and in the backward "
           "the norm's input gradient and the residual gradient's nn.add "
           "one nn.add_layer_norm_grad (off until a GPU run measures it)">,
    Option<"fuseBiasGelu", "fuse-bias-gelu", "bool", /*default=*/"false",
           "A linear layer and the tanh nn.gelu of its result become one "
           "nn.linear_gelu, and the linear_grad feeding its nn.gelu_grad one "
           "nn.linear_gelu_grad (cuBLASLt's GELU epilogues; off until a GPU "
           "run measures it)">,
  ];
}

def FSDPFitMemoryBudgetPass
    : Pass<"fsdp-fit-memory-budget", "::mlir::ModuleOp"> {
  let summary = "Choose what to recompute so that the planned peak fits a "
                "byte budget";
  let description = [{
    `memory-budget=<bytes>` of `fsdp-pipeline`: per rank, device memory,
    compared with the planned peak fsdp-report prints (analyzeStep), or,
    with `arena-evaluation` (fsdp-pipeline's `lower=true`), with the arena
    plan of the lowered program, which the runtime allocates. Runs
    after fsdp-build-train-step and before fsdp-checkpoint-activations, and
    marks units `#fsdp.unit<activation_checkpointing = selective | true>`.

    A choice is judged by running `evaluation` (the rest of the pipeline up
    to the report: checkpointing, sharding, collectives, prefetch, offload)
    on a clone of the module and computing its peak and its predicted
    compute time. Starting from no checkpointing, while the peak is over
    the budget, the single (unit, policy) change with the most peak bytes
    saved per predicted second of recompute is applied (lazy greedy:
    scores from earlier rounds are re-evaluated only when they lead, so a
    round costs at most units x 2 evaluations); when that change fits,
    the cheapest change that fits is taken instead. Units marked by hand
    keep their marks. When no change lowers the peak any more, every unit
    recomputed whole is tried; if that is still over the budget, it is an
    error naming the smallest peak reached.

    An eval step (mode=eval, generation's decode step) has no backward;
    there the budget chooses whether its weights stay whole on every rank
    across steps: when the step laid out no-shard fits, it is marked
    `fsdp.keep_weights_whole` (fsdp-shard then lays it out no-shard: no
    collective per step, the weights gathered once per request by the
    runner), otherwise it keeps the strategy's sharding and gathers at
    every step; when neither fits, it is an error naming the smaller peak.

    ```mlir
    // memory-budget=18MiB on a 4-block GPT whose plain peak is 24 MB:
    fsdp.module @"0" kind "Block" unit<activation_checkpointing = selective>
    fsdp.module @"1" kind "Block" unit<activation_checkpointing = true>
    ```
  }];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
  let options = [
    Option<"budget", "budget", "std::string", /*default=*/"\"\"",
           "Bytes per rank: an integer, or with a KiB / MiB / GiB suffix "
           "(e.g. 24MiB, 1.5GiB)">,
    Option<"evaluation", "evaluation", "std::string",
           /*default=*/"\"builtin.module(fsdp-checkpoint-activations,"
           "fsdp-shard,fsdp-insert-collectives,fsdp-prefetch)\"",
           "The passes (anchored on builtin.module) that turn a candidate "
           "into the sharded step whose peak is measured">,
    Option<"arenaEvaluation", "arena-evaluation", "std::string",
           /*default=*/"\"\"",
           "For a lowered program: the lowering (anchored on "
           "builtin.module) run after `evaluation`; the budget then bounds "
           "the arena plan the runtime allocates (empty: the planned peak)">,
    ListOption<"conflictingOptions", "conflicting-options", "std::string",
               "Pipeline options given beside the budget that also choose "
               "what to recompute (an error naming them)">,
    Option<"report", "report", "bool", /*default=*/"false",
           "Print the budget, the choice, its peak and recompute time">,
    Option<"machine", "machine", "std::string", /*default=*/"\"ci-cpu\"",
           "The machine whose rates predict the recompute time">,
  ];
}

def FSDPCheckpointActivationsPass
    : Pass<"fsdp-checkpoint-activations", "::mlir::ModuleOp"> {
  let summary = "Recompute checkpointed units' forward in the backward";
  let description = [{
    Activation checkpointing, as PyTorch's `checkpoint_wrapper` around the
    wrapped modules (`apply_activation_checkpointing`): for every unit whose
    module kind is in `kinds` (or every unit with `kinds=all`), and every
    unit marked `#fsdp.unit<activation_checkpointing = true>`, the forward
    values its backward reads are no longer kept from the forward. Just
    before the unit's backward starts (per micro-batch), the forward ops
    that compute them are cloned (phase backward) and the backward reads the
    clones, so the forward's values die where the forward is done with them.
    The unit's inputs stay saved, as `torch.utils.checkpoint` saves them.
    Once sharded, fsdp-insert-collectives gathers the unit again for the
    recompute when it was resharded after the forward. The recompute runs
    the same kernels on the same values (dropout masks are a function of the
    site and the step), so results are bit-identical. Runs after
    fsdp-build-train-step and before fsdp-shard.

    `policy=selective` (or `#fsdp.unit<activation_checkpointing =
    selective>` on a unit, whose own setting wins over `policy`) is
    PyTorch's selective activation checkpointing: the results of the
    FLOP-heavy ops (`nn.linear`, `nn.matmul`, `nn.attention`,
    `nn.packed_attention` with its softmax statistics) are kept from the
    forward, and only the cheap ops (norms, activations, element-wise ops,
    reshapes, dropout) are recomputed, from those saved results and the
    unit's inputs:

    ```mlir
    // Forward y = linear(x, w1), h = relu(y), z = linear(h, w2); the
    // backward reads h (w2's gradient) and y (relu's gradient).
    %y = nn.linear %x, %w1 {phase forward}
    %h = nn.relu %y {phase forward}
    ...
    // Selective: relu again on the kept y (policy unit: y recomputed too).
    %h2 = nn.relu %y {phase backward}
    %dw2 = nn.matmul %dz, %h2 {transpose_lhs, phase backward}
    %dy = nn.relu_grad %dh, %y {phase backward}
    ```
  }];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
  let options = [
    ListOption<"kinds", "kinds", "std::string",
               "Module kinds of the units to checkpoint (e.g. Block), or all">,
    Option<"policy", "policy", "std::string", /*default=*/"\"unit\"",
           "What the units `kinds` names recompute: unit (the whole forward) "
           "or selective (all but matmuls and attention)">,
  ];
}

def FSDPShardPass : Pass<"fsdp-shard", "::mlir::ModuleOp"> {
  let summary = "Shard each unit's parameters into one flat parameter per rank";
  let description = [{
    Rewrites every `@<model>_train_step` (from fsdp-build-train-step) for
    `world-size` ranks. Each FSDP unit's trainable parameters become one flat
    parameter (definition order, uniform dtype), padded to a multiple of the
    shard group size S and split into S equal contiguous chunks, as
    FlatParameter does: rank r holds chunk r (trailing ranks may hold only
    padding). The step then takes, per unit, the local shard
    (`{fsdp.flat_param = "module.1", fsdp.params = [...], fsdp.offsets =
    [...], fsdp.flat_numel = N}`) and the optimizer state of that shard
    (`fsdp.flat_state`), instead of the original parameters.

    Inside, each unit's shard is gathered (`fsdp.unshard` + `fsdp.wait`,
    none when S = 1) and the original parameters are `fsdp.view`s of the
    full flat parameter; the unit's gradients are `fsdp.flatten`ed and
    reduced to the local shard (`fsdp.reduce_grads`, sum with FSDP1's
    pre/post divide factors of the data-parallel world size); clipping sums
    the local shards' squares and all-reduces them over the shard group
    (replicas hold the same shards); the optimizer updates
    shards only. This schedule is correct but naive (every unit gathered at
    the start and kept): `fsdp-insert-collectives` places the collectives
    as PyTorch does.

    Strategies: `full-shard` (ZeRO-3, mesh <shard = W>), `shard-grad-op`
    (ZeRO-2: the same mesh, parameters kept between forward and backward),
    `no-shard` (DDP: <replicate = W, shard = 1>, gradients all-reduced),
    `hybrid-shard` (<replicate = W/S, shard = S> with S =
    `shard-group-size`), `hybrid-shard-zero2` (the same mesh, parameters
    kept between forward and backward as under shard-grad-op: FSDP1's
    `_HYBRID_SHARD_ZERO2`). A unit's frozen parameters (`requires_grad =
    false`) form a second flat parameter (`fsdp.frozen`), sharded and
    gathered with the unit's trainable one but never reduced nor updated:
    no gradient, reduce-scatter or optimizer state for them.
  }];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect",
                           "::mlir::nn::NNDialect"];
  let options = [
    Option<"worldSize", "world-size", "int64_t", /*default=*/"1",
           "Number of ranks">,
    Option<"strategy", "strategy", "std::string", /*default=*/"\"full-shard\"",
           "full-shard | shard-grad-op | no-shard | hybrid-shard | "
           "hybrid-shard-zero2">,
    Option<"shardGroupSize", "shard-group-size", "int64_t", /*default=*/"0",
           "hybrid-shard(-zero2): ranks per shard group (must divide "
           "world-size)">,
  ];
}

def FSDPInsertCollectivesPass : Pass<"fsdp-insert-collectives", "::mlir::ModuleOp"> {
  let summary = "Place each unit's unshard, reshard and gradient reduction as PyTorch FSDP does";
  let description = [{
    On a sharded train step: each unit's all-gather moves to just before its
    first use in the forward; for `full-shard` and `hybrid-shard` it is
    freed (`fsdp.reshard`) after its last forward use and gathered again
    before its first backward use — except the root, kept for the backward
    as PyTorch does, unless `reshard-root-after-forward`, and except units
    marked `unit<reshard_after_forward = false>`; `shard-grad-op` and
    `hybrid-shard-zero2` keep every unit from forward to backward. `unit<reshard_after_forward = N>` (N
    dividing the shard group; one N per step) keeps this rank's 1/N of the
    unit after the forward (`fsdp.post_forward_shard`) and gathers it back
    over its group of N consecutive ranks for the backward. The gradient
    reduction of a unit moves to
    just after its last gradient is computed, and the unit is freed after
    its last use in the backward.

    With several micro-batches, `reshard-after-backward=false` (FSDP2's
    `set_reshard_after_backward(False)`, FSDP1's `no_sync()` under
    SHARD_GRAD_OP) keeps a unit gathered from one micro-batch's backward to
    the next micro-batch's forward instead of freeing and gathering it
    again: a unit kept from forward to backward is gathered once per step.
  }];
  let options = [
    Option<"reshardRootAfterForward", "reshard-root-after-forward", "bool",
           /*default=*/"false", "Free the root unit after the forward too">,
    Option<"reshardAfterBackward", "reshard-after-backward", "bool",
           /*default=*/"true",
           "Free each unit after a micro-batch's backward (false: keep it "
           "gathered for the next micro-batch)">,
  ];
}

def FSDPPrefetchPass : Pass<"fsdp-prefetch", "::mlir::ModuleOp"> {
  let summary = "Issue all-gathers early so that they overlap compute";
  let description = [{
    Moves asynchronous `fsdp.unshard`s earlier in a scheduled train step
    (after `fsdp-insert-collectives`); each `fsdp.wait` stays just before
    the first use, so the distance between the two is the overlap:

    - `forward-prefetch`: the next unit's forward all-gather is issued right
      after the current unit's gather completes, before its compute
      (FSDP1's forward_prefetch).
    - `backward-prefetch=pre`: the next unit's (in backward order) all-gather
      is issued before the current unit's gradient computation
      (BACKWARD_PRE); `post`: after the current unit's gradient computation
      and before its gradient reduction (BACKWARD_POST); `none`: no backward
      prefetch.
    - `limit-all-gathers` (default 2, 0 = unlimited): an all-gather is never
      issued while that many gathered units are waiting to be freed, as
      FSDP1's rate limiter does; units kept across phases (the root, and
      every unit under shard-grad-op) do not count. A prefetch that would
      exceed the limit is issued at the first point where it does not.
    - A unit's `forward_prefetch` / `backward_prefetch` lists
      (`#fsdp.unit<forward_prefetch = ["h.2", "h.3"]>`, FSDP2's
      `set_modules_to_forward_prefetch` / `set_modules_to_backward_prefetch`):
      once the unit's own gather is done, the listed units' gathers of the
      same micro-batch are issued, in list order, after the options above
      (and under the same limit); one already issued, or not gathered in
      that phase, is left as it is. A listed name that is not a unit the
      step gathers is an error.

    The schedule stays one straight-line sequence, so every rank issues the
    same collectives in the same order.
  }];
  let options = [
    Option<"forwardPrefetch", "forward-prefetch", "bool", /*default=*/"false",
           "Prefetch the next unit's all-gather in the forward">,
    Option<"backwardPrefetch", "backward-prefetch", "std::string",
           /*default=*/"\"pre\"", "none | pre | post (PyTorch's default: pre)">,
    Option<"limitAllGathers", "limit-all-gathers", "int64_t", /*default=*/"2",
           "Gathered units awaiting their free before issuing another (0: no limit)">,
  ];
}

def FSDPCpuOffloadPass : Pass<"fsdp-cpu-offload", "::mlir::ModuleOp"> {
  let summary = "Hold sharded parameters, gradients and optimizer state in host memory (CPUOffload)";
  let description = [{
    PyTorch FSDP's `CPUOffload(offload_params=True)` / FSDP2's
    `CPUOffloadPolicy` on a scheduled step (after `fsdp-prefetch`): each
    unit's sharded parameter and its optimizer state live in (pinned) host
    memory; every device read of a shard (its all-gather, a mixed-precision
    cast) is preceded by an `fsdp.to_device` copy on the host-to-device
    stream, placed where the read was scheduled, so it is prefetched with
    the all-gather; each device value the optimizer reads (the reduced
    gradient shard, the found-inf flag) is copied to the host by an
    `fsdp.to_host` right after it is computed, on the device-to-host
    stream; and the optimizer updates run on the host stream, in place in
    host memory. The step is marked `fsdp.cpu_offload`. The device then
    holds no sharded parameter, gradient shard or optimizer state between
    steps; fsdp-report prints host memory separately.
  }];
}

def FSDPReportPass : Pass<"fsdp-report", "::mlir::ModuleOp"> {
  let summary = "Print the per-rank peak memory and every collective of a step";
  let description = [{
    For each scheduled train step, prints without changing the IR:

    - the peak memory of a rank, from a liveness walk of the step in
      program order, and what is live at the peak: sharded parameters,
      optimizer state, gradients (flat, reduced, and parameter gradients
      waiting to be flattened), unsharded parameters (from `fsdp.unshard`
      to `fsdp.reshard`), activations saved for the backward (forward
      values used by the backward), transient values, and inputs and
      buffers. Views and reshapes alias their source; optimizer updates are
      in place. Every rank runs the same program on equal-sized shards, so
      the estimate holds for each rank;
    - every collective in issue order: kind, unit, phase, dtype, elements,
      bytes and the stream it runs on (`all-gather`, `reduce-scatter`,
      `all-reduce`), with counts per kind and phase. A reduce_grads is a
      reduce-scatter in the shard group (when it has more than one rank)
      and an all-reduce across replicas (when there are several).

    - the predicted step time: the step simulated on the compute,
      all-gather and reduce-scatter streams in program order with a
      first-order cost model (GEMM FLOPs at a sustained rate, other kernels'
      bytes at a memory bandwidth, ring collectives' bytes at a link
      bandwidth plus a latency per ring step, a fixed cost per call), split
      into compute and the communication the compute stream waits for.
      `machine` names the rates: `ci-cpu` (the default: 2 ranks sharing the
      2-vCPU CI machine with Gloo over loopback; bench/step_time_model.py
      measures them and how close the prediction comes) or `h100` (one H100
      SXM per rank on NVLink 4; docs/GPU-Results.md compares its prediction
      with a measured GPT-2 124M step); each rate option given replaces the
      machine's.

    It also checks that the schedule is one straight-line sequence (no
    collective inside a region), so that every rank issues the same
    collectives in the same order.
  }];
  let options = [
    Option<"json", "json", "bool", /*default=*/"false",
           "Print JSON instead of text">,
    Option<"output", "output", "std::string", /*default=*/"\"-\"",
           "File to write the report to ('-' for stdout)">,
    Option<"machine", "machine", "std::string", /*default=*/"\"ci-cpu\"",
           "The machine whose rates the prediction uses: ci-cpu | h100">,
    Option<"gemmGflops", "gemm-gflops", "double", /*default=*/"-1",
           "Sustained GEMM rate per rank, GFLOP/s (-1: the machine's)">,
    Option<"gemmGflops16", "gemm-gflops-16bit", "double", /*default=*/"-1",
           "Sustained rate of bf16 / f16 GEMMs per rank, GFLOP/s (0: "
           "gemm-gflops; -1: the machine's)">,
    Option<"memoryGBps", "memory-gbps", "double", /*default=*/"-1",
           "Memory bandwidth of the other kernels per rank, GB/s (-1: the "
           "machine's)">,
    Option<"linkGBps", "link-gbps", "double", /*default=*/"-1",
           "Collective bus bandwidth per rank, GB/s (-1: the machine's)">,
    Option<"linkLatencyUs", "link-latency-us", "double", /*default=*/"-1",
           "Latency of one ring step of a collective, microseconds (-1: the "
           "machine's)">,
    Option<"opOverheadUs", "op-overhead-us", "double", /*default=*/"-1",
           "Fixed cost of every kernel or collective call, microseconds (-1: "
           "the machine's)">,
    Option<"hostLinkGBps", "host-link-gbps", "double", /*default=*/"-1",
           "CPU offload's host-device copy bandwidth per rank, GB/s (0: "
           "memory-gbps; -1: the machine's)">,
  ];
}

def FSDPMixedPrecisionPass : Pass<"fsdp-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Choose the dtypes of compute, gathers and gradient reduction";
  let description = [{
    FSDP's MixedPrecision: records on each `fsdp.model` (as
    `fsdp.mixed_precision`) the dtypes that the later passes apply; run it
    before `fsdp-build-train-step`.

    - `param-dtype`: parameters are cast to it for the forward and backward
      (the master copy, its gradient and the optimizer state stay in their
      own dtype, f32); the root's floating-point inputs are cast too. The
      sharded step casts the local shard before the all-gather, so the
      gather moves half the bytes with bf16/f16.
    - `reduce-dtype` (default: param-dtype, as PyTorch): the dtype gradients
      are reduce-scattered / all-reduced in; the reduced shard is cast back
      to the parameter's dtype for the optimizer.
    - `buffer-dtype` (default: unchanged): floating-point buffers are held
      in it for the whole run (the step's buffer arguments and results),
      as FSDP casts them once and keeps them.
    - `keep-low-precision-grads`: the optimizer receives the gradients in
      the reduce dtype instead of cast back to the parameters' dtype.

    Collectives carry their dtype, so a mismatch between what is gathered or
    reduced and what a collective declares is a verifier error.
  }];
  let dependentDialects = ["::mlir::fsdp::FSDPDialect"];
  let options = [
    Option<"paramDtype", "param-dtype", "std::string", /*default=*/"\"bf16\"",
           "f32 | bf16 | f16">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"\"",
           "f32 | bf16 | f16 (default: param-dtype)">,
    Option<"bufferDtype", "buffer-dtype", "std::string", /*default=*/"\"\"",
           "f32 | bf16 | f16 (default: buffers keep their dtype)">,
    Option<"keepLowPrecisionGrads", "keep-low-precision-grads", "bool",
           /*default=*/"false",
           "Give the optimizer gradients in the reduce dtype">,
  ];
}

#endif // FSDP_DIALECT_FSDP_TRANSFORMS_PASSES_TD
