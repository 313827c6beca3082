// clip-norm-type (clip_grad_norm_'s norm_type): the p-norm's total is
// Σ|g|^p summed over the shard group, the inf norm's max |g| (fsdp.max_abs)
// maximised over it; clip_grad_norm takes the root (or the max itself).
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="clip-grad-norm=1.0 clip-norm-type=inf" | FileCheck %s --check-prefix=INF
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="clip-grad-norm=1.0 clip-norm-type=3" | FileCheck %s --check-prefix=P3
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="clip-grad-norm=1.0 clip-norm-type=1" | FileCheck %s --check-prefix=P1
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=4 sharding-strategy=hybrid-shard shard-group-size=2 auto-wrap-policy=always clip-grad-norm=1.0 clip-norm-type=inf" -o %t.inf.pipeline
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-auto-wrap="policy=always" --fsdp-build-train-step="clip-grad-norm=1.0 clip-norm-type=inf" --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" --fsdp-insert-collectives --fsdp-prefetch -o %t.inf.passes
// RUN: diff %t.inf.pipeline %t.inf.passes
// RUN: FileCheck %s --check-prefix=SHARD-INF < %t.inf.pipeline
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=always clip-grad-norm=1.0 clip-norm-type=3" | FileCheck %s --check-prefix=SHARD-P3
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=always clip-grad-norm=1.0 clip-norm-type=inf lower=true" | FileCheck %s --check-prefix=CALLS
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="clip-grad-norm=1.0 clip-norm-type=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="clip-grad-norm=1.0 clip-norm-type=nan" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NAN
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-pipeline="clip-grad-norm=1.0 clip-norm-type=fro" -o /dev/null 2>&1 | FileCheck %s --check-prefix=WORD

// INF-LABEL: func.func @mlp_train_step
// INF: %[[MAX:.*]] = fsdp.max_abs %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = ""} : tensor<32x16xf32>, tensor<32xf32>, tensor<32x32xf32>, tensor<32xf32>, tensor<4x32xf32>, tensor<4xf32> -> tensor<f32>
// INF: fsdp.clip_grad_norm %[[MAX]] {{{.*}}max_norm = 1.000000e+00 : f64, norm_type = 0x7FF0000000000000 : f64} : tensor<f32>

// P3-LABEL: func.func @mlp_train_step
// P3: %[[A:.*]] = nn.abs %{{.*}} : tensor<32x16xf32>
// P3: %[[P:.*]] = nn.pow %[[A]] {exponent = 3.000000e+00 : f64{{.*}}} : tensor<32x16xf32>
// P3: nn.reduce_sum %[[P]] {dims = array<i64: 0, 1>
// P3: fsdp.clip_grad_norm %{{.*}} {{{.*}}norm_type = 3.000000e+00 : f64} : tensor<f32>

// P1-LABEL: func.func @mlp_train_step
// P1: %[[A:.*]] = nn.abs %{{.*}} : tensor<32x16xf32>
// P1-NEXT: nn.reduce_sum %[[A]] {dims = array<i64: 0, 1>
// P1-NOT: nn.pow
// P1: fsdp.clip_grad_norm %{{.*}} {{{.*}}norm_type = 1.000000e+00 : f64} : tensor<f32>

// Hybrid sharding: the max over the shard group only (replicas hold the
// same shards), as FSDP's clip_grad_norm_ all-reduces MAX over its group.
// SHARD-INF-LABEL: func.func @mlp_train_step
// SHARD-INF: %[[M:.*]] = fsdp.max_abs %{{.*}}, %{{.*}}, %{{.*}} {{.*}}: tensor<{{[0-9]+}}xf32>, tensor<{{[0-9]+}}xf32>, tensor<{{[0-9]+}}xf32> -> tensor<f32>
// SHARD-INF: %[[V:.*]] = nn.reshape %[[M]]
// SHARD-INF: %[[R:.*]] = fsdp.all_reduce %[[V]] mesh<replicate = 2, shard = 2> group shard dtype f32 max
// SHARD-INF: %[[T:.*]] = nn.reshape %[[R]]
// SHARD-INF: fsdp.clip_grad_norm %[[T]] {{{.*}}norm_type = 0x7FF0000000000000 : f64}

// SHARD-P3-LABEL: func.func @mlp_train_step
// SHARD-P3: nn.pow %{{.*}} {exponent = 3.000000e+00 : f64{{.*}}} : tensor<{{[0-9]+}}xf32>
// SHARD-P3: fsdp.all_reduce %{{.*}} mesh<shard = 2> group shard dtype f32 sum
// SHARD-P3: fsdp.clip_grad_norm %{{.*}} {{{.*}}norm_type = 3.000000e+00 : f64}

// One max_abs call per flat shard, accumulating from the second.
// CALLS: llvm.call @fsdprt_max_abs({{.*}}, %[[FIRST:[0-9]+]]) :
// CALLS: llvm.call @fsdprt_max_abs({{.*}}, %[[ACC:[0-9]+]]) :
// CALLS: llvm.call @fsdprt_max_abs({{.*}}, %[[ACC]]) :
// CALLS: llvm.call @fsdprt_all_reduce(
// CALLS: llvm.call @fsdprt_clip_coefficient(

// ZERO: error: fsdp-build-train-step: clip-norm-type must be > 0 or inf, got 0
// NAN: error: fsdp-build-train-step: clip-norm-type must be > 0 or inf, got nan
// WORD: clip-norm-type{{.*}}'fro' value invalid for floating point argument
