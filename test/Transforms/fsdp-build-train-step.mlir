// The train step's interface, units, optimizer and accumulation options.
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="lr=0.1 momentum=0.9 nesterov=true" | FileCheck %s --check-prefix=SGD
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-build-train-step="optimizer=adamw lr=0.01" | FileCheck %s --check-prefix=UNITS
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step="grad-accum-steps=2 no-sync=true" | FileCheck %s --check-prefix=ACCUM
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step="optimizer=adamw clip-grad-norm=1.0 weight-decay=0.0" | FileCheck %s --check-prefix=CLIP
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step | FileCheck %s --check-prefix=DEFAULT
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="optimizer=adam weight-decay=0.1" | FileCheck %s --check-prefix=ADAM
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="optimizer=adam" | FileCheck %s --check-prefix=ADAM-DEFAULT
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-build-train-step="optimizer=lion" | FileCheck %s --check-prefix=LION
// RUN: fsdp-opt %examples/mlp.mlir --fsdp-pipeline="world-size=2 optimizer=lion lr=3e-4 beta1=0.95 beta2=0.98 weight-decay=0.1 lower=true" | FileCheck %s --check-prefix=LION-CALLS

// Lion: one state tensor (exp_avg), the paper's defaults lr 1e-4, betas
// (0.9, 0.99) and weight decay 0 (the op's defaults, so not printed).
// LION: %arg6: tensor<32x16xf32> {fsdp.state = "fc1.weight.exp_avg"}, %arg7: tensor<32xf32> {fsdp.state = "fc1.bias.exp_avg"}
// LION-NOT: exp_avg_sq
// LION: fsdp.lion_step %arg0, %{{.*}}, %arg6 step %arg12 {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", lr = 1.000000e-04 : f64} : (tensor<32x16xf32>, tensor<32x16xf32>, tensor<32x16xf32>, tensor<i64>) -> (tensor<32x16xf32>, tensor<32x16xf32>)
// LION-CALLS: \22optimizer\22:\22lion\22
// LION-CALLS: llvm.call @fsdprt_lion_step({{.*}}) : (i64, i64, i32, i64, i64, i64, i64, i64, i64, i64, i64, f64, f64, f64, f64, i64, i64) -> i32

// torch.optim.Adam: adamw_step with the weight decay as an L2 penalty (and
// AdamW's state names); its default weight decay is 0, not AdamW's 0.01.
// ADAM: %arg6: tensor<32x16xf32> {fsdp.state = "fc1.weight.exp_avg"}
// ADAM: fsdp.adamw_step %arg0, {{.*}}l2_weight_decay, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-01 : f64}
// ADAM-DEFAULT: fsdp.adamw_step %arg0, {{.*}}l2_weight_decay, lr = 1.000000e-03 : f64, weight_decay = 0.000000e+00 : f64}

// The MLP with SGD + Nesterov momentum: every parameter (definition order),
// one momentum buffer per parameter, the step count, then the batch; results
// are the loss, the new parameters, buffers and step count.
// SGD-LABEL: func.func @mlp_train_step(
// SGD-SAME: %arg0: tensor<32x16xf32> {fsdp.param = "fc1.weight"}, %arg1: tensor<32xf32> {fsdp.param = "fc1.bias"}
// SGD-SAME: %arg6: tensor<32x16xf32> {fsdp.state = "fc1.weight.momentum_buffer"}
// SGD-SAME: %arg12: tensor<i64> {fsdp.step_count}
// SGD-SAME: %arg13: tensor<8x16xf32> {fsdp.input = 0 : i64, fsdp.micro_batch = 0 : i64}, %arg14: tensor<8x4xf32> {fsdp.input = 1 : i64, fsdp.micro_batch = 0 : i64})
// SGD-SAME: -> (tensor<f32> {fsdp.loss}, tensor<32x16xf32> {fsdp.param = "fc1.weight"}
// SGD-SAME: tensor<32x16xf32> {fsdp.state = "fc1.weight.momentum_buffer"}
// SGD-SAME: tensor<i64> {fsdp.step_count})
// SGD-SAME: attributes {fsdp.grad_sync = #fsdp<grad_sync every_micro_batch>, fsdp.micro_batches = 1 : i64, fsdp.model = @mlp}
// SGD: %[[LOSS:.*]] = nn.mse_loss {{.*}}fsdp.phase = #fsdp<phase forward>
// SGD: %[[P:.*]], %[[M:.*]] = fsdp.sgd_step %arg0, %{{.*}} momentum_buffer %arg6 step %arg12 {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov}
// SGD: %[[ONE:.*]] = arith.constant {{.*}}dense<1> : tensor<i64>
// SGD: %[[STEP:.*]] = arith.addi %arg12, %[[ONE]]
// SGD: return %[[LOSS]], %[[P]], {{.*}}, %[[M]], {{.*}}, %[[STEP]] :

// NestedWrappedModule with its manual units: each op names the unit whose
// forward, backward or update it belongs to; module.1.1's parameters are in
// module.1's flat parameter, module.0's and module.3's in the root's.
// UNITS-LABEL: func.func @nested_wrapped_train_step
// UNITS: nn.linear %{{.*}}, %arg0, %arg1 {fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""}
// UNITS: nn.linear %{{.*}}, %arg2, %arg3 {fsdp.phase = #fsdp<phase forward>, fsdp.unit = "module.1.0"}
// UNITS: nn.linear %{{.*}}, %arg4, %arg5 {fsdp.phase = #fsdp<phase forward>, fsdp.unit = "module.1"}
// UNITS: nn.linear %{{.*}}, %arg6, %arg7 {fsdp.phase = #fsdp<phase forward>, fsdp.unit = "module.2"}
// UNITS: nn.linear %{{.*}}, %arg8, %arg9 {fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""}
// UNITS: nn.reduce_sum {{.*}}fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""
// UNITS: nn.linear_grad %{{.*}}, %{{.*}}, %arg8 {fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""}
// UNITS: nn.linear_grad %{{.*}}, %{{.*}}, %arg6 {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.2"}
// UNITS: nn.linear_grad %{{.*}}, %{{.*}}, %arg4 {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.1"}
// UNITS: nn.linear_grad %{{.*}}, %{{.*}}, %arg2 {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "module.1.0"}
// The first layer's input is data: its weight and bias gradients alone.
// UNITS: nn.matmul %{{.*}}, %{{.*}} {fsdp.phase = #fsdp<phase backward>, fsdp.unit = "", transpose_lhs}
// UNITS: nn.reduce_sum %{{.*}} {dims = array<i64: 0>, fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""}
// UNITS: fsdp.adamw_step %arg0, {{.*}} {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", lr = 1.000000e-02 : f64}
// UNITS: fsdp.adamw_step %arg4, {{.*}} {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "module.1",
// UNITS: fsdp.adamw_step %arg8, {{.*}} {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "",

// Two micro-batches with no_sync: two sets of inputs, each micro-batch's
// loss seeded with 1/2, the gradients summed, the loss averaged.
// ACCUM-LABEL: func.func @accumulate_train_step(
// ACCUM-SAME: %arg2: tensor<2x4xf32> {fsdp.input = 0 : i64, fsdp.micro_batch = 0 : i64}, %arg3: tensor<2x4xf32> {fsdp.input = 0 : i64, fsdp.micro_batch = 1 : i64})
// ACCUM-SAME: fsdp.grad_sync = #fsdp<grad_sync last_micro_batch>, fsdp.micro_batches = 2 : i64
// ACCUM: %[[L0:.*]] = nn.reduce_sum {{.*}}fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase forward>
// ACCUM: arith.constant {fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""} dense<5.000000e-01> : tensor<f32>
// ACCUM: %[[G0:.*]] = nn.matmul {{.*}}fsdp.micro_batch = 0 : i64, fsdp.phase = #fsdp<phase backward>{{.*}}transpose_lhs
// ACCUM: %[[L1:.*]] = nn.reduce_sum {{.*}}fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase forward>
// ACCUM: %[[G1:.*]] = nn.matmul {{.*}}fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>{{.*}}transpose_lhs
// ACCUM: %[[G:.*]] = nn.add %[[G0]], %[[G1]] {fsdp.grad_accumulation, fsdp.micro_batch = 1 : i64, fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""}
// ACCUM: %[[SUM:.*]] = nn.add %[[L0]], %[[L1]]
// ACCUM: %[[LOSS:.*]] = nn.scale %[[SUM]] {factor = 5.000000e-01 : f64
// ACCUM: fsdp.sgd_step %arg0, %[[G]] step %arg1
// ACCUM: return %[[LOSS]],

// Clipping by the global norm, with a bf16 parameter: squares summed in f32,
// clip_grad_norm, the coefficient cast to each gradient's dtype; the norm is
// the second result.
// CLIP-LABEL: func.func @accumulate_train_step(
// CLIP-SAME: -> (tensor<f32> {fsdp.loss}, tensor<f32> {fsdp.grad_norm},
// CLIP: %[[C:.*]] = nn.cast %[[GW:[0-9]+]] {{.*}}: tensor<4x4xbf16> to tensor<4x4xf32>
// CLIP: %[[SQ:.*]] = nn.mul %[[C]], %[[C]]
// CLIP: %[[S:.*]] = nn.reduce_sum %[[SQ]] {dims = array<i64: 0, 1>
// CLIP: %[[NORM:.*]], %[[COEF:.*]] = fsdp.clip_grad_norm %[[S]] {fsdp.phase = #fsdp<phase optimizer>, fsdp.unit = "", max_norm = 1.000000e+00 : f64} : tensor<f32>
// CLIP: %[[CB:.*]] = nn.cast %[[COEF]] {{.*}}: tensor<f32> to tensor<bf16>
// CLIP: %[[CLIPPED:.*]] = nn.mul %[[GW]], %[[CB]]
// CLIP: fsdp.adamw_step %arg0, %[[CLIPPED]], {{.*}}weight_decay = 0.000000e+00 : f64
// CLIP: return %{{.*}}, %[[NORM]],
fsdp.model @accumulate {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4x4xbf16> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<2x4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4x4xbf16>
      %xb = nn.cast %x : tensor<2x4xf32> to tensor<2x4xbf16>
      %y = nn.linear %xb, %w : (tensor<2x4xbf16>, tensor<4x4xbf16>) -> tensor<2x4xbf16>
      %yf = nn.cast %y : tensor<2x4xbf16> to tensor<2x4xf32>
      %l = nn.reduce_sum %yf {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// A frozen parameter (requires_grad = false) is an input of the step but
// gets no gradient, no state and no update; so does a trainable parameter
// the loss does not reach (unused, or read only under stop_gradient):
// torch leaves its .grad None and torch.optim skips it, without weight
// decay. CLIP (AdamW): the reached parameter alone has Adam's state.
// DEFAULT-LABEL: func.func @frozen_train_step(
// DEFAULT-SAME: %arg0: tensor<4xf32> {fsdp.param = "frozen"}, %arg1: tensor<4xf32> {fsdp.param = "trained"}, %arg2: tensor<4xf32> {fsdp.param = "unused"}, %arg3: tensor<4xf32> {fsdp.param = "detached"}, %arg4: tensor<i64> {fsdp.step_count}
// DEFAULT-SAME: -> (tensor<f32> {fsdp.loss}, tensor<4xf32> {fsdp.param = "trained"}, tensor<i64> {fsdp.step_count})
// DEFAULT-NOT: fsdp.sgd_step %arg0
// DEFAULT: fsdp.sgd_step %arg1,
// DEFAULT-NOT: fsdp.sgd_step
// DEFAULT: return
// CLIP-LABEL: func.func @frozen_train_step(
// CLIP-SAME: {fsdp.param = "detached"}, %arg4: tensor<4xf32> {fsdp.state = "trained.exp_avg"}, %arg5: tensor<4xf32> {fsdp.state = "trained.exp_avg_sq"}, %arg6: tensor<i64> {fsdp.step_count})
fsdp.model @frozen {
  fsdp.module @root kind "Net" {
    fsdp.param @frozen : tensor<4xf32> init <ones> {requires_grad = false}
    fsdp.param @trained : tensor<4xf32> init <ones>
    fsdp.param @unused : tensor<4xf32> init <ones>
    fsdp.param @detached : tensor<4xf32> init <ones>
    fsdp.forward () -> tensor<f32> {
      %f = fsdp.get_param @frozen : tensor<4xf32>
      %t = fsdp.get_param @trained : tensor<4xf32>
      %d = fsdp.get_param @detached : tensor<4xf32>
      %s = nn.stop_gradient %d : tensor<4xf32>
      %ft = nn.mul %f, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %y = nn.mul %ft, %s : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// A tied weight (the embedding table reused by the output projection): the
// two cotangents are summed into one gradient and one update.
// DEFAULT-LABEL: func.func @tied_train_step(
// DEFAULT: %[[DLIN:.*]] = nn.matmul {{.*}}transpose_lhs{{.*}} -> tensor<6x3xf32>
// DEFAULT: %[[DEMB:.*]] = nn.embedding_grad {{.*}}fsdp.unit = "wte"{{.*}} -> tensor<6x3xf32>
// DEFAULT: %[[SUM:.*]] = nn.add %[[DLIN]], %[[DEMB]]
// DEFAULT: fsdp.sgd_step %arg0, %[[SUM]] {{.*}}fsdp.unit = ""
fsdp.model @tied {
  fsdp.module @root kind "GPT" {
    fsdp.module @wte kind "Embedding" unit {
      fsdp.param @weight : tensor<6x3xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%ids: tensor<4xi64>) -> tensor<4x3xf32> {
        %w = fsdp.get_param @weight : tensor<6x3xf32>
        %e = nn.embedding %ids, %w : (tensor<4xi64>, tensor<6x3xf32>) -> tensor<4x3xf32>
        fsdp.return %e : tensor<4x3xf32>
      }
    }
    fsdp.forward (%ids: tensor<4xi64>) -> tensor<f32> {
      %x = fsdp.call @wte(%ids) : (tensor<4xi64>) -> tensor<4x3xf32>
      %w = fsdp.get_param @wte::@weight : tensor<6x3xf32>
      %logits = nn.linear %x, %w : (tensor<4x3xf32>, tensor<6x3xf32>) -> tensor<4x6xf32>
      %loss = nn.cross_entropy %logits, %ids : (tensor<4x6xf32>, tensor<4xi64>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// Each inlined dropout draws its own mask: a module called twice, in each of
// two micro-batches, gives four distinct ids (7 << 32 | site); each VJP
// reuses its forward's id.
// ACCUM-LABEL: func.func @dropout_train_step(
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771072 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771073 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771073 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771072 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771074 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771075 : i64
fsdp.model @dropout {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <ones>
    fsdp.module @drop kind "Dropout" {
      fsdp.forward (%x: tensor<4xf32>) -> tensor<4xf32> {
        %y = nn.dropout %x {p = 0.5 : f64, rng_id = 7 : i64} : tensor<4xf32>
        fsdp.return %y : tensor<4xf32>
      }
    }
    fsdp.forward (%x: tensor<4xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4xf32>
      %h = nn.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %a = fsdp.call @drop(%h) : (tensor<4xf32>) -> tensor<4xf32>
      %b = fsdp.call @drop(%a) : (tensor<4xf32>) -> tensor<4xf32>
      %l = nn.reduce_sum %b {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// A random draw is a site as a dropout is: in each micro-batch the draw and
// the dropout take the next sites (9 << 32 | site, 7 << 32 | site), the
// dropout's VJP reuses its id, and the draw, which has no operand, has none.
// ACCUM-LABEL: func.func @draws_train_step(
// ACCUM: nn.random {{.*}}distribution = #nn.distribution<normal>{{.*}}rng_id = 38654705664 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771073 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771073 : i64
// ACCUM: nn.random {{.*}}rng_id = 38654705666 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771075 : i64
// ACCUM: nn.dropout %{{.*}} {{.*}}rng_id = 30064771075 : i64
// ACCUM-NOT: nn.random
// ACCUM: return
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

// -----

// A module called on two signatures: each call inlines the forward taking
// its operand types (a shared encoder on 2 queries and 6 documents, the
// documents' forward scaling its result), and the shared weight's gradient
// sums both calls' contributions.
// DEFAULT-LABEL: func.func @signatures_train_step(
// DEFAULT-SAME: %arg0: tensor<8x4xf32> {fsdp.param = "encoder.weight"}
// DEFAULT: %[[Q:.*]] = nn.linear %arg2, %arg0 {{.*}}fsdp.unit = "encoder"{{.*}} -> tensor<2x8xf32>
// DEFAULT-NOT: nn.scale %[[Q]]
// DEFAULT: %[[D:.*]] = nn.linear %arg3, %arg0 {{.*}}fsdp.unit = "encoder"{{.*}} -> tensor<6x8xf32>
// DEFAULT-NEXT: nn.scale %[[D]] {{.*}}fsdp.unit = "encoder"
// DEFAULT-DAG: %[[DOCS:.*]] = nn.matmul %{{.*}}, %arg3 {{.*}}transpose_lhs{{.*}} -> tensor<8x4xf32>
// DEFAULT-DAG: %[[QUERIES:.*]] = nn.matmul %{{.*}}, %arg2 {{.*}}transpose_lhs{{.*}} -> tensor<8x4xf32>
// DEFAULT: %[[SUM:.*]] = nn.add %[[DOCS]], %[[QUERIES]]
// DEFAULT: fsdp.sgd_step %arg0, %[[SUM]]
fsdp.model @signatures {
  fsdp.module @root kind "Siamese" {
    fsdp.module @encoder kind "Linear" unit {
      fsdp.param @weight : tensor<8x4xf32> init <zeros>
      fsdp.forward (%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
        %w = fsdp.get_param @weight : tensor<8x4xf32>
        %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
        fsdp.return %y : tensor<2x8xf32>
      }
      fsdp.forward (%x: tensor<6x4xf32>) -> tensor<6x8xf32> {
        %w = fsdp.get_param @weight : tensor<8x4xf32>
        %y = nn.linear %x, %w : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
        %z = nn.scale %y {factor = 2.0 : f64} : tensor<6x8xf32>
        fsdp.return %z : tensor<6x8xf32>
      }
    }
    fsdp.forward (%q: tensor<2x4xf32>, %d: tensor<6x4xf32>) -> tensor<f32> {
      %a = fsdp.call @encoder(%q) : (tensor<2x4xf32>) -> tensor<2x8xf32>
      %b = fsdp.call @encoder(%d) : (tensor<6x4xf32>) -> tensor<6x8xf32>
      %sa = nn.reduce_sum %a {dims = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
      %sb = nn.reduce_sum %b {dims = array<i64: 0, 1>} : (tensor<6x8xf32>) -> tensor<f32>
      %l = nn.mul %sa, %sb : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
