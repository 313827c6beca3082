// fsdp-build-train-step's fuse-add-layer-norm: a residual nn.add whose sum
// an nn.layer_norm of the same unit and phase normalises becomes one
// nn.add_layer_norm; the sum's other readers (the next residual add, the
// backward's nn.layer_norm_grad) read the fused op's sum. In the backward,
// an nn.add of a norm's input gradient (its only reader) and the residual
// gradient becomes one nn.add_layer_norm_grad. Off by default.
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step="fuse-add-layer-norm=true" | FileCheck %s --check-prefix=ON
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step | FileCheck %s --check-prefix=OFF

// A pre-LN block: both residual sums are normalised next.
// ON-LABEL: func.func @pre_ln_train_step(
// ON: nn.layer_norm %arg7 weight %arg0 bias %arg1
// ON-NEXT: nn.linear
// ON-NEXT: %[[S1:[^ ,]+]], %[[Y1:[^ ]+]] = nn.add_layer_norm %arg7, %{{[^ ]+}} weight %arg3 bias %arg4 {fsdp.phase = #fsdp<phase forward>
// ON-NEXT: nn.linear %[[Y1]], %arg5
// ON-NEXT: %[[S2:[^ ,]+]], %[[Y2:[^ ]+]] = nn.add_layer_norm %[[S1]], %{{[^ ]+}} {epsilon = 9.9999999999999995E-7 : f64, fsdp.phase = #fsdp<phase forward>
// ON-NEXT: nn.reduce_sum %[[Y2]]
// ON: %[[G3:[^ ,]+]], %{{[^ ]+}}, %{{[^ ]+}} = nn.layer_norm_grad %{{[^ ]+}}, %[[S2]] {epsilon = 9.9999999999999995E-7 : f64
// ON-NOT: nn.layer_norm_grad
// ON: %[[G2:[^ ,]+]], %[[W2:[^ ,]+]], %[[B2:[^ ]+]] = nn.add_layer_norm_grad %{{[^ ]+}}, %[[S1]], %[[G3]] weight %arg3 {fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""}
// ON-NEXT: nn.matmul %[[G2]], %arg2
// ON: nn.layer_norm_grad %{{[^ ]+}}, %arg7 weight %arg0
// ON: fsdp.sgd_step %arg3, %[[W2]]
// ON-NEXT: fsdp.sgd_step %arg4, %[[B2]]
// OFF-LABEL: func.func @pre_ln_train_step(
// OFF-NOT: nn.add_layer_norm
fsdp.model @pre_ln {
  fsdp.module @root kind "Block" unit {
    fsdp.param @ln1_w : tensor<16xf32> init <ones>
    fsdp.param @ln1_b : tensor<16xf32> init <zeros>
    fsdp.param @fc1 : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.param @ln2_w : tensor<16xf32> init <ones>
    fsdp.param @ln2_b : tensor<16xf32> init <zeros>
    fsdp.param @fc2 : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<8x16xf32>) -> tensor<f32> {
      %w1 = fsdp.get_param @ln1_w : tensor<16xf32>
      %b1 = fsdp.get_param @ln1_b : tensor<16xf32>
      %f1 = fsdp.get_param @fc1 : tensor<16x16xf32>
      %w2 = fsdp.get_param @ln2_w : tensor<16xf32>
      %b2 = fsdp.get_param @ln2_b : tensor<16xf32>
      %f2 = fsdp.get_param @fc2 : tensor<16x16xf32>
      %h1 = nn.layer_norm %x weight %w1 bias %b1 : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %a1 = nn.linear %h1, %f1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %r1 = nn.add %x, %a1 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %h2 = nn.layer_norm %r1 weight %w2 bias %b2 : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %a2 = nn.linear %h2, %f2 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %r2 = nn.add %r1, %a2 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %h3 = nn.layer_norm %r2 {epsilon = 1.0e-6 : f64} : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %h3 {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// A broadcast add (a bias row) and a sum cast before its norm stay apart.
// ON-LABEL: func.func @apart_train_step(
// ON-NOT: nn.add_layer_norm
// ON: return
fsdp.model @apart {
  fsdp.module @root kind "Block" unit {
    fsdp.param @fc : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.param @row : tensor<16xf32> init <zeros>
    fsdp.forward (%x: tensor<8x16xf32>) -> tensor<f32> {
      %f = fsdp.get_param @fc : tensor<16x16xf32>
      %r = fsdp.get_param @row : tensor<16xf32>
      %a = nn.linear %x, %f : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %s = nn.add %a, %r : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %h = nn.layer_norm %s : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %t = nn.add %h, %a : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %c = nn.cast %t : tensor<8x16xf32> to tensor<8x16xf16>
      %n = nn.layer_norm %c : (tensor<8x16xf16>) -> tensor<8x16xf16>
      %loss = nn.reduce_sum %n {dims = array<i64: 0, 1>} : (tensor<8x16xf16>) -> tensor<f16>
      %l32 = nn.cast %loss : tensor<f16> to tensor<f32>
      fsdp.return %l32 : tensor<f32>
    }
  }
}

// -----

// A block's last residual sum normalised by the next unit (here the root's
// final norm) stays apart: the pair straddles two units.
// ON-LABEL: func.func @units_train_step(
// ON: nn.add %{{.*}}fsdp.unit = "block"
// ON-NEXT: nn.layer_norm %{{.*}}fsdp.unit = ""
// ON-NOT: nn.add_layer_norm
// ON: return
fsdp.model @units {
  fsdp.module @root kind "GPT" {
    fsdp.module @block kind "Block" unit {
      fsdp.param @fc : tensor<16x16xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
        %f = fsdp.get_param @fc : tensor<16x16xf32>
        %a = nn.linear %x, %f : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
        %r = nn.add %x, %a : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
        fsdp.return %r : tensor<8x16xf32>
      }
    }
    fsdp.forward (%x: tensor<8x16xf32>) -> tensor<f32> {
      %r = fsdp.call @block(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %h = nn.layer_norm %r : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %h {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// The addend (the broadcast mul's input gradient) is computed after the
// norm's gradient, and the tied weight's gradient is summed after the add:
// the fused op goes at the add.
// ON-LABEL: func.func @tied_after_train_step(
// ON-NOT: nn.layer_norm_grad
// ON: %[[M:[^ ]+]] = nn.mul %{{[^ ]+}}, %arg0 {fsdp.phase = #fsdp<phase backward>
// ON: %[[G:[^ ,]+]], %[[W:[^ ,]+]], %{{[^ ]+}} = nn.add_layer_norm_grad %{{[^ ]+}}, %0, %[[M]] weight %arg0
// ON-NOT: nn.layer_norm_grad
// ON: nn.add %[[W]],
// ON: nn.matmul %[[G]], %arg3
fsdp.model @tied_after {
  fsdp.module @root kind "Block" unit {
    fsdp.param @w : tensor<16xf32> init <ones>
    fsdp.param @fc : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x0: tensor<8x16xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<16xf32>
      %f = fsdp.get_param @fc : tensor<16x16xf32>
      %x = nn.linear %x0, %f : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %y = nn.mul %x, %w : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %h = nn.layer_norm %x weight %w : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %o = nn.add %y, %h : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %o {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// As above, but the tied weight's gradient is summed before the add: the
// addend is not there at the norm's gradient, and the weight gradient is
// read before the add, so the pair stays apart.
// ON-LABEL: func.func @tied_before_train_step(
// ON-NOT: nn.add_layer_norm_grad
// ON: %[[G:[^ ,]+]], %[[W:[^ ,]+]], %{{[^ ]+}} = nn.layer_norm_grad
// ON: nn.add %[[W]],
// ON-NEXT: nn.add %[[G]],
// ON-NOT: nn.add_layer_norm_grad
// ON: return
fsdp.model @tied_before {
  fsdp.module @root kind "Block" unit {
    fsdp.param @w : tensor<16xf32> init <ones>
    fsdp.param @fc : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x0: tensor<8x16xf32>) -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<16xf32>
      %f = fsdp.get_param @fc : tensor<16x16xf32>
      %x = nn.linear %x0, %f : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %y = nn.mul %w, %x : (tensor<16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %h = nn.layer_norm %x weight %w : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %o = nn.add %y, %h : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %o {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// The norm's gradient is the block's and the add the root's (the other
// contribution to the block input's gradient comes from the root): apart.
// Broadcasting cannot reach the rewrite from a model (the autodiff sums a
// value's gradients in its type); the op's verifier rejects it
// (test/Dialect/NN/invalid.mlir).
// ON-LABEL: func.func @grad_units_train_step(
// ON: %[[G:[^ ,]+]], %{{[^ ]+}}, %{{[^ ]+}} = nn.layer_norm_grad %{{.*}}fsdp.unit = "block"
// ON: nn.add %[[G]], %{{.*}}fsdp.unit = ""
// ON-NOT: nn.add_layer_norm_grad
// ON: return
fsdp.model @grad_units {
  fsdp.module @root kind "GPT" {
    fsdp.param @fc : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.module @block kind "Block" unit {
      fsdp.forward (%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
        %h = nn.layer_norm %x : (tensor<8x16xf32>) -> tensor<8x16xf32>
        fsdp.return %h : tensor<8x16xf32>
      }
    }
    fsdp.forward (%x0: tensor<8x16xf32>) -> tensor<f32> {
      %f = fsdp.get_param @fc : tensor<16x16xf32>
      %x = nn.linear %x0, %f : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %y = nn.tanh %x : tensor<8x16xf32>
      %h = fsdp.call @block(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %r = nn.add %y, %h : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %r {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
