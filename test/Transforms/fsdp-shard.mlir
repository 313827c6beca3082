// Flat parameters: one per unit with parameters, definition order, padded to
// a multiple of the shard group size, one equal chunk per rank.
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=1" | FileCheck %s --check-prefix=W1
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=3" | FileCheck %s --check-prefix=W3
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step="optimizer=adamw clip-grad-norm=1.0" --fsdp-shard="world-size=4" | FileCheck %s --check-prefix=W4
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=8" | FileCheck %s --check-prefix=W8
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=no-shard" | FileCheck %s --check-prefix=DDP
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" | FileCheck %s --check-prefix=HSDP
// RUN: fsdp-opt %s --fsdp-build-train-step="momentum=0.9" --fsdp-shard="world-size=8" | FileCheck %s --check-prefix=SMALL
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="clip-grad-norm=1.0" --fsdp-shard="world-size=4 strategy=no-shard" | FileCheck %s --check-prefix=CLIPDDP
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="clip-grad-norm=1.0" --fsdp-shard="world-size=4 strategy=hybrid-shard shard-group-size=2" | FileCheck %s --check-prefix=CLIPHSDP
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-mixed-precision="keep-low-precision-grads=true" --fsdp-build-train-step="clip-grad-norm=1.0" --fsdp-shard="world-size=2" | FileCheck %s --check-prefix=CLIPLOW

// World size 1: the shard is the whole flat parameter; nothing to gather.
// W1-LABEL: func.func @nested_wrapped_train_step(
// W1-SAME: %arg0: tensor<76xf32> {fsdp.flat_numel = 76 : i64, fsdp.flat_param = "", fsdp.offsets = array<i64: 0, 32, 36, 68>, fsdp.params = ["module.0.weight", "module.0.bias", "module.3.weight", "module.3.bias"]}
// W1-SAME: %arg1: tensor<272xf32> {fsdp.flat_numel = 272 : i64, fsdp.flat_param = "module.1", fsdp.offsets = array<i64: 0, 256>, fsdp.params = ["module.1.1.weight", "module.1.1.bias"]}
// W1-SAME: %arg2: tensor<80xf32> {{[^}]*}}fsdp.flat_param = "module.1.0"
// W1-SAME: %arg3: tensor<68xf32> {{[^}]*}}fsdp.flat_param = "module.2"
// W1-SAME: attributes {{{.*}}fsdp.mesh = #fsdp.mesh<shard = 1>{{.*}}fsdp.strategy = #fsdp<strategy full_shard>
// W1-NOT: fsdp.unshard
// W1: fsdp.view %arg0[0] {{.*}} : tensor<76xf32> -> tensor<4x8xf32>
// W1: fsdp.view %arg0[36] {{.*}} : tensor<76xf32> -> tensor<8x4xf32>

// World size 3: 76 -> 3 x 26 (2 padding), 272 -> 3 x 91, 80 -> 3 x 27, 68 -> 3 x 23.
// W3-LABEL: func.func @nested_wrapped_train_step(
// W3-SAME: %arg0: tensor<26xf32>
// W3-SAME: %arg1: tensor<91xf32>
// W3-SAME: %arg2: tensor<27xf32>
// W3-SAME: %arg3: tensor<23xf32>
// W3: fsdp.unshard %arg0 unit "" mesh<shard = 3> {{.*}} : tensor<26xf32> -> !fsdp.token<tensor<78xf32>>
// W3: fsdp.flatten {{.*}} -> tensor<78xf32>
// PyTorch's predivide loop stops at 2 for 3 ranks (3 % 2 != 0): pre 2, post 1.5.
// W3: fsdp.reduce_grads {{.*}} unit "" mesh<shard = 3> sum {{.*}}post_divide = 1.500000e+00 : f64, pre_divide = 2.000000e+00 : f64{{.*}} : tensor<78xf32> -> tensor<26xf32>

// World size 4, AdamW with clipping: two state shards per unit, FSDP1's
// divide factors (2, 2), and the clipping norm all-reduced over the mesh.
// W4-LABEL: func.func @nested_wrapped_train_step(
// W4-SAME: %arg0: tensor<19xf32> {{[^}]*}}fsdp.flat_param = ""
// W4-SAME: %arg4: tensor<19xf32> {fsdp.flat_param = "", fsdp.flat_state = "exp_avg"}, %arg5: tensor<19xf32> {fsdp.flat_param = "", fsdp.flat_state = "exp_avg_sq"}
// W4-SAME: %arg12: tensor<i64> {fsdp.step_count}
// W4-SAME: -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.grad_norm}, tensor<19xf32> {fsdp.flat_param = ""}
// W4: %[[G:.*]] = fsdp.reduce_grads {{.*}} unit "module.2" mesh<shard = 4> sum {{.*}}post_divide = 2.000000e+00 : f64, pre_divide = 2.000000e+00 : f64{{.*}} : tensor<68xf32> -> tensor<17xf32>
// W4: %[[SQ:.*]] = fsdp.all_reduce %{{.*}} mesh<shard = 4> group shard dtype f32 sum {{.*}}: tensor<1xf32>
// W4: fsdp.clip_grad_norm
// W4: fsdp.adamw_step %arg0, %{{.*}}, %arg4, %arg5 step %arg12 {{.*}} : (tensor<19xf32>, tensor<19xf32>, tensor<19xf32>, tensor<19xf32>, tensor<i64>)

// World size 8: 76 -> 8 x 10 (4 padding on the last rank).
// W8-LABEL: func.func @nested_wrapped_train_step(
// W8-SAME: %arg0: tensor<10xf32>
// W8-SAME: %arg1: tensor<34xf32>
// W8-SAME: %arg2: tensor<10xf32>
// W8-SAME: %arg3: tensor<9xf32>
// W8: fsdp.unshard %arg0 {{.*}} : tensor<10xf32> -> !fsdp.token<tensor<80xf32>>

// No-shard (DDP): whole parameters, gradients all-reduced over 4 replicas.
// DDP-LABEL: func.func @nested_wrapped_train_step(
// DDP-SAME: %arg0: tensor<76xf32>
// DDP-NOT: fsdp.unshard
// DDP: fsdp.reduce_grads {{.*}} mesh<replicate = 4, shard = 1> sum {{.*}} : tensor<76xf32> -> tensor<76xf32>

// Hybrid 2 x 2: shards of the 2-rank shard group; reduction over the whole
// 4-rank data-parallel world (divide factors 2, 2).
// HSDP-LABEL: func.func @nested_wrapped_train_step(
// HSDP-SAME: %arg0: tensor<38xf32>
// HSDP: fsdp.unshard %arg0 unit "" mesh<replicate = 2, shard = 2>
// HSDP: fsdp.reduce_grads {{.*}} mesh<replicate = 2, shard = 2> sum {{.*}}post_divide = 2.000000e+00 : f64, pre_divide = 2.000000e+00 : f64{{.*}} : tensor<76xf32> -> tensor<38xf32>

// A unit smaller than the world: 5 elements over 8 ranks are 8 chunks of 1
// (ranks 5-7 hold only padding). The unit's frozen parameter is a second flat
// parameter (fsdp.frozen), sharded and gathered like the first but never
// reduced nor updated, and not returned; SGD momentum buffers are sharded like
// their parameters, for the trainable flat parameter only.
// SMALL-LABEL: func.func @small_train_step(
// SMALL-SAME: %arg0: tensor<1xf32> {fsdp.flat_numel = 5 : i64, fsdp.flat_param = "", fsdp.offsets = array<i64: 0, 2>, fsdp.params = ["a", "b"]}
// SMALL-SAME: %arg1: tensor<1xf32> {fsdp.flat_numel = 3 : i64, fsdp.flat_param = "", fsdp.frozen, fsdp.offsets = array<i64: 0>, fsdp.params = ["frozen"]}
// SMALL-SAME: %arg2: tensor<1xf32> {fsdp.flat_param = "", fsdp.flat_state = "momentum_buffer"}
// SMALL-SAME: -> (tensor<f32> {fsdp.loss}, tensor<1xf32> {fsdp.flat_param = ""}, tensor<1xf32> {fsdp.flat_param = "", fsdp.flat_state = "momentum_buffer"}, tensor<i64> {fsdp.step_count})
// SMALL: fsdp.unshard %arg0 unit "" mesh<shard = 8> {{.*}} : tensor<1xf32> -> !fsdp.token<tensor<8xf32>>
// SMALL: fsdp.view %{{.*}}[0] {{.*}} -> tensor<2xf32>
// SMALL: fsdp.view %{{.*}}[2] {{.*}} -> tensor<3xf32>
// SMALL: fsdp.unshard %arg1 unit "" mesh<shard = 8> {{.*}} : tensor<1xf32> -> !fsdp.token<tensor<8xf32>>
// SMALL: fsdp.view %{{.*}}[0] {{.*}} -> tensor<3xf32>
// SMALL: fsdp.flatten {{.*}} : (tensor<2xf32>, tensor<3xf32>) -> tensor<8xf32>
// SMALL: fsdp.reduce_grads
// SMALL-NOT: fsdp.reduce_grads
// SMALL: fsdp.sgd_step %arg0, %{{.*}} momentum_buffer %arg2 step
// SMALL-NOT: fsdp.sgd_step
fsdp.model @small {
  fsdp.module @root kind "Net" {
    fsdp.param @a : tensor<2xf32> init <ones>
    fsdp.param @frozen : tensor<3xf32> init <ones> {requires_grad = false}
    fsdp.param @b : tensor<3xf32> init <ones>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<2xf32>
      %b = fsdp.get_param @b : tensor<3xf32>
      %f = fsdp.get_param @frozen : tensor<3xf32>
      %m = nn.mul %b, %f : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
      %sa = nn.reduce_sum %a {dims = array<i64: 0>} : (tensor<2xf32>) -> tensor<f32>
      %sb = nn.reduce_sum %m {dims = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
      %l = nn.add %sa, %sb : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// The clipping norm sums the squares of a rank's shards over the shard group
// only: replicas hold the same shards (PyTorch all-reduces over the FSDP
// process group). No-shard needs no all-reduce at all.
// CLIPDDP-LABEL: func.func @mlp_train_step
// CLIPDDP-NOT: fsdp.all_reduce
// CLIPDDP: fsdp.clip_grad_norm
// CLIPHSDP-LABEL: func.func @mlp_train_step
// CLIPHSDP: fsdp.all_reduce %{{.*}} mesh<replicate = 2, shard = 2> group shard dtype f32 sum
// CLIPHSDP: fsdp.clip_grad_norm

// Clipping bf16 gradients kept in low precision: squares in f32, the
// coefficient cast to bf16.
// CLIPLOW-LABEL: func.func @mlp_train_step
// CLIPLOW: nn.cast %{{.*}} : tensor<866xbf16> to tensor<866xf32>
// CLIPLOW: %[[N:.*]], %[[C:.*]] = fsdp.clip_grad_norm
// CLIPLOW: nn.cast %[[C]] {{.*}} : tensor<f32> to tensor<bf16>
// CLIPLOW: fsdp.sgd_step %arg0, %{{.*}} : (tensor<866xf32>, tensor<866xbf16>, tensor<i64>) -> tensor<866xf32>
