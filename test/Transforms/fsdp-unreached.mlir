// Trainable parameters the loss does not reach (a pooler unit the forward
// never calls, a teacher weight read only under stop_gradient): torch
// leaves their .grad None and torch.optim skips them, so the step does not
// train them. fsdp-build-train-step names them on the step (fsdp.unreached)
// and gives them no gradient, state or update; fsdp-shard keeps them with
// the frozen parameters (the pooler, never read, is never gathered); the
// report names them before launch.
// RUN: fsdp-opt %s --fsdp-build-train-step="optimizer=adamw" | FileCheck %s --check-prefix=STEP
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 optimizer=adamw auto-wrap-policy=none" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 optimizer=adamw auto-wrap-policy=none" --fsdp-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 optimizer=adamw auto-wrap-policy=none" --fsdp-report=json=true -o /dev/null | %python -c "import json,sys; print(json.load(sys.stdin)['steps'][0]['unreached'])" | FileCheck %s --check-prefix=JSON

// STEP-LABEL: func.func @distill_train_step(
// STEP-SAME: {fsdp.param = "w"}, %arg1: tensor<2x4xf32> {fsdp.param = "teacher"}, %arg2: tensor<4x4xf32> {fsdp.param = "pooler.weight"}, %arg3: tensor<4xf32> {fsdp.param = "pooler.bias"}, %arg4: tensor<2x4xf32> {fsdp.state = "w.exp_avg"}, %arg5: tensor<2x4xf32> {fsdp.state = "w.exp_avg_sq"}, %arg6: tensor<i64> {fsdp.step_count}
// STEP-SAME: -> (tensor<f32> {fsdp.loss}, tensor<2x4xf32> {fsdp.param = "w"}, tensor<2x4xf32> {fsdp.state = "w.exp_avg"}, tensor<2x4xf32> {fsdp.state = "w.exp_avg_sq"}, tensor<i64> {fsdp.step_count})
// STEP-SAME: fsdp.unreached = ["teacher", "pooler.weight", "pooler.bias"]
// STEP-COUNT-1: fsdp.adamw_step
// STEP-NOT: fsdp.adamw_step

// CHECK-LABEL: func.func @distill_train_step(
// CHECK-SAME: fsdp.params = ["w"]
// CHECK-SAME: fsdp.flat_param = "", fsdp.frozen, fsdp.offsets = array<i64: 0>, fsdp.params = ["teacher"]
// CHECK-SAME: fsdp.flat_param = "pooler", fsdp.frozen, fsdp.offsets = array<i64: 0, 16>, fsdp.params = ["pooler.weight", "pooler.bias"]
// CHECK-NOT: unit "pooler"
// CHECK-COUNT-1: fsdp.reduce_grads
// CHECK-NOT: fsdp.reduce_grads
// CHECK-NOT: unit "pooler"
// CHECK: return

// REPORT: not reached by the loss, so not trained (torch's .grad None: no gradient, state or update; with the frozen parameters above): 3 parameter(s): teacher, pooler.weight, pooler.bias
// JSON: ['teacher', 'pooler.weight', 'pooler.bias']

fsdp.model @distill {
  fsdp.module @root kind "Distill" {
    fsdp.param @w : tensor<2x4xf32> init <normal(0.0, 0.5)>
    fsdp.param @teacher : tensor<2x4xf32> init <normal(0.0, 0.5)>
    fsdp.module @pooler kind "Linear" unit {
      fsdp.param @weight : tensor<4x4xf32> init <normal(0.0, 0.5)>
      fsdp.param @bias : tensor<4xf32> init <zeros>
      fsdp.forward (%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
        %w = fsdp.get_param @weight : tensor<4x4xf32>
        %b = fsdp.get_param @bias : tensor<4xf32>
        %y = nn.linear %x, %w, %b : (tensor<3x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
        fsdp.return %y : tensor<3x4xf32>
      }
    }
    fsdp.forward (%x: tensor<3x4xf32>, %target: tensor<3x2xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<2x4xf32>
      %t = fsdp.get_param @teacher : tensor<2x4xf32>
      %frozen = nn.stop_gradient %t : tensor<2x4xf32>
      %y = nn.linear %x, %w : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
      %ty = nn.linear %x, %frozen : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
      %z = nn.add %y, %ty : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
      %loss = nn.mse_loss %z, %target : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
