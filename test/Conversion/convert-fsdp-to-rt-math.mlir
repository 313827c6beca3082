// The pointwise math, div, slice and pad ops lower to their runtime entry
// points: unary_forward / unary_backward with the FSDPRT_UNARY_* code and the
// two parameters, binary_forward with FSDPRT_DIV (3), and slice / pad with
// the window; the i64 labels go through pad and slice as Hugging Face's
// causal-LM loss shifts them (pad -100 at the end, drop the first).
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s --check-prefix=PROGRAM

// The labels reach the cross-entropy through pad, slice and reshape: their
// ids are below its 3 classes, or its ignore_index.
// PROGRAM: {\22dtype\22:\22i64\22,\22ignore_id\22:-100,\22index\22:1,\22max_id\22:3,

// CHECK-LABEL: func.func @math_train_step(
// Labels: [2, 4] i64 (dtype 4) padded by one -100 on dim 1, then [1, 5).
// CHECK: rt.call @pad({{.*}}, %c4_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}}, %c1_i32, %c0_i64, %c1_i64, %{{.*}}, %{{.*}}, %{{.*}})
// CHECK: rt.call @slice({{.*}}, %c4_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}}, %c1_i32, %c1_i64, %c4_i64, %{{.*}}, %{{.*}})
// Forward: rsqrt (5), pow 2 (7), tanh (0), erf (9), atan (14), div.
// CHECK: rt.call @unary_forward({{.*}}, %c0_i32, %c7_i32, {{.*}}, %c24_i64, %[[TWO:[^,]+]], %[[ZERO:[^,]+]])
// CHECK: rt.call @unary_forward({{.*}}, %c0_i32, %c5_i32, {{.*}}, %c8_i64, %[[ZERO]], %[[ZERO]])
// CHECK: rt.call @binary_forward({{.*}}, %c0_i32, %c3_i32,
// CHECK: rt.call @unary_forward({{.*}}, %c0_i32, %c0_i32, {{.*}}, %c24_i64, %[[ZERO]], %[[ZERO]])
// CHECK: rt.call @unary_forward({{.*}}, %c0_i32, %c9_i32, {{.*}}, %c24_i64, %[[ZERO]], %[[ZERO]])
// CHECK: rt.call @unary_forward({{.*}}, %c0_i32, %c14_i32, {{.*}}, %c24_i64, %[[ZERO]], %[[ZERO]])
// Backward: the same codes and parameters.
// CHECK: rt.call @unary_backward({{.*}}, %c0_i32, %c14_i32, {{.*}}, %c24_i64, %[[ZERO]], %[[ZERO]])
// CHECK: rt.call @unary_backward({{.*}}, %c0_i32, %c9_i32, {{.*}}, %c24_i64, %[[ZERO]], %[[ZERO]])
// CHECK: rt.call @unary_backward({{.*}}, %c0_i32, %c0_i32, {{.*}}, %c24_i64, %[[ZERO]], %[[ZERO]])
// CHECK: rt.call @unary_backward({{.*}}, %c0_i32, %c5_i32, {{.*}}, %c8_i64, %[[ZERO]], %[[ZERO]])
// CHECK: rt.call @unary_backward({{.*}}, %c0_i32, %c7_i32, {{.*}}, %c24_i64, %[[TWO]], %[[ZERO]])
fsdp.model @math {
  fsdp.module @root kind "Net" unit {
    fsdp.param @w : tensor<4x3xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%x: tensor<2x4x3xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
      %padded = nn.pad %labels {dim = 1 : i64, low = 0 : i64, high = 1 : i64, value = -100.0 : f64} : (tensor<2x4xi64>) -> tensor<2x5xi64>
      %shifted = nn.slice %padded {dim = 1 : i64, start = 1 : i64, end = 5 : i64} : (tensor<2x5xi64>) -> tensor<2x4xi64>
      %w = fsdp.get_param @w : tensor<4x3xf32>
      %h = nn.mul %x, %w : (tensor<2x4x3xf32>, tensor<4x3xf32>) -> tensor<2x4x3xf32>
      %sq = nn.pow %h {exponent = 2.0 : f64} : tensor<2x4x3xf32>
      %ms = nn.reduce_mean %sq {dims = array<i64: 2>, keepdim} : (tensor<2x4x3xf32>) -> tensor<2x4x1xf32>
      %r = nn.rsqrt %ms : tensor<2x4x1xf32>
      %n = nn.div %h, %r : (tensor<2x4x3xf32>, tensor<2x4x1xf32>) -> tensor<2x4x3xf32>
      %th = nn.tanh %n : tensor<2x4x3xf32>
      %e = nn.erf %th : tensor<2x4x3xf32>
      %t = nn.atan %e : tensor<2x4x3xf32>
      %flat = nn.reshape %t : tensor<2x4x3xf32> to tensor<8x3xf32>
      %targets = nn.reshape %shifted : tensor<2x4xi64> to tensor<8xi64>
      %loss = nn.cross_entropy %flat, %targets : (tensor<8x3xf32>, tensor<8xi64>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
