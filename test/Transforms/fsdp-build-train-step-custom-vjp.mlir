// nn.custom_vjp (a torch.autograd.Function with its own backward): the VJP is
// its backward region inlined, the ops computing its outputs get no
// cotangent, and the op itself is gone from the step.
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step | FileCheck %s

// A gradient reversal layer after tanh: w's gradient is tanh's VJP of
// -0.5 times the loss's cotangent.
// CHECK-LABEL: func.func @reversal_train_step
// CHECK-NOT: nn.custom_vjp
// CHECK: %[[T:.*]] = nn.tanh %arg0
// CHECK: nn.reduce_sum %[[T]]
// CHECK: %[[R:.*]] = nn.scale %{{.*}} {factor = -5.000000e-01 : f64
// CHECK: %[[G:.*]] = nn.unary_grad %[[R]], %arg0 {{.*}}tanh
// CHECK: fsdp.sgd_step %arg0, %[[G]]
fsdp.model @reversal {
  fsdp.module @root kind "Test" {
    fsdp.param @w : tensor<4x8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4x8xf32>
      %t = nn.tanh %w : tensor<4x8xf32>
      %y = nn.custom_vjp %t inputs(%t : tensor<4x8xf32>) : tensor<4x8xf32> {
      ^bb0(%dy: tensor<4x8xf32>):
        %dx = nn.scale %dy {factor = -0.5 : f64} : tensor<4x8xf32>
        nn.yield %dx : tensor<4x8xf32>
      }
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// A straight-through estimator with a saved tensor and a second output the
// loss does not read: the forward's ops (a clamp of w to [0, 1], whose own
// derivative would mask the gradient) are not differentiated; the backward
// gets zeros for the unread output, as torch materialises them, and gives
// w dy * s + dz.
// CHECK-LABEL: func.func @estimator_train_step
// CHECK-DAG: %[[Z:.*]] = arith.constant {{.*}}dense<0.000000e+00> : tensor<8xf32>
// CHECK-DAG: %[[S:.*]] = nn.sigmoid %arg0
// CHECK: %[[M:.*]] = nn.mul %{{.*}}, %[[S]]
// CHECK: %[[G:.*]] = nn.add %[[M]], %[[Z]]
// CHECK-NOT: nn.unary_grad
// CHECK-NOT: nn.clamp_grad
// CHECK: fsdp.sgd_step %arg0, %[[G]]
fsdp.model @estimator {
  fsdp.module @root kind "Test" {
    fsdp.param @w : tensor<8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<8xf32>
      %c = nn.clamp %w {min = 0.0 : f64, max = 1.0 : f64} : tensor<8xf32>
      %e = nn.exp %w : tensor<8xf32>
      %s = nn.sigmoid %w : tensor<8xf32>
      %y:2 = nn.custom_vjp %c, %e inputs(%w : tensor<8xf32>) saved(%s : tensor<8xf32>) : tensor<8xf32>, tensor<8xf32> {
      ^bb0(%saved: tensor<8xf32>, %dy: tensor<8xf32>, %dz: tensor<8xf32>):
        %m = nn.mul %dy, %saved : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
        %dx = nn.add %m, %dz : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
        nn.yield %dx : tensor<8xf32>
      }
      %loss = nn.reduce_sum %y#0 {dims = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// Under a bf16 unit the forward's values are bf16; the region computes in
// the f32 it declares: the VJP casts the cotangent in and the result back.
// CHECK-LABEL: func.func @mixed_train_step
// CHECK: %[[IN:.*]] = nn.cast %{{.*}} : tensor<8xbf16> to tensor<8xf32>
// CHECK: %[[R:.*]] = nn.scale %[[IN]] {{.*}}: tensor<8xf32>
// CHECK: nn.cast %[[R]] {{.*}}: tensor<8xf32> to tensor<8xbf16>
fsdp.model @mixed {
  fsdp.module @root kind "Test" unit<param_dtype = bf16, reduce_dtype = f32> {
    fsdp.param @w : tensor<8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<8xf32>
      %t = nn.tanh %w : tensor<8xf32>
      %y = nn.custom_vjp %t inputs(%t : tensor<8xf32>) : tensor<8xf32> {
      ^bb0(%dy: tensor<8xf32>):
        %dx = nn.scale %dy {factor = -1.0 : f64} : tensor<8xf32>
        nn.yield %dx : tensor<8xf32>
      }
      %loss = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
