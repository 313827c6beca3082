// Mixed precision: compute in the param dtype from f32 master parameters,
// gather and reduce in low precision, update in f32.
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-mixed-precision="param-dtype=bf16" --fsdp-build-train-step | FileCheck %s --check-prefix=STEP
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-mixed-precision --fsdp-pipeline="world-size=4" | FileCheck %s --check-prefix=SHARD
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-mixed-precision --fsdp-pipeline="world-size=4 clip-grad-norm=1.0" | FileCheck %s --check-prefix=CLIP
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-mixed-precision --fsdp-pipeline="world-size=1" | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-mixed-precision --fsdp-pipeline="world-size=4 report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-mixed-precision="param-dtype=bf16 reduce-dtype=f32" --fsdp-pipeline="world-size=4" | FileCheck %s --check-prefix=F32REDUCE
// RUN: fsdp-opt %s --fsdp-mixed-precision="param-dtype=f16 buffer-dtype=f16" --fsdp-build-train-step | FileCheck %s --check-prefix=BUFFER
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-mixed-precision="keep-low-precision-grads=true" --fsdp-pipeline="world-size=4" | FileCheck %s --check-prefix=KEEP
// RUN: fsdp-opt %s --fsdp-pipeline="param-dtype=f16 buffer-dtype=f16" | FileCheck %s --check-prefix=BUFFER
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-pipeline="world-size=4 keep-low-precision-grads=true reduce-dtype=bf16" | FileCheck %s --check-prefix=KEEP
// RUN: fsdp-opt %s --fsdp-mixed-precision --fsdp-build-train-step | FileCheck %s --check-prefix=PROMOTE
// RUN: not fsdp-opt %s --fsdp-mixed-precision="param-dtype=fp8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not fsdp-opt %s --fsdp-build-train-step --fsdp-mixed-precision -o /dev/null 2>&1 | FileCheck %s --check-prefix=ORDER

// The step casts parameters and inputs to bf16, computes in bf16, and the
// casts' VJPs bring each gradient back to f32 for the f32 update; the loss is
// reported in the model's f32.
// STEP-LABEL: func.func @mlp_train_step(
// STEP-SAME: %arg0: tensor<32x16xf32> {fsdp.param = "fc1.weight"}
// STEP-SAME: fsdp.mixed_precision = {param_dtype = bf16, reduce_dtype = bf16}
// STEP: %[[W:.*]] = nn.cast %arg0 {{.*}} : tensor<32x16xf32> to tensor<32x16xbf16>
// STEP: %[[X:.*]] = nn.cast %arg7 {{.*}} : tensor<8x16xf32> to tensor<8x16xbf16>
// STEP: nn.linear %[[X]], %[[W]], %{{.*}} : (tensor<8x16xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
// STEP: %[[L:.*]] = nn.mse_loss {{.*}} -> tensor<bf16>
// STEP: arith.constant {{.*}}dense<1.000000e+00> : tensor<bf16>
// STEP: %[[GW:.*]] = nn.matmul {{.*}}transpose_lhs{{.*}} -> tensor<32x16xbf16>
// STEP: %[[GW32:.*]] = nn.cast %[[GW]] {{.*}} : tensor<32x16xbf16> to tensor<32x16xf32>
// STEP: %[[LOSS:.*]] = nn.cast %[[L]] {{.*}} : tensor<bf16> to tensor<f32>
// STEP: fsdp.sgd_step %arg0, %[[GW32]] {{.*}} : (tensor<32x16xf32>, tensor<32x16xf32>, tensor<i64>) -> tensor<32x16xf32>
// STEP: return %[[LOSS]],

// Sharded: the f32 shard is cast before the all-gather (half the bytes),
// gradients are reduce-scattered in bf16 and the f32 update reads the bf16
// shard as it is (an exact widening: no f32 copy of it).
// SHARD-LABEL: func.func @nested_wrapped_train_step(
// SHARD: %[[LP:.*]] = nn.cast %arg0 {{.*}} : tensor<19xf32> to tensor<19xbf16>
// SHARD: fsdp.unshard %[[LP]] unit "" {{.*}} : tensor<19xbf16> -> !fsdp.token<tensor<76xbf16>>
// SHARD: fsdp.view %{{.*}}[0] {{.*}} : tensor<76xbf16> -> tensor<4x8xbf16>
// SHARD: %[[G:.*]] = fsdp.reduce_grads %{{.*}} unit "module.2" {{.*}} : tensor<68xbf16> -> tensor<17xbf16>
// SHARD-NOT: nn.cast %[[G]]
// SHARD: fsdp.sgd_step %arg3, %[[G]] {{.*}} : (tensor<17xf32>, tensor<17xbf16>, tensor<i64>) -> tensor<17xf32>

// Clipping scales the gradient in place, which rounds: it clips the f32
// widening, and the update reads that.
// CLIP: %[[G:.*]] = fsdp.reduce_grads %{{.*}} unit "module.2" {{.*}} -> tensor<17xbf16>
// CLIP: nn.cast %[[G]] {{.*}} : tensor<17xbf16> to tensor<17xf32>
// CLIP: fsdp.clip_grad_norm
// CLIP: fsdp.sgd_step %arg3, %{{.*}} : (tensor<17xf32>, tensor<17xf32>, tensor<i64>)

// One rank: nothing to reduce, so no reduction (it would only copy); each
// update reads its unit's flat bf16 gradient.
// ONE-NOT: fsdp.reduce_grads
// ONE: %[[G:.*]] = fsdp.flatten %weight_grad_1, %bias_grad_2 {{.*}} -> tensor<68xbf16>
// ONE-NOT: fsdp.reduce_grads
// ONE: fsdp.sgd_step %arg3, %[[G]] {{.*}} : (tensor<68xf32>, tensor<68xbf16>, tensor<i64>)

// Half the bytes of the f32 schedule (5648).
// REPORT: collectives per step: 11, 2824 bytes; all_gather backward 3; all_gather forward 4; reduce_scatter backward 4
// REPORT: 0 all_gather (root) forward bf16 76 152 all-gather

// reduce-dtype=f32: bf16 compute, f32 gradient reduction.
// F32REDUCE: fsdp.unshard {{.*}} -> !fsdp.token<tensor<76xbf16>>
// F32REDUCE: fsdp.reduce_grads {{.*}} unit "module.2" {{.*}} : tensor<68xf32> -> tensor<17xf32>

// buffer-dtype: floating-point buffers are held in f16 from the start and
// stay so (FSDP casts them to buffer_dtype once and keeps them): the step's
// buffer arguments and results are f16 and BatchNorm updates them in place,
// with no cast in either direction.
// BUFFER-LABEL: func.func @bn_train_step(
// BUFFER-SAME: %[[RM:[a-z0-9]+]]: tensor<4xf16> {fsdp.buffer = "running_mean"}, %[[RV:[a-z0-9]+]]: tensor<4xf16> {fsdp.buffer = "running_var"}
// BUFFER-NOT: nn.cast %[[RM]]
// BUFFER: %{{.*}}, %[[M:.*]], %[[V:.*]] = nn.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %[[RM]], %[[RV]] {{.*}} -> (tensor<8x4xf16>, tensor<4xf16>, tensor<4xf16>)
// BUFFER-NOT: nn.cast %[[M]]
// BUFFER: return {{.*}}%[[M]], %[[V]] : {{.*}}tensor<4xf16>, tensor<4xf16>

// keep-low-precision-grads: the f32 update takes the bf16 reduced gradient.
// KEEP: %[[G:.*]] = fsdp.reduce_grads %{{.*}} unit "" {{.*}} : tensor<76xbf16> -> tensor<19xbf16>
// KEEP: fsdp.sgd_step %arg0, %[[G]] {{.*}} : (tensor<19xf32>, tensor<19xbf16>, tensor<i64>) -> tensor<19xf32>

// Buffers keeping f32 meet bf16 activations: the operands are promoted to
// f32 (PyTorch's type promotion), so BatchNorm runs in f32.
// PROMOTE-LABEL: func.func @bn_train_step(
// PROMOTE: %[[X:.*]] = nn.cast %{{.*}} : tensor<8x4xf32> to tensor<8x4xbf16>
// PROMOTE: %[[X32:.*]] = nn.cast %[[X]] {{.*}} : tensor<8x4xbf16> to tensor<8x4xf32>
// PROMOTE: nn.batch_norm %[[X32]], {{.*}} -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)

// BADTYPE: error: fsdp-mixed-precision: unknown dtype 'fp8'; expected f32, bf16 or f16
// ORDER: error: 'fsdp.model' op already has a train step; run fsdp-mixed-precision before fsdp-build-train-step
fsdp.model @bn {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <ones>
    fsdp.param @b : tensor<4xf32> init <zeros>
    fsdp.buffer @running_mean : tensor<4xf32> init <zeros>
    fsdp.buffer @running_var : tensor<4xf32> init <ones>
    fsdp.forward (%x: tensor<8x4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4xf32>
      %b = fsdp.get_param @b : tensor<4xf32>
      %rm = fsdp.get_buffer @running_mean : tensor<4xf32>
      %rv = fsdp.get_buffer @running_var : tensor<4xf32>
      %y, %m, %v = nn.batch_norm %x, %w, %b, %rm, %rv {training} : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)
      fsdp.set_buffer @running_mean, %m : tensor<4xf32>
      fsdp.set_buffer @running_var, %v : tensor<4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<8x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
