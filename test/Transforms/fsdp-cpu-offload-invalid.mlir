// An optimizer update reading a step argument that offload does not hold in
// host memory (here an input, as a hand-written step could) is an error
// naming the argument, not a crash.
// RUN: fsdp-opt %s --fsdp-cpu-offload -verify-diagnostics -o /dev/null

fsdp.model @m {
  fsdp.module @root kind "M" unit {
    fsdp.param @w : tensor<4xf32> init <zeros>
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4xf32>
      %y = nn.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
func.func @m_train_step(%arg0: tensor<4xf32> {fsdp.flat_param = "", fsdp.params = ["w"], fsdp.offsets = array<i64: 0>, fsdp.flat_numel = 4 : i64}, %arg1: tensor<i64> {fsdp.step_count}, %arg2: tensor<4xf32> {fsdp.input = 0 : i64, fsdp.micro_batch = 0 : i64}) -> (tensor<f32> {fsdp.loss}, tensor<4xf32> {fsdp.flat_param = ""}, tensor<i64> {fsdp.step_count}) attributes {fsdp.model = @m, fsdp.mesh = #fsdp.mesh<shard = 1>, fsdp.strategy = #fsdp<strategy full_shard>, fsdp.micro_batches = 1 : i64, fsdp.grad_sync = #fsdp<grad_sync every_micro_batch>} {
  %l = nn.reduce_sum %arg2 {dims = array<i64: 0>, fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""} : (tensor<4xf32>) -> tensor<f32>
  // expected-error @+1 {{reads argument #2, which is neither offloaded nor computed by the step}}
  %p = fsdp.sgd_step %arg0, %arg2 step %arg1 {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", lr = 1.0e-2 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return %l, %p, %arg1 : tensor<f32>, tensor<4xf32>, tensor<i64>
}
