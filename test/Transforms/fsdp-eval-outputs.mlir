// The root forward's named outputs after the loss (here "y") are results of
// an eval step, one per micro-batch, and the program says where each is;
// a train step drops them (nothing reads them).
// RUN: fsdp-opt %s --fsdp-build-train-step="mode=eval grad-accum-steps=2" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-build-train-step="grad-accum-steps=2" | FileCheck %s --check-prefix=TRAIN
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval grad-accum-steps=2 lower=true" | FileCheck %s --check-prefix=PROGRAM

// CHECK-LABEL: func.func @net_eval_step(
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<2x4xf32> {fsdp.micro_batch = 0 : i64, fsdp.output = "y"}, tensor<2x4xf32> {fsdp.micro_batch = 1 : i64, fsdp.output = "y"}

// TRAIN-LABEL: func.func @net_train_step(
// TRAIN-NOT: fsdp.output
// TRAIN: return

// PROGRAM: \22outputs\22:[{\22dtype\22:\22f32\22,\22micro_batch\22:0,\22name\22:\22y\22,\22offset\22:{{[0-9]+}},\22shape\22:[2,4]},{\22dtype\22:\22f32\22,\22micro_batch\22:1,\22name\22:\22y\22,\22offset\22:{{[0-9]+}},\22shape\22:[2,4]}]

fsdp.model @net {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4x4xf32> init <normal(0.0, 0.5)>
    fsdp.forward (%x: tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>) {
      %w = fsdp.get_param @w : tensor<4x4xf32>
      %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return {names = ["loss", "y"]} %l, %y : tensor<f32>, tensor<2x4xf32>
    }
  }
}
