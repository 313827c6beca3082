// mode=eval: the forward alone, as model.eval() under torch.no_grad():
// dropout is the identity, BatchNorm normalises with its running statistics
// and leaves them as they are, and there is no backward, gradient,
// optimizer or state. Sharded, every flat parameter is frozen (gathered,
// never reduced) and the program says mode "eval".
// RUN: fsdp-opt %s --fsdp-build-train-step="mode=eval" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval" | FileCheck %s --check-prefix=SHARD
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2 mode=eval lower=true" | FileCheck %s --check-prefix=PROGRAM
// RUN: not fsdp-opt %s --fsdp-build-train-step="mode=inference" 2>&1 | FileCheck %s --check-prefix=BADMODE
// RUN: not fsdp-opt %s --fsdp-build-train-step="mode=eval clip-grad-norm=1" 2>&1 | FileCheck %s --check-prefix=CLIP

// CHECK-LABEL: func.func @net_eval_step(
// CHECK-NOT: fsdp.state
// CHECK-SAME: attributes {{{.*}}fsdp.eval
// CHECK-NOT: nn.dropout
// CHECK: nn.batch_norm
// CHECK-NOT: training
// CHECK-SAME: -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NOT: phase backward
// CHECK-NOT: fsdp.sgd_step
// CHECK: return

// SHARD-LABEL: func.func @net_eval_step(
// SHARD-SAME: fsdp.flat_param = "", fsdp.frozen
// SHARD: fsdp.unshard
// SHARD-NOT: fsdp.reduce_grads
// SHARD-NOT: fsdp.sgd_step
// SHARD: return

// PROGRAM: \22mode\22:\22eval\22
// PROGRAM-SAME: \22optimizer\22:\22none\22

// BADMODE: error: fsdp-build-train-step: mode must be train or eval, got 'inference'
// CLIP: error: 'fsdp.model' op is built for evaluation (mode=eval), which has no gradients for loss scaling or clipping

fsdp.model @net {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4x4xf32> init <normal(0.0, 0.5)>
    fsdp.param @gamma : tensor<4xf32> init <ones>
    fsdp.param @beta : tensor<4xf32> init <zeros>
    fsdp.buffer @running_mean : tensor<4xf32> init <zeros>
    fsdp.buffer @running_var : tensor<4xf32> init <ones>
    fsdp.forward (%x: tensor<2x4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4x4xf32>
      %g = fsdp.get_param @gamma : tensor<4xf32>
      %b = fsdp.get_param @beta : tensor<4xf32>
      %rm = fsdp.get_buffer @running_mean : tensor<4xf32>
      %rv = fsdp.get_buffer @running_var : tensor<4xf32>
      %h = nn.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
      %d = nn.dropout %h {p = 0.5 : f64, rng_id = 0 : i64} : tensor<2x4xf32>
      %y, %m, %v = nn.batch_norm %d, %g, %b, %rm, %rv {training} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>)
      fsdp.set_buffer @running_mean, %m : tensor<4xf32>
      fsdp.set_buffer @running_var, %v : tensor<4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
