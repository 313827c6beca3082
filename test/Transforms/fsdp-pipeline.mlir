// fsdp-pipeline runs auto-wrap, attention packing, vocabulary padding, train
// step (its attention keeping its softmax statistics), shard, collectives
// and prefetch with PyTorch-style option names: the same IR as the passes
// one by one.
// RUN: fsdp-opt %examples/gpt2.mlir --fsdp-pipeline="world-size=4 sharding-strategy=hybrid-shard shard-group-size=2 auto-wrap-policy=module-kind wrap-kinds=Block forward-prefetch=true backward-prefetch=post limit-all-gathers=1 optimizer=adamw lr=3e-4 clip-grad-norm=1.0 grad-accum-steps=2 no-sync=true" -o %t.pipeline
// RUN: fsdp-opt %examples/gpt2.mlir --fsdp-auto-wrap="policy=module-kind kinds=Block" --fsdp-pack-attention --fsdp-pad-vocab --fsdp-build-train-step="optimizer=adamw lr=3e-4 clip-grad-norm=1.0 grad-accum-steps=2 no-sync=true" --fsdp-keep-attention-stats --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" --fsdp-insert-collectives --fsdp-prefetch="forward-prefetch=true backward-prefetch=post limit-all-gathers=1" -o %t.passes
// RUN: diff %t.pipeline %t.passes
// The optimizers' hyper-parameters reach the train step: AdamW's betas and
// eps (GPT-style beta2=0.95), SGD's dampening and Nesterov momentum.
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adamw beta1=0.8 beta2=0.95 eps=1e-6" -o %t.adam.pipeline
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-auto-wrap --fsdp-build-train-step="optimizer=adamw beta1=0.8 beta2=0.95 eps=1e-6" --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-prefetch -o %t.adam.passes
// RUN: diff %t.adam.pipeline %t.adam.passes
// RUN: FileCheck %s --check-prefix=ADAM < %t.adam.pipeline
// ADAM: fsdp.adamw_step {{.*}}beta1 = 8.000000e-01 : f64, beta2 = 0.94999999999999996 : f64, eps = 9.9999999999999995E-7
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 momentum=0.9 nesterov=true" -o %t.sgd.pipeline
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-auto-wrap --fsdp-build-train-step="momentum=0.9 nesterov=true" --fsdp-shard="world-size=2" --fsdp-insert-collectives --fsdp-prefetch -o %t.sgd.passes
// RUN: diff %t.sgd.pipeline %t.sgd.passes
// RUN: FileCheck %s --check-prefix=SGD < %t.sgd.pipeline
// SGD: fsdp.sgd_step {{.*}}nesterov
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=sgd beta2=0.95" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTSGD
// NOTSGD: beta1, beta2 and eps are Adam / AdamW options; the optimizer is sgd

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
