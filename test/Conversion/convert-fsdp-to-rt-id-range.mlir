// The labels an nn.id_range bounds (a one-hot of class labels, as F.one_hot
// and cross_entropy with class weights build one) reach the program
// description as the input's max_id and ignore_id, through a reshape, so the
// runner checks every batch it loads against them; the op itself renames its
// operand and runs no kernel.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=1 sharding-strategy=no-shard optimizer=sgd" --convert-fsdp-to-rt | FileCheck %s --check-prefix=PROGRAM

// PROGRAM: {\22dtype\22:\22i64\22,\22ignore_id\22:-1,\22index\22:1,\22max_id\22:3,

// CHECK-LABEL: func.func @one_hot_train_step(
// CHECK-NOT: id_range

fsdp.model @one_hot {
  fsdp.module @root kind "Net" unit {
    fsdp.param @w : tensor<3xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%x: tensor<8x3xf32>, %labels: tensor<2x4xi64>) -> tensor<f32> {
      %flat = nn.reshape %labels : tensor<2x4xi64> to tensor<8xi64>
      %ids = nn.id_range %flat {count = 3 : i64, ignore = -1 : i64} : tensor<8xi64>
      %f = nn.cast %ids : tensor<8xi64> to tensor<8xf32>
      %col = nn.reshape %f : tensor<8xf32> to tensor<8x1xf32>
      %w = fsdp.get_param @w : tensor<3xf32>
      %h = nn.mul %x, %w : (tensor<8x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
      %m = nn.mul %h, %col : (tensor<8x3xf32>, tensor<8x1xf32>) -> tensor<8x3xf32>
      %loss = nn.reduce_mean %m {dims = array<i64: 0, 1>} : (tensor<8x3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
