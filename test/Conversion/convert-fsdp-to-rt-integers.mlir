// Integer arithmetic and casts lower to the same entry points as float
// ones, with integer dtype codes: binary_forward of i64 (dtype 4) with
// FSDPRT_MUL (2) and FSDPRT_ADD (0), cast from an f32 mask (0) to i32 (3)
// and from i32 to i64.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s

// CHECK-LABEL: func.func @positions_train_step(
// CHECK: rt.call @cast({{.*}}, %c4_i32, %{{.*}}, %{{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %c8_i64)
// CHECK: rt.call @binary_forward({{.*}}, %c0_i32, %c1_i32,
// CHECK: rt.call @cast({{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %c3_i32, %{{.*}}, %{{.*}}, %c8_i64)
// CHECK: rt.call @cast({{.*}}, %c3_i32, %{{.*}}, %{{.*}}, %c4_i32, %{{.*}}, %{{.*}}, %c8_i64)
// CHECK: rt.call @binary_forward({{.*}}, %c4_i32, %c2_i32,
// CHECK: rt.call @binary_forward({{.*}}, %c4_i32, %c0_i32,
// CHECK: rt.call @embedding_forward(
fsdp.model @positions {
  fsdp.module @root kind "Net" unit {
    fsdp.param @table : tensor<8x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%ids: tensor<2x4xi64>) -> tensor<f32> {
      %f = nn.cast %ids : tensor<2x4xi64> to tensor<2x4xf32>
      %pad = arith.constant dense<1.0> : tensor<f32>
      %keep = nn.sub %f, %pad : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
      %mask = nn.cast %keep : tensor<2x4xf32> to tensor<2x4xi32>
      %wide = nn.cast %mask : tensor<2x4xi32> to tensor<2x4xi64>
      %sq = nn.mul %wide, %wide : (tensor<2x4xi64>, tensor<2x4xi64>) -> tensor<2x4xi64>
      %one = arith.constant dense<1> : tensor<i64>
      %pos = nn.add %sq, %one : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
      %table = fsdp.get_param @table : tensor<8x4xf32>
      %e = nn.embedding %pos, %table : (tensor<2x4xi64>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
      %loss = nn.reduce_sum %e {dims = array<i64: 0, 1, 2>} : (tensor<2x4x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
