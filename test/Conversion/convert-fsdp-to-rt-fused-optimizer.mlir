// fused-optimizer: the updates after the backward as one multi-tensor call
// per set of equal hyperparameters (torch.optim's fused=True).
// RUN: fsdp-opt %S/../../examples/gpt2.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw" --convert-fsdp-to-rt="fused-optimizer=true" | FileCheck %s --check-prefix=UNITS
// RUN: fsdp-opt %S/../../examples/gpt2.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw" --convert-fsdp-to-rt | FileCheck %s --check-prefix=PLAIN
// RUN: fsdp-opt %S/../../examples/gpt2.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=sgd momentum=0.9 param-dtype=f16 loss-scale=dynamic" --convert-fsdp-to-rt="fused-optimizer=true" | FileCheck %s --check-prefix=SKIP
// RUN: fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adamw weight-decay=0.1 no-decay-1d=true param-groups=fc2.*:lr-scale=0.5" --convert-fsdp-to-rt="fused-optimizer=true" | FileCheck %s --check-prefix=GROUPS

// GPT-2's three units (the root, two blocks): one call, each unit's
// (param, grad, exp_avg, exp_avg_sq) buffers and byte offsets in order,
// then the shards' element counts (root 1312, blocks 6352 each).
// UNITS: %[[BUFS:.*]] = rt.array %arg1, %{{.*}}, %arg1, %arg1, %arg1, %{{.*}}, %arg1, %arg1, %arg1, %{{.*}}, %arg1, %arg1 : !rt.buffer
// UNITS-NEXT: %[[OFFS:.*]] = rt.array %c0_i64, %c0_i64, {{.*}} : i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64{{$}}
// UNITS-NEXT: %[[NUMELS:.*]] = rt.array %c1312_i64, %c6352_i64, %c6352_i64 : i64, i64, i64
// UNITS-NEXT: rt.call @adamw_multi_step(%arg0, %arg2, %c0_i32, %c3_i64, %[[BUFS]], %[[OFFS]], %[[NUMELS]],
// UNITS-NOT: rt.call @adamw_step(
// UNITS-NOT: rt.call @adamw_multi_step(

// Without the option: a call per unit.
// PLAIN-COUNT-3: rt.call @adamw_step(
// PLAIN-NOT: multi_step

// GradScaler's found-inf flag: the calls share it, so one call reads it.
// SKIP: rt.call @sgd_multi_step(%arg0, %arg2, %c0_i32, %c3_i64, {{.*}}, %arg1, %c{{[0-9]+}}_i64) :
// SKIP-NOT: rt.call @sgd_step(

// One unit whose flat parameter has six parameter-group segments: one call
// for the two with weight decay 0.1 (fc1.weight, fc3.weight), one for the
// three without (the biases), and fc2.weight's half lr alone in a single
// call. Each segment's offsets and count come from this rank's shard.
// GROUPS: rt.comm_rank
// GROUPS: rt.call @adamw_multi_step(%arg0, %arg2, %c0_i32, %c2_i64, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %0, %[[LR:[^,]*]], %[[B1:[^,]*]], %[[B2:[^,]*]], %[[EPS:[^,]*]], %[[DECAY:[^,]*]], %c0_i32,
// GROUPS: rt.call @adamw_multi_step(%arg0, %arg2, %c0_i32, %c3_i64, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %0, %[[LR]], %[[B1]], %[[B2]], %[[EPS]], %[[NODECAY:[^,]*]], %c0_i32,
// GROUPS: rt.call @adamw_step({{.*}}, %[[HALF:[^,]*]], %[[B1]], %[[B2]], %[[EPS]], %[[DECAY]], %c0_i32,
// GROUPS-NOT: rt.call @adamw
