// The train-step contract (TrainStep.h): every fsdp attribute is one the
// dialect declares, of its type, where it may appear; a function carrying
// fsdp.model gives every argument and result exactly one role.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

// A complete step: accepted and printed back with its typed attributes.
func.func @valid(%w: tensor<4xf32> {fsdp.param = "fc.weight"},
                 %m: tensor<4xf32> {fsdp.state = "fc.weight.momentum_buffer"},
                 %n: tensor<i64> {fsdp.step_count},
                 %b: tensor<4xf32> {fsdp.buffer = "running_mean"},
                 %x: tensor<4xf32> {fsdp.input = 0 : i64, fsdp.micro_batch = 0 : i64})
    -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.grad_norm})
    attributes {fsdp.model = @m, fsdp.micro_batches = 1 : i64,
                fsdp.grad_sync = #fsdp<grad_sync every_micro_batch>} {
  %l = arith.constant {fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""} dense<0.0> : tensor<f32>
  return %l, %l : tensor<f32>, tensor<f32>
}

// -----

// expected-error @+1 {{argument #1 of the train step has no role; expected one of fsdp.param, fsdp.state, fsdp.step_count, fsdp.buffer, fsdp.input, fsdp.flat_param}}
func.func @missing_role(%w: tensor<4xf32> {fsdp.param = "w"}, %x: tensor<4xf32>)
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 of the train step has several roles: fsdp.param, fsdp.buffer}}
func.func @two_roles(%w: tensor<4xf32> {fsdp.param = "w", fsdp.buffer = "w"})
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 attribute 'fsdp.param' must be a parameter name (non-empty string), got 3 : i64}}
func.func @mistyped_role(%w: tensor<4xf32> {fsdp.param = 3 : i64})
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 attribute 'fsdp.param' must be a parameter name (non-empty string), got ""}}
func.func @empty_name(%w: tensor<4xf32> {fsdp.param = ""})
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{result #0 carries 'fsdp.input', which is not valid on a result}}
func.func @misplaced_role(%x: tensor<f32> {fsdp.input = 0 : i64, fsdp.micro_batch = 0 : i64})
    -> (tensor<f32> {fsdp.input = 0 : i64}) attributes {fsdp.model = @m} {
  return %x : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 has an unknown fsdp attribute 'fsdp.parameter'}}
func.func @unknown_role(%w: tensor<4xf32> {fsdp.parameter = "w"})
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 carries 'fsdp.input' without 'fsdp.micro_batch'}}
func.func @input_without_micro_batch(%x: tensor<4xf32> {fsdp.input = 0 : i64})
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{argument #0 carries 'fsdp.frozen' without 'fsdp.flat_param'}}
func.func @frozen_without_flat_param(%w: tensor<4xf32> {fsdp.param = "w", fsdp.frozen})
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{result #1 carries 'fsdp.frozen', which is not valid on a result}}
func.func @frozen_result(%w: tensor<4xf32> {fsdp.flat_param = "", fsdp.frozen})
    -> (tensor<f32> {fsdp.loss}, tensor<4xf32> {fsdp.flat_param = "", fsdp.frozen}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error @+1 {{argument #0 carries 'fsdp.flat_state' without 'fsdp.flat_param'}}
func.func @state_without_flat_param(%s: tensor<4xf32> {fsdp.state = "w.exp_avg", fsdp.flat_state = "exp_avg"})
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{is a train step and must return one 'fsdp.loss' result, found 0}}
func.func @no_loss(%n: tensor<i64> {fsdp.step_count})
    -> (tensor<i64> {fsdp.step_count}) attributes {fsdp.model = @m} {
  return %n : tensor<i64>
}

// -----

// expected-error @+1 {{result #1 of the train step has no role; expected one of fsdp.loss, fsdp.grad_norm, fsdp.found_inf, fsdp.output, fsdp.param, fsdp.state, fsdp.step_count, fsdp.buffer, fsdp.flat_param}}
func.func @result_without_role(%n: tensor<i64> {fsdp.step_count})
    -> (tensor<f32> {fsdp.loss}, tensor<i64>) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %n : tensor<f32>, tensor<i64>
}

// -----

// expected-error @+1 {{is a train step and must return one 'fsdp.loss' result, found 2}}
func.func @two_losses() -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.loss})
    attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %l : tensor<f32>, tensor<f32>
}

// -----

// expected-error @+1 {{is a sharded train step only with both 'fsdp.mesh' and 'fsdp.strategy'}}
func.func @mesh_without_strategy() -> (tensor<f32> {fsdp.loss})
    attributes {fsdp.model = @m, fsdp.mesh = #fsdp.mesh<shard = 2>} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{attribute 'fsdp.strategy' must be #fsdp<strategy full_shard|shard_grad_op|no_shard|hybrid_shard|hybrid_shard_zero2>, got "full-shard"}}
func.func @strategy_as_string() -> (tensor<f32> {fsdp.loss})
    attributes {fsdp.model = @m, fsdp.mesh = #fsdp.mesh<shard = 2>, fsdp.strategy = "full-shard"} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @phase_as_string() -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  // expected-error @+1 {{attribute 'fsdp.phase' must be #fsdp<phase forward|backward|optimizer>, got "forward"}}
  %l = arith.constant {fsdp.phase = "forward"} dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

// expected-error @+1 {{attribute 'fsdp.micro_batches' must be a micro-batch count (i64 >= 1), got 0 : i64}}
func.func @no_micro_batches() -> (tensor<f32> {fsdp.loss})
    attributes {fsdp.model = @m, fsdp.micro_batches = 0 : i64} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @model_on_an_op() {
  // expected-error @+1 {{carries 'fsdp.model', which only a train step (func.func) may}}
  %l = arith.constant {fsdp.model = @m} dense<0.0> : tensor<f32>
  return
}

// -----

// expected-error @+1 {{carries 'fsdp.loss', which is not valid on an operation}}
func.func @loss_on_the_function() attributes {fsdp.loss} {
  return
}

// -----

// At most one found-inf flag, as at most one gradient norm.
// expected-error @+1 {{returns 2 'fsdp.found_inf' results}}
func.func @two_flags(%n: tensor<i64> {fsdp.step_count})
    -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.found_inf},
        tensor<f32> {fsdp.found_inf}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %l, %l : tensor<f32>, tensor<f32>, tensor<f32>
}

// -----

func.func @accumulation_is_a_unit_attribute(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{attribute 'fsdp.grad_accumulation' must be a unit attribute, got 1 : i64}}
  %s = nn.add %a, %a {fsdp.grad_accumulation = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// expected-error @+1 {{result #1 is a model output ('fsdp.output'), which only an eval step (mode=eval) returns}}
func.func @output_of_train_step(%n: tensor<i64> {fsdp.step_count})
    -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.output = "y", fsdp.micro_batch = 0 : i64})
    attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %l : tensor<f32>, tensor<f32>
}

// -----

// expected-error @+1 {{result #1 carries 'fsdp.output' without 'fsdp.micro_batch'}}
func.func @output_without_micro_batch(%n: tensor<i64> {fsdp.step_count})
    -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.output = "y"})
    attributes {fsdp.model = @m, fsdp.eval} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l, %l : tensor<f32>, tensor<f32>
}

// -----

// fsdp.unreached (the parameters the loss does not reach) lists names.
// expected-error @+1 {{attribute 'fsdp.unreached' must be a list of parameter names, got [3]}}
func.func @unreached_not_names(%w: tensor<4xf32> {fsdp.param = "w"})
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m, fsdp.unreached = [3]} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
