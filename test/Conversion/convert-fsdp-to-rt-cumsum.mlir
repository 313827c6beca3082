// nn.cumsum lowers to cumsum (dtype, input, its shape, dim, reverse): the
// ids' running sum in i64 (dtype 4), the float one in f32 (dtype 0), and
// its VJP, the reversed cumsum (reverse = 1) of the cotangent.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s

// CHECK-LABEL: func.func @cumsum_train_step(
// CHECK-DAG: rt.call @cumsum({{.*}}, %c4_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}}, %c1_i32, %c0_i32, %{{.*}}, %{{.*}})
// CHECK-DAG: rt.call @cumsum({{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}}, %c1_i32, %c0_i32, %{{.*}}, %{{.*}})
// CHECK: rt.call @cumsum({{.*}}, %c0_i32, %{{.*}}, %{{.*}}, %c2_i32, %{{.*}}, %c1_i32, %c1_i32, %{{.*}}, %{{.*}})
fsdp.model @cumsum {
  fsdp.module @root kind "Net" unit {
    fsdp.param @w : tensor<2x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @table : tensor<16x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%ids: tensor<2x4xi64>) -> tensor<f32> {
      %pos = nn.cumsum %ids {dim = 1 : i64} : tensor<2x4xi64>
      %table = fsdp.get_param @table : tensor<16x4xf32>
      %e = nn.embedding %pos, %table : (tensor<2x4xi64>, tensor<16x4xf32>) -> tensor<2x4x4xf32>
      %es = nn.reduce_sum %e {dims = array<i64: 2>} : (tensor<2x4x4xf32>) -> tensor<2x4xf32>
      %w = fsdp.get_param @w : tensor<2x4xf32>
      %c = nn.cumsum %w {dim = 1 : i64} : tensor<2x4xf32>
      %p = nn.mul %c, %es : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %loss = nn.reduce_sum %p {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
