// Parameter groups from the train step to the runtime calls: nanoGPT's
// no-decay-1d and a name pattern with half the learning rate on the MLP.
// RUN: fsdp-opt %S/../../examples/mlp.mlir --fsdp-build-train-step="optimizer=adamw weight-decay=0.1 no-decay-1d=true param-groups=fc2.*:lr-scale=0.5,kind=Linear:weight-decay=0.2" | FileCheck %s --check-prefix=STEP
// RUN: fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adamw weight-decay=0.1 no-decay-1d=true param-groups=fc2.*:lr-scale=0.5" | FileCheck %s --check-prefix=SHARD
// RUN: fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adamw weight-decay=0.1 no-decay-1d=true param-groups=fc2.*:lr-scale=0.5" --convert-fsdp-to-rt | FileCheck %s --check-prefix=LOWER
// RUN: fsdp-opt %S/../../examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=adamw weight-decay=0.1" --convert-fsdp-to-rt | FileCheck %s --check-prefix=UNIFORM

// Per parameter, the first group that selects it: biases (ndim 1) have no
// decay; fc2.weight gets half the lr and the decay of the kind=Linear group
// (whose weight decay the pattern group leaves unset); other weights 0.2.
// STEP: fsdp.adamw_step {{.*}}lr = 1.000000e-03 : f64, weight_decay = 2.000000e-01 : f64}
// STEP: fsdp.adamw_step {{.*}}lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64}
// STEP: fsdp.adamw_step {{.*}}lr = 1.000000e-03 : f64, lr_scale = 5.000000e-01 : f64, weight_decay = 1.000000e-01 : f64}
// STEP: fsdp.adamw_step {{.*}}lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64}

// One flat parameter, one segment per run of one group (fc1.weight 512,
// fc1.bias 32, fc2.weight 1024, ...); the op's own scale and decay are the
// first segment's.
// SHARD: fsdp.adamw_step {{.*}}segment_lr_scales = array<f64: 1.000000e+00, 1.000000e+00, 5.000000e-01, 1.000000e+00, 1.000000e+00, 1.000000e+00>, segment_starts = array<i64: 0, 512, 544, 1568, 1600, 1728>, segment_weight_decays = array<f64: 1.000000e-01, 0.000000e+00, 1.000000e-01, 0.000000e+00, 1.000000e-01, 0.000000e+00>, weight_decay = 1.000000e-01 : f64}

// Each rank updates its part of each segment: its shard starts at s x 866,
// s its rank in the shard communicator (%arg5, the runtime's mesh layout),
// every boundary is clamped to the shard, and one call per segment gets the
// segment's lr and decay.
// LOWER-NOT: arith.remsi
// LOWER: %[[CHUNK:.*]] = rt.comm_rank %arg0, %arg5 : i64
// LOWER: %[[BASE:.*]] = arith.muli %[[CHUNK]], %c866_i64 : i64
// LOWER: %[[LOCAL0:.*]] = arith.subi %c0_i64, %[[BASE]] : i64
// LOWER: %[[LOW0:.*]] = arith.maxsi %[[LOCAL0]], %c0_i64 : i64
// LOWER: %[[B0:.*]] = arith.minsi %[[LOW0]], %c866_i64 : i64
// LOWER: %[[LOCAL1:.*]] = arith.subi %c512_i64, %[[BASE]] : i64
// LOWER: %[[LOW1:.*]] = arith.maxsi %[[LOCAL1]], %c0_i64 : i64
// LOWER: %[[B1:.*]] = arith.minsi %[[LOW1]], %c866_i64 : i64
// LOWER: %[[N0:.*]] = arith.subi %[[B1]], %[[B0]] : i64
// The third segment's lr (fc2.weight): half.
// LOWER: %[[HALF:.*]] = arith.constant 5.000000e-04 : f64
// LOWER: %[[BYTES:.*]] = arith.muli %[[B0]], %c4_i64 : i64
// LOWER: %[[PARAM:.*]] = arith.addi %c0_i64, %[[BYTES]] : i64
// LOWER: rt.call @adamw_step(%arg0, %arg2, %{{.*}}, %arg1, %[[PARAM]], {{.*}}, %[[N0]],
// LOWER: rt.call @adamw_step(
// LOWER: rt.call @adamw_step({{.*}}, %[[HALF]],
// LOWER-COUNT-3: rt.call @adamw_step(
// LOWER-NOT: rt.call @adamw_step(

// Without groups: one call over the whole shard, no rank arithmetic.
// UNIFORM-NOT: rt.comm_rank
// UNIFORM: rt.call @adamw_step(%arg0, %arg2, %{{.*}}, %arg1, %c0_i64,
// UNIFORM-NOT: rt.call @adamw_step(
