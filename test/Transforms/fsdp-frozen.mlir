// Frozen parameters (requires_grad = false) beside trainable ones in a unit:
// each unit's frozen parameters are a second flat parameter (fsdp.frozen),
// sharded and gathered with the unit, never reduced nor updated; the report
// says what that saves and the program describes a frozen unit without state.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 optimizer=adamw auto-wrap-policy=none" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 optimizer=adamw auto-wrap-policy=none" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 optimizer=adamw auto-wrap-policy=none grad-accum-steps=2" --fsdp-report=json=true -o /dev/null | %python -c "import json,sys; f=json.load(sys.stdin)['steps'][0]['frozen']; print(*sorted(f.items()))" | FileCheck %s --check-prefix=JSON
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 optimizer=adamw auto-wrap-policy=none lower=true" | FileCheck %s --check-prefix=PROGRAM

// Arguments: the trainable flat parameters (root: w2; fc1: its bias), then
// the frozen ones (root: scale, 4 elements over 2 ranks; fc1: its weight),
// then AdamW's two states for the trainable ones only.
// CHECK-LABEL: func.func @tune_train_step(
// CHECK-SAME: %arg0: tensor<4xf32> {fsdp.flat_numel = 8 : i64, fsdp.flat_param = "", fsdp.offsets = array<i64: 0>, fsdp.params = ["w2"]}
// CHECK-SAME: %arg1: tensor<2xf32> {fsdp.flat_numel = 4 : i64, fsdp.flat_param = "fc1", fsdp.offsets = array<i64: 0>, fsdp.params = ["fc1.bias"]}
// CHECK-SAME: %arg2: tensor<2xf32> {fsdp.flat_numel = 4 : i64, fsdp.flat_param = "", fsdp.frozen, fsdp.offsets = array<i64: 0>, fsdp.params = ["scale"]}
// CHECK-SAME: %arg3: tensor<8xf32> {fsdp.flat_numel = 16 : i64, fsdp.flat_param = "fc1", fsdp.frozen, fsdp.offsets = array<i64: 0>, fsdp.params = ["fc1.weight"]}
// CHECK-SAME: %arg4: tensor<4xf32> {fsdp.flat_param = "", fsdp.flat_state = "exp_avg"}
// CHECK-NOT: fsdp.frozen
// CHECK-SAME: -> (tensor<f32> {fsdp.loss}, tensor<4xf32> {fsdp.flat_param = ""}, tensor<2xf32> {fsdp.flat_param = "fc1"}, tensor<4xf32>
// The frozen weight is gathered for the forward and again for the backward
// (its input's gradient needs it); the frozen scale only for the forward
// (nothing in the backward reads it). Only the two trainable flat parameters
// are reduced and updated.
// CHECK: fsdp.unshard %arg2 unit "" {{.*}}phase forward
// CHECK: fsdp.unshard %arg3 unit "fc1" {{.*}}phase forward
// CHECK: fsdp.reshard {{.*}} unit "fc1" {{.*}}phase forward
// CHECK-NOT: fsdp.unshard %arg2
// CHECK: fsdp.reduce_grads %{{.*}} unit "" {{.*}} : tensor<8xf32> -> tensor<4xf32>
// CHECK-NOT: fsdp.unshard %arg2
// CHECK: fsdp.unshard %arg3 unit "fc1" {{.*}}phase backward
// CHECK: fsdp.reduce_grads %{{.*}} unit "fc1" {{.*}} : tensor<4xf32> -> tensor<2xf32>
// CHECK-NOT: fsdp.reduce_grads
// CHECK-COUNT-2: fsdp.adamw_step
// CHECK-NOT: fsdp.adamw_step

// REPORT: frozen parameters: 20 elements in 2 flat parameter(s) (10 per rank), gathered but never reduced or updated: per rank 40 bytes of gradient and 80 bytes of optimizer state not held, 20 gradient elements per step not reduced
// REPORT: all_gather{{ +}}fc1{{ +}}forward{{ +}}f32{{ +}}16
// REPORT-NOT: reduce_scatter{{ +}}fc1{{ +}}backward{{ +}}f32{{ +}}16

// Two micro-batches reduce each gradient twice: twice the elements saved.
// JSON: ('elements', 20) ('flat_params', 2) ('gradient_bytes_saved', 40) ('optimizer_state_bytes_saved', 80) ('reduced_elements_saved', 40) ('shard_elements', 10)

// PROGRAM: \22flat_numel\22:16,\22frozen\22:true,\22ignored\22:false,\22name\22:\22fc1\22,{{.*}}\22params\22:[{\22flat_offset\22:0,{{.*}}\22name\22:\22fc1.weight\22,\22shape\22:[4,4]}],\22rank_local\22:false,\22shard_numel\22:8,\22state\22:[]

fsdp.model @tune {
  fsdp.module @root kind "Tune" {
    fsdp.param @scale : tensor<4xf32> init <ones> {requires_grad = false}
    fsdp.param @w2 : tensor<2x4xf32> init <normal(0.0, 0.5)>
    fsdp.module @fc1 kind "Linear" unit {
      fsdp.param @weight : tensor<4x4xf32> init <normal(0.0, 0.5)> {requires_grad = false}
      fsdp.param @bias : tensor<4xf32> init <zeros>
      fsdp.forward (%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
        %w = fsdp.get_param @weight : tensor<4x4xf32>
        %b = fsdp.get_param @bias : tensor<4xf32>
        %y = nn.linear %x, %w, %b : (tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
        fsdp.return %y : tensor<3x4xf32>
      }
    }
    fsdp.forward (%x: tensor<3x4xf32>, %target: tensor<3x2xf32>) -> tensor<f32> {
      %s = fsdp.get_param @scale : tensor<4xf32>
      %w2 = fsdp.get_param @w2 : tensor<2x4xf32>
      %0 = nn.mul %x, %s : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %1 = fsdp.call @fc1(%0) : (tensor<3x4xf32>) -> tensor<3x4xf32>
      %2 = nn.relu %1 : tensor<3x4xf32>
      %3 = fsdp.call @fc1(%2) : (tensor<3x4xf32>) -> tensor<3x4xf32>
      %4 = nn.linear %3, %w2 : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
      %loss = nn.mse_loss %4, %target : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
