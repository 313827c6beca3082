// Every fsdp op, attribute and type parses, verifies and prints back, in the
// custom and the generic form.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

// CHECK-LABEL: fsdp.model @tree
fsdp.model @tree {
  // CHECK: fsdp.module @root kind "Net" unit {
  fsdp.module @root kind "Net" unit {
    // CHECK: fsdp.param @scale : tensor<8xf32> init <ones>
    fsdp.param @scale : tensor<8xf32> init <ones>
    // CHECK: fsdp.buffer @running_mean : tensor<8xf32> init <zeros>
    fsdp.buffer @running_mean : tensor<8xf32> init <zeros>
    // CHECK: fsdp.buffer @steps : tensor<1xi64> init <constant(3.000000e+00)> {persistent = false}
    fsdp.buffer @steps : tensor<1xi64> init <constant(3.0)> {persistent = false}
    // CHECK: fsdp.module @pair kind "Linear" unit<reshard_after_forward = 2> {
    fsdp.module @pair kind "Linear" unit<reshard_after_forward = 2> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // CHECK: fsdp.module @encoder kind "Linear" unit<reshard_after_forward = false> {
    fsdp.module @encoder kind "Linear" unit<reshard_after_forward = false> {
      // CHECK: fsdp.param @weight : tensor<8x4xbf16> init <kaiming_uniform(2.2360679774997898)>
      fsdp.param @weight : tensor<8x4xbf16> init <kaiming_uniform(2.2360679774997898)>
      // CHECK: fsdp.param @bias : tensor<8xbf16> init <uniform(-5.000000e-01, 5.000000e-01)> {requires_grad = false}
      fsdp.param @bias : tensor<8xbf16> init <uniform(-0.5, 0.5)> {requires_grad = false}
      // CHECK: fsdp.forward (%{{.*}}: tensor<2x4xbf16>) -> tensor<2x8xbf16> {
      fsdp.forward (%x: tensor<2x4xbf16>) -> tensor<2x8xbf16> {
        // CHECK: fsdp.get_param @weight : tensor<8x4xbf16>
        %w = fsdp.get_param @weight : tensor<8x4xbf16>
        %b = fsdp.get_param @bias : tensor<8xbf16>
        %y = nn.linear %x, %w, %b : (tensor<2x4xbf16>, tensor<8x4xbf16>, tensor<8xbf16>) -> tensor<2x8xbf16>
        // CHECK: fsdp.return %{{.*}} : tensor<2x8xbf16>
        fsdp.return %y : tensor<2x8xbf16>
      }
    }
    // CHECK: fsdp.module @expert kind "Linear" unit<reshard_after_forward = true, rank_local = true> {
    fsdp.module @expert kind "Linear" unit<rank_local = true, reshard_after_forward = true> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // CHECK: fsdp.module @local kind "Linear" unit<rank_local = true> {
    fsdp.module @local kind "Linear" unit<rank_local = true> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // Per-unit mixed precision, printed in a fixed order.
    // CHECK: fsdp.module @precise kind "Linear" unit<param_dtype = bf16, reduce_dtype = f32, output_dtype = f32, cast_forward_inputs = false> {
    fsdp.module @precise kind "Linear" unit<cast_forward_inputs = false, output_dtype = f32, reduce_dtype = f32, param_dtype = bf16> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // CHECK: fsdp.module @half kind "Linear" unit<reshard_after_forward = false, param_dtype = f16> {
    fsdp.module @half kind "Linear" unit<param_dtype = f16, reshard_after_forward = false> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // CHECK: fsdp.module @recomputed kind "Linear" unit<reshard_after_forward = false, activation_checkpointing = true> {
    fsdp.module @recomputed kind "Linear" unit<activation_checkpointing = true, reshard_after_forward = false> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // Selective: only the cheap ops recomputed; false is the default.
    // CHECK: fsdp.module @selective kind "Linear" unit<activation_checkpointing = selective> {
    fsdp.module @selective kind "Linear" unit<activation_checkpointing = selective> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // CHECK: fsdp.module @kept kind "Linear" unit {
    fsdp.module @kept kind "Linear" unit<activation_checkpointing = false> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // rank_local = false is the default and not printed.
    // CHECK: fsdp.module @shared kind "Linear" unit {
    fsdp.module @shared kind "Linear" unit<rank_local = false> {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    // A container without a forward, holding initializers of every kind.
    // CHECK: fsdp.module @layers kind "ModuleList" {
    fsdp.module @layers kind "ModuleList" {
      fsdp.module @"0" kind "Custom" {
        // CHECK: init <normal(0.000000e+00, 2.000000e-02)>
        fsdp.param @a : tensor<4x4xf32> init <normal(0.0, 0.02)>
        // CHECK: init <trunc_normal(0.000000e+00, 1.000000e+00, -2.000000e+00, 2.000000e+00)>
        fsdp.param @b : tensor<4x4xf32> init <trunc_normal(0.0, 1.0, -2.0, 2.0)>
        // CHECK: init <xavier_uniform(1.000000e+00)>
        fsdp.param @c : tensor<4x4xf32> init <xavier_uniform(1.0)>
        // CHECK: init <xavier_normal(1.000000e+00)>
        fsdp.param @d : tensor<4x4x3xf32> init <xavier_normal(1.0)>
        // CHECK: init <kaiming_normal(0.000000e+00)>
        fsdp.param @e : tensor<4x4xf16> init <kaiming_normal(0.0)>
        // CHECK: init <constant(-1.500000e+00)>
        fsdp.param @f : tensor<4xf32> init <constant(-1.5)>
        // CHECK: fsdp.forward () -> tensor<4x4xf32>
        fsdp.forward () -> tensor<4x4xf32> {
          %a = fsdp.get_param @a : tensor<4x4xf32>
          fsdp.return %a : tensor<4x4xf32>
        }
      }
    }
    // CHECK: fsdp.forward (%{{.*}}: tensor<2x4xbf16>, %{{.*}}: tensor<2x8xf32>) -> (tensor<f32>, tensor<2x8xf32>) {
    fsdp.forward (%x: tensor<2x4xbf16>, %t: tensor<2x8xf32>) -> (tensor<f32>, tensor<2x8xf32>) {
      // CHECK: fsdp.call @encoder(%{{.*}}) : (tensor<2x4xbf16>) -> tensor<2x8xbf16>
      %h = fsdp.call @encoder(%x) : (tensor<2x4xbf16>) -> tensor<2x8xbf16>
      %f = nn.cast %h : tensor<2x8xbf16> to tensor<2x8xf32>
      // A nested path reaches a grandchild; parameters can be read from ancestors.
      // CHECK: fsdp.call @layers::@"0"() : () -> tensor<4x4xf32>
      %m = fsdp.call @layers::@"0"() : () -> tensor<4x4xf32>
      // CHECK: fsdp.get_param @encoder::@weight : tensor<8x4xbf16>
      %w = fsdp.get_param @encoder::@weight : tensor<8x4xbf16>
      // CHECK: fsdp.get_buffer @running_mean : tensor<8xf32>
      %rm = fsdp.get_buffer @running_mean : tensor<8xf32>
      %s = fsdp.get_param @scale : tensor<8xf32>
      %y = nn.mul %f, %s : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
      // CHECK: fsdp.set_buffer @running_mean, %{{.*}} : tensor<8xf32>
      fsdp.set_buffer @running_mean, %rm : tensor<8xf32>
      %loss = nn.mse_loss %y, %t : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<f32>
      fsdp.return %loss, %y : tensor<f32>, tensor<2x8xf32>
    }
  }
}

// A module called on two signatures has a forward for each; each call picks
// the one taking its operand types.
// CHECK-LABEL: fsdp.model @signatures
fsdp.model @signatures {
  fsdp.module @root kind "Siamese" {
    fsdp.module @encoder kind "Linear" unit {
      fsdp.param @weight : tensor<8x4xf32> init <zeros>
      // CHECK: fsdp.forward (%{{.*}}: tensor<2x4xf32>) -> tensor<2x8xf32>
      fsdp.forward (%x: tensor<2x4xf32>) -> tensor<2x8xf32> {
        %w = fsdp.get_param @weight : tensor<8x4xf32>
        %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
        fsdp.return %y : tensor<2x8xf32>
      }
      // CHECK: fsdp.forward (%{{.*}}: tensor<6x4xf32>) -> tensor<6x8xf32>
      fsdp.forward (%x: tensor<6x4xf32>) -> tensor<6x8xf32> {
        %w = fsdp.get_param @weight : tensor<8x4xf32>
        %y = nn.linear %x, %w : (tensor<6x4xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
        fsdp.return %y : tensor<6x8xf32>
      }
    }
    fsdp.forward (%q: tensor<2x4xf32>, %d: tensor<6x4xf32>) -> tensor<f32> {
      // CHECK: fsdp.call @encoder(%{{.*}}) : (tensor<2x4xf32>) -> tensor<2x8xf32>
      %a = fsdp.call @encoder(%q) : (tensor<2x4xf32>) -> tensor<2x8xf32>
      // CHECK: fsdp.call @encoder(%{{.*}}) : (tensor<6x4xf32>) -> tensor<6x8xf32>
      %b = fsdp.call @encoder(%d) : (tensor<6x4xf32>) -> tensor<6x8xf32>
      %sa = nn.reduce_sum %a {dims = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
      %sb = nn.reduce_sum %b {dims = array<i64: 0, 1>} : (tensor<6x8xf32>) -> tensor<f32>
      %l = nn.mul %sa, %sb : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// CHECK-LABEL: func @collectives
func.func @collectives(%shard: tensor<19xbf16>, %full: tensor<76x2xf32>, %sq: tensor<1xf32>) {
  // CHECK: fsdp.all_gather %{{.*}} mesh<shard = 4> group shard dtype bf16 : tensor<19xbf16> -> tensor<76xbf16>
  %0 = fsdp.all_gather %shard mesh<shard = 4> group shard dtype bf16 : tensor<19xbf16> -> tensor<76xbf16>
  // CHECK: fsdp.all_gather %{{.*}} mesh<replicate = 2, shard = 4> group world dtype bf16 : tensor<19xbf16> -> tensor<152xbf16>
  %1 = fsdp.all_gather %shard mesh<replicate = 2, shard = 4> group world dtype bf16 : tensor<19xbf16> -> tensor<152xbf16>
  // CHECK: fsdp.reduce_scatter %{{.*}} mesh<shard = 4> group shard dtype f32 sum {post_divide = 2.000000e+00 : f64, pre_divide = 2.000000e+00 : f64} : tensor<76x2xf32> -> tensor<19x2xf32>
  %2 = fsdp.reduce_scatter %full mesh<shard = 4> group shard dtype f32 sum {pre_divide = 2.0 : f64, post_divide = 2.0 : f64} : tensor<76x2xf32> -> tensor<19x2xf32>
  // CHECK: fsdp.reduce_scatter %{{.*}} mesh<replicate = 2, shard = 2> group replicate dtype f32 avg : tensor<76x2xf32> -> tensor<38x2xf32>
  %3 = fsdp.reduce_scatter %full mesh<replicate = 2, shard = 2> group replicate dtype f32 avg : tensor<76x2xf32> -> tensor<38x2xf32>
  // CHECK: fsdp.all_reduce %{{.*}} mesh<shard = 4> group world dtype f32 max : tensor<1xf32>
  %4 = fsdp.all_reduce %sq mesh<shard = 4> group world dtype f32 max : tensor<1xf32>
  // CHECK: fsdp.broadcast %{{.*}} mesh<replicate = 2, shard = 4> group replicate dtype f32 root 1 : tensor<1xf32>
  %5 = fsdp.broadcast %sq mesh<replicate = 2, shard = 4> group replicate dtype f32 root 1 : tensor<1xf32>
  return
}

// CHECK-LABEL: func @schedule
func.func @schedule(%shard: tensor<136xf32>) -> tensor<136xf32> {
  // CHECK: %[[T:.*]] = fsdp.unshard %{{.*}} unit "module.1" mesh<shard = 2> : tensor<136xf32> -> !fsdp.token<tensor<272xf32>>
  %t = fsdp.unshard %shard unit "module.1" mesh<shard = 2> : tensor<136xf32> -> !fsdp.token<tensor<272xf32>>
  // CHECK: %[[F:.*]] = fsdp.wait %[[T]] : !fsdp.token<tensor<272xf32>>
  %full = fsdp.wait %t : !fsdp.token<tensor<272xf32>>
  // reshard_after_forward = 2 on 4 ranks: keep half, gather it over 2.
  // CHECK: %[[P:.*]] = fsdp.post_forward_shard %[[F]] unit "module.1" group 2 : tensor<272xf32> -> tensor<136xf32>
  %part = fsdp.post_forward_shard %full unit "module.1" group 2 : tensor<272xf32> -> tensor<136xf32>
  // CHECK: fsdp.unshard %[[P]] unit "module.1" mesh<shard = 4> {post_forward_group = 2 : i64} : tensor<136xf32> -> !fsdp.token<tensor<272xf32>>
  %t2 = fsdp.unshard %part unit "module.1" mesh<shard = 4> {post_forward_group = 2 : i64} : tensor<136xf32> -> !fsdp.token<tensor<272xf32>>
  // CHECK: fsdp.reshard %[[F]] unit "module.1" : tensor<272xf32>
  fsdp.reshard %full unit "module.1" : tensor<272xf32>
  // CHECK: fsdp.reduce_grads %{{.*}} unit "module.1" mesh<replicate = 2, shard = 2> avg : tensor<272xf32> -> tensor<136xf32>
  %g = fsdp.reduce_grads %full unit "module.1" mesh<replicate = 2, shard = 2> avg : tensor<272xf32> -> tensor<136xf32>
  // No-shard (DDP) is a mesh of shard size 1: the reduction is an all-reduce.
  // CHECK: fsdp.reduce_grads %{{.*}} unit "" mesh<replicate = 4, shard = 1> sum {pre_divide = 4.000000e+00 : f64} : tensor<136xf32> -> tensor<136xf32>
  %h = fsdp.reduce_grads %g unit "" mesh<replicate = 4, shard = 1> sum {pre_divide = 4.0 : f64} : tensor<136xf32> -> tensor<136xf32>
  return %h : tensor<136xf32>
}

// CHECK-LABEL: func @flat_params
func.func @flat_params(%full: tensor<80xf32>, %gw: tensor<4x8xf32>, %gb: tensor<4xf32>) -> tensor<40xf32> {
  // CHECK: fsdp.view %{{.*}}[32] : tensor<80xf32> -> tensor<4xf32>
  %b = fsdp.view %full[32] : tensor<80xf32> -> tensor<4xf32>
  // CHECK: fsdp.flatten %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<40xf32>
  %g = fsdp.flatten %gw, %gb : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<40xf32>
  return %g : tensor<40xf32>
}

// CHECK-LABEL: func @optimizer
func.func @optimizer(%p: tensor<16xf32>, %g: tensor<16xf32>, %lg: tensor<16xbf16>, %m: tensor<16xf32>, %v: tensor<16xf32>, %s: tensor<i64>, %sq: tensor<f32>) {
  // CHECK: fsdp.sgd_step %{{.*}}, %{{.*}} step %{{.*}} {lr = 1.000000e-01 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> tensor<16xf32>
  %p1 = fsdp.sgd_step %p, %g step %s {lr = 0.1 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> tensor<16xf32>
  // CHECK: fsdp.sgd_step %{{.*}}, %{{.*}} momentum_buffer %{{.*}} step %{{.*}} {dampening = 1.000000e-01 : f64, lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, weight_decay = 1.000000e-04 : f64}
  %p2, %m2 = fsdp.sgd_step %p, %g momentum_buffer %m step %s {lr = 0.1 : f64, momentum = 0.9 : f64, dampening = 0.1 : f64, weight_decay = 1.0e-4 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>)
  // A low-precision gradient updates an f32 parameter (keep_low_precision_grads).
  // CHECK: fsdp.sgd_step %{{.*}}, %{{.*}} momentum_buffer %{{.*}} step %{{.*}} {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, nesterov} : (tensor<16xf32>, tensor<16xbf16>, tensor<16xf32>, tensor<i64>)
  %p3, %m3 = fsdp.sgd_step %p, %lg momentum_buffer %m step %s {lr = 0.1 : f64, momentum = 0.9 : f64, nesterov} : (tensor<16xf32>, tensor<16xbf16>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>)
  // CHECK: fsdp.adamw_step %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} step %{{.*}} {beta2 = 0.94999999999999996 : f64, lr = 1.000000e-03 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  %p4, %m4, %v4 = fsdp.adamw_step %p, %g, %m, %v step %s {lr = 1.0e-3 : f64, beta2 = 0.95 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK: fsdp.clip_grad_norm %{{.*}} {max_norm = 1.000000e+00 : f64} : tensor<f32>
  %norm, %coef = fsdp.clip_grad_norm %sq {max_norm = 1.0 : f64} : tensor<f32>
  // The inf norm's partial and norm type (Adam: adamw_step with L2 decay).
  // CHECK: fsdp.max_abs %{{.*}}, %{{.*}} : tensor<16xf32>, tensor<16xbf16> -> tensor<f32>
  %max = fsdp.max_abs %g, %lg : tensor<16xf32>, tensor<16xbf16> -> tensor<f32>
  // CHECK: fsdp.clip_grad_norm %{{.*}} {max_norm = 1.000000e+00 : f64, norm_type = 0x7FF0000000000000 : f64} : tensor<f32>
  %inorm, %icoef = fsdp.clip_grad_norm %max {max_norm = 1.0 : f64, norm_type = 0x7FF0000000000000 : f64} : tensor<f32>
  // CHECK: fsdp.adamw_step {{.*}} {l2_weight_decay, lr = 1.000000e-03 : f64, weight_decay = 1.000000e-01 : f64}
  %p5, %m5, %v5 = fsdp.adamw_step %p, %g, %m, %v step %s {lr = 1.0e-3 : f64, weight_decay = 0.1 : f64, l2_weight_decay} : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  // CHECK: fsdp.lion_step %{{.*}}, %{{.*}}, %{{.*}} step %{{.*}} {beta2 = 0.97999999999999998 : f64, lr = 1.000000e-04 : f64} : (tensor<16xf32>, tensor<16xbf16>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>)
  %p6, %m6 = fsdp.lion_step %p, %lg, %m step %s {lr = 1.0e-4 : f64, beta2 = 0.98 : f64} : (tensor<16xf32>, tensor<16xbf16>, tensor<16xf32>, tensor<i64>) -> (tensor<16xf32>, tensor<16xf32>)
  // Adafactor on a flat shard holding a [2, 8] matrix: its state 2 + 8,
  // its stats 1 + 10, one update norm.
  // CHECK: fsdp.adafactor_stats %{{.*}}, %{{.*}} {layout = array<i64: 0, 16, 2, 8>} : (tensor<16xf32>, tensor<16xbf16>) -> tensor<11xf32>
  %stats = fsdp.adafactor_stats %p, %lg {layout = array<i64: 0, 16, 2, 8>} : (tensor<16xf32>, tensor<16xbf16>) -> tensor<11xf32>
  %af = arith.constant dense<0.0> : tensor<10xf32>
  // CHECK: fsdp.adafactor_factor {{.*}} step %{{.*}} skip_if %{{.*}} {d = 2.000000e+00 : f64, layout = array<i64: 0, 16, 2, 8>}
  %af2, %usq = fsdp.adafactor_factor %p, %g, %af, %stats step %s skip_if %sq {layout = array<i64: 0, 16, 2, 8>, d = 2.0 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<10xf32>, tensor<11xf32>, tensor<i64>, tensor<f32>) -> (tensor<10xf32>, tensor<1xf32>)
  // CHECK: fsdp.adafactor_apply {{.*}} {layout = array<i64: 0, 16, 2, 8>, lr = 1.000000e-02 : f64, weight_decay = 1.000000e-01 : f64}
  %p7 = fsdp.adafactor_apply %p, %g, %af2, %stats, %usq step %s {layout = array<i64: 0, 16, 2, 8>, lr = 1.0e-2 : f64, weight_decay = 0.1 : f64} : (tensor<16xf32>, tensor<16xf32>, tensor<10xf32>, tensor<11xf32>, tensor<1xf32>, tensor<i64>) -> tensor<16xf32>
  return
}
