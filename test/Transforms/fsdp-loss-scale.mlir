// Dynamic loss scaling (loss-scale=dynamic, torch.amp.GradScaler): the loss
// cotangent is seeded with the scale, the gradients are multiplied by its
// inverse before clipping and the optimizer, the found-inf flag (summed over
// the shard group once sharded) is returned and every update skips on it.
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="loss-scale=dynamic optimizer=sgd momentum=0.9" | FileCheck %s --check-prefix=BUILD
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 loss-scale=dynamic optimizer=adamw clip-grad-norm=1.0" | FileCheck %s --check-prefix=SHARD
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 loss-scale=dynamic optimizer=sgd momentum=0.9 lower=true" | FileCheck %s --check-prefix=CALLS
// RUN: not fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="loss-scale=static" 2>&1 | FileCheck %s --check-prefix=BAD

// BUILD-LABEL: func.func @mlp_train_step(
// BUILD-SAME: -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.found_inf},
// BUILD: %[[SEED:.*]] = arith.constant {{.*}}dense<1.000000e+00> : tensor<f32>
// BUILD-NEXT: %[[S:.*]] = fsdp.loss_scale {fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""} : tensor<f32>
// BUILD-NEXT: nn.mul %[[SEED]], %[[S]]
// BUILD: %[[INV:.*]] = fsdp.loss_scale {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", inverse} : tensor<f32>
// BUILD-COUNT-6: nn.mul %{{.*}}, %[[INV]] {fsdp.phase = #fsdp<phase optimizer>
// BUILD-NEXT: %[[FOUND:.*]] = fsdp.found_nonfinite {{.*}} -> tensor<f32>
// BUILD-COUNT-6: fsdp.sgd_step {{.*}} step %{{.*}} skip_if %[[FOUND]]
// BUILD: return %{{.*}}, %[[FOUND]],

// Sharded: the unscaled shard's flag summed over the shard group, then the
// norm of the unscaled shard, then the update that skips on the flag.
// SHARD-LABEL: func.func @mlp_train_step(
// SHARD-SAME: -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.grad_norm}, tensor<f32> {fsdp.found_inf},
// SHARD: %[[INV:.*]] = fsdp.loss_scale {{.*}}inverse} : tensor<f32>
// SHARD-NEXT: %[[G:.*]] = nn.mul %{{.*}}, %[[INV]] {{.*}}: (tensor<866xf32>, tensor<f32>)
// SHARD-NEXT: fsdp.found_nonfinite %[[G]] {{.*}}: tensor<866xf32> -> tensor<f32>
// SHARD-NEXT: nn.reshape
// SHARD-NEXT: fsdp.all_reduce {{.*}} mesh<shard = 2> group shard dtype f32 sum
// SHARD-NEXT: %[[FOUND:.*]] = nn.reshape
// SHARD: nn.mul %[[G]], %[[G]]
// SHARD: fsdp.clip_grad_norm
// SHARD: fsdp.adamw_step %arg0, %{{.*}}, %arg1, %arg2 step %arg3 skip_if %[[FOUND]]
// SHARD: return %{{.*}}, %{{.*}}, %[[FOUND]],

// The flag is all-reduced in place into its persistent slot; the update
// reads it from there.
// CALLS: llvm.call @fsdprt_loss_scale(
// CALLS: llvm.call @fsdprt_loss_scale(
// CALLS: llvm.call @fsdprt_nonfinite_flag(
// CALLS: llvm.call @fsdprt_all_reduce({{.*}}, %arg1, %[[OFF:[0-9]+]], %{{[0-9]+}})
// CALLS: llvm.call @fsdprt_sgd_step({{.*}}, %arg1, %[[OFF]])

// BAD: fsdp-build-train-step: loss-scale must be none or dynamic, got 'static'
