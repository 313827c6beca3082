// fsdp-pipeline runs auto-wrap, attention packing, vocabulary padding, train
// step (its attention keeping its softmax statistics), shard, collectives
// and prefetch with PyTorch-style option names: the same IR as the passes
// one by one.
// RUN: fsdp-opt %examples/gpt2.mlir --fsdp-pipeline="world-size=4 sharding-strategy=hybrid-shard shard-group-size=2 auto-wrap-policy=module-kind wrap-kinds=Block forward-prefetch=true backward-prefetch=post limit-all-gathers=1 optimizer=adamw lr=3e-4 clip-grad-norm=1.0 grad-accum-steps=2 no-sync=true" -o %t.pipeline
// RUN: fsdp-opt %examples/gpt2.mlir --fsdp-auto-wrap="policy=module-kind kinds=Block" --fsdp-pack-attention --fsdp-pad-vocab --fsdp-build-train-step="optimizer=adamw lr=3e-4 clip-grad-norm=1.0 grad-accum-steps=2 no-sync=true" --fsdp-keep-attention-stats --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" --fsdp-insert-collectives --fsdp-prefetch="forward-prefetch=true backward-prefetch=post limit-all-gathers=1" -o %t.passes
// RUN: diff %t.pipeline %t.passes
// param-dtype / reduce-dtype run fsdp-mixed-precision after the wrapping;
// lower=true appends the lowering (fsdp-lower-pipeline).
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 param-dtype=bf16 reduce-dtype=f32" -o %t.mp.pipeline
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-auto-wrap --fsdp-mixed-precision="param-dtype=bf16 reduce-dtype=f32" --fsdp-build-train-step --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-prefetch -o %t.mp.passes
// RUN: diff %t.mp.pipeline %t.mp.passes
// RUN: FileCheck %s --check-prefix=MIXED < %t.mp.pipeline
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 lower=true" -o %t.lowered.pipeline
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2" --fsdp-lower-pipeline -o %t.lowered.passes
// RUN: diff %t.lowered.pipeline %t.lowered.passes
// MIXED: fsdp.unshard %{{.*}} : tensor<866xbf16> -> !fsdp.token<tensor<1732xbf16>>
// MIXED: fsdp.reduce_grads %{{.*}} : tensor<1732xf32> -> tensor<866xf32>
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 report=true" -o /dev/null | FileCheck %s

// With the manual units of the example (auto-wrap-policy=none, the default)
// and PyTorch's defaults (full shard, backward prefetch pre, limit 2):
// CHECK: fsdp-report: model nested_wrapped, full-shard on #fsdp.mesh<shard = 4> (4 ranks)
// CHECK: collectives per step: 11, 5648 bytes; all_gather backward 3; all_gather forward 4; reduce_scatter backward 4
