// Units mixing checkpointing policies in the IR: `first` is selective
// (#fsdp.unit<activation_checkpointing = selective>: relu recomputed, its
// linears kept), `second` whole-unit (activation_checkpointing = true:
// the linear recomputed as well). A unit's own policy wins over the
// policy the pass gives the kinds it names, either way.
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations | FileCheck %s
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Block" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-build-train-step --fsdp-checkpoint-activations="kinds=Block policy=selective" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 auto-wrap-policy=none" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=REPORT

// Each unit: z = linear(relu(linear(x, w1)), w2); the backward reads the
// relu's output h (z's weight gradient) and y (relu's gradient).
// CHECK-LABEL: func.func @net_train_step(
// CHECK: %[[Y1:.*]] = nn.linear %arg{{.*}}phase forward{{.*}}unit = "first"
// CHECK: %[[Y2:.*]] = nn.linear %arg{{.*}}phase forward{{.*}}unit = "second"
// CHECK-NOT: nn.linear {{.*}}phase backward{{.*}}unit = "first"
// CHECK: %[[Y2R:.*]] = nn.linear %arg{{.*}}phase backward{{.*}}unit = "second"
// CHECK: nn.relu %[[Y2R]] {{.*}}phase backward{{.*}}unit = "second"
// CHECK: nn.relu_grad %{{.*}}, %[[Y2R]] {{.*}}unit = "second"
// CHECK-NOT: nn.linear {{.*}}phase backward{{.*}}unit = "first"
// CHECK: nn.relu %[[Y1]] {{.*}}phase backward{{.*}}unit = "first"
// CHECK: nn.relu_grad %{{.*}}, %[[Y1]] {{.*}}unit = "first"
// CHECK: return

// Activations kept for the backward (64 x 16 floats = 4096 bytes a tensor,
// per rank): first's y only (its h is recomputed, second keeps nothing).
// REPORT: activations for backward{{ +}}4096

fsdp.model @net {
  fsdp.module @root kind "Net" {
    fsdp.module @first kind "Block" unit<activation_checkpointing = selective> {
      fsdp.param @w1 : tensor<16x8xf32> init <normal(0.0, 0.5)>
      fsdp.param @w2 : tensor<16x16xf32> init <normal(0.0, 0.5)>
      fsdp.forward (%x: tensor<64x8xf32>) -> tensor<64x16xf32> {
        %w1 = fsdp.get_param @w1 : tensor<16x8xf32>
        %w2 = fsdp.get_param @w2 : tensor<16x16xf32>
        %y = nn.linear %x, %w1 : (tensor<64x8xf32>, tensor<16x8xf32>) -> tensor<64x16xf32>
        %h = nn.relu %y : tensor<64x16xf32>
        %z = nn.linear %h, %w2 : (tensor<64x16xf32>, tensor<16x16xf32>) -> tensor<64x16xf32>
        fsdp.return %z : tensor<64x16xf32>
      }
    }
    fsdp.module @second kind "Block" unit<activation_checkpointing = true> {
      fsdp.param @w1 : tensor<16x8xf32> init <normal(0.0, 0.5)>
      fsdp.param @w2 : tensor<16x16xf32> init <normal(0.0, 0.5)>
      fsdp.forward (%x: tensor<64x8xf32>) -> tensor<64x16xf32> {
        %w1 = fsdp.get_param @w1 : tensor<16x8xf32>
        %w2 = fsdp.get_param @w2 : tensor<16x16xf32>
        %y = nn.linear %x, %w1 : (tensor<64x8xf32>, tensor<16x8xf32>) -> tensor<64x16xf32>
        %h = nn.relu %y : tensor<64x16xf32>
        %z = nn.linear %h, %w2 : (tensor<64x16xf32>, tensor<16x16xf32>) -> tensor<64x16xf32>
        fsdp.return %z : tensor<64x16xf32>
      }
    }
    fsdp.forward (%x: tensor<64x8xf32>) -> tensor<f32> {
      %a = fsdp.call @first(%x) : (tensor<64x8xf32>) -> tensor<64x16xf32>
      %b = fsdp.call @second(%x) : (tensor<64x8xf32>) -> tensor<64x16xf32>
      %s = nn.add %a, %b : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
      %l = nn.reduce_sum %s {dims = array<i64: 0, 1>} : (tensor<64x16xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
