// nn.random lowers to rng_fill (dtype f32 = 0, distribution normal = 1, the
// result's buffer, numel, a, b, the run's seed, the step, the site's key).
// The step has S = 2 random sites (the draw and the dropout), so rank r
// keys the draw r * 2 + (9 << 32 | 0): the draws of N ranks are those of
// one rank with N micro-batches, as the dropout's masks.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s

// CHECK-LABEL: func.func @draws_train_step(
// CHECK-SAME: %[[SEED:[a-z0-9_]+]]: i64 {rt.name = "seed"}, %[[RANK:[a-z0-9_]+]]: i64 {rt.name = "rank"}
// CHECK: %[[FIRST:.*]] = arith.muli %[[RANK]], %c2_i64 : i64
// CHECK: %[[KEY:.*]] = arith.addi %[[FIRST]], %c38654705664_i64 : i64
// CHECK: rt.call @rng_fill(%{{.*}}, %{{.*}}, %c0_i32, %c1_i32, %{{.*}}, %{{.*}}, %c4_i64, %{{.*}}, %{{.*}}, %[[SEED]], %{{.*}}, %[[KEY]])
// CHECK: arith.muli %[[RANK]], %c2_i64 : i64
// CHECK: rt.call @dropout_forward(
fsdp.model @draws {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <ones>
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4xf32>
      %n = nn.random {a = 0.0 : f64, b = 1.0 : f64, distribution = #nn.distribution<normal>, rng_id = 9 : i64} : tensor<4xf32>
      %h = nn.add %x, %n : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %m = nn.mul %h, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %d = nn.dropout %m {p = 0.5 : f64, rng_id = 7 : i64} : tensor<4xf32>
      %l = nn.reduce_sum %d {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
