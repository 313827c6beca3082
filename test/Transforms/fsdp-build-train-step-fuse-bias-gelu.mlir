// fsdp-build-train-step's fuse-bias-gelu: an nn.linear and the tanh nn.gelu
// of its result (same unit and phase) become one nn.linear_gelu whose `pre`
// the linear's other readers read; an nn.linear_grad whose input gradient
// only a tanh nn.gelu_grad reads (through a reshape) becomes one
// nn.linear_gelu_grad reading the GELU's input. Off by default.
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step="fuse-bias-gelu=true" | FileCheck %s --check-prefix=ON
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step | FileCheck %s --check-prefix=OFF

// A GPT-2 MLP (c_fc, GELU tanh, c_proj) on [B, T, C] activations.
// ON-LABEL: func.func @mlp_train_step(
// ON: %[[PRE:[^ ,]+]], %[[Y:[^ ]+]] = nn.linear_gelu %arg5, %arg0, %arg1 {fsdp.phase = #fsdp<phase forward>, fsdp.unit = ""} : (tensor<2x4x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> (tensor<2x4x64xf32>, tensor<2x4x64xf32>)
// ON-NEXT: nn.linear %[[Y]], %arg2, %arg3
// ON-NOT: nn.gelu
// ON: %[[YR:[^ ]+]] = nn.reshape %[[Y]] {fsdp.phase = #fsdp<phase backward>{{.*}} to tensor<8x64xf32>
// ON-NEXT: %[[PR:[^ ]+]] = nn.reshape %[[PRE]] {fsdp.phase = #fsdp<phase backward>{{.*}} to tensor<8x64xf32>
// ON-NEXT: %[[DH:[^ ,]+]], %{{[^ ,]+}}, %{{[^ ]+}} = nn.linear_gelu_grad %{{[^ ]+}}, %[[YR]], %arg2, %[[PR]] {fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""} : (tensor<8x16xf32>, tensor<8x64xf32>, tensor<16x64xf32>, tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16xf32>)
// ON-NEXT: %[[DH3:[^ ]+]] = nn.reshape %[[DH]] {{.*}} : tensor<8x64xf32> to tensor<2x4x64xf32>
// ON-NOT: nn.gelu_grad
// ON: nn.reshape %[[DH3]]
// ON: return
// OFF-LABEL: func.func @mlp_train_step(
// OFF-NOT: nn.linear_gelu
// OFF: nn.gelu
// OFF: nn.gelu_grad
// OFF-NOT: nn.linear_gelu
// OFF: return
fsdp.model @mlp {
  fsdp.module @root kind "Block" unit {
    fsdp.param @fc_w : tensor<64x16xf32> init <normal(0.0, 0.02)>
    fsdp.param @fc_b : tensor<64xf32> init <zeros>
    fsdp.param @proj_w : tensor<16x64xf32> init <normal(0.0, 0.02)>
    fsdp.param @proj_b : tensor<16xf32> init <zeros>
    fsdp.forward (%x: tensor<2x4x16xf32>) -> tensor<f32> {
      %w1 = fsdp.get_param @fc_w : tensor<64x16xf32>
      %b1 = fsdp.get_param @fc_b : tensor<64xf32>
      %w2 = fsdp.get_param @proj_w : tensor<16x64xf32>
      %b2 = fsdp.get_param @proj_b : tensor<16xf32>
      %h = nn.linear %x, %w1, %b1 : (tensor<2x4x16xf32>, tensor<64x16xf32>, tensor<64xf32>) -> tensor<2x4x64xf32>
      %a = nn.gelu %h {approximate = #nn.approximation<tanh>} : tensor<2x4x64xf32>
      %y = nn.linear %a, %w2, %b2 : (tensor<2x4x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x4x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// The exact (erf) GELU stays apart: cuBLASLt's epilogue computes the tanh
// form only.
// ON-LABEL: func.func @erf_train_step(
// ON-NOT: nn.linear_gelu
// ON: nn.gelu %{{.*}} : tensor<8x64xf32>
// ON: nn.gelu_grad
// ON-NOT: nn.linear_gelu
// ON: return
fsdp.model @erf {
  fsdp.module @root kind "Block" unit {
    fsdp.param @fc_w : tensor<64x16xf32> init <normal(0.0, 0.02)>
    fsdp.param @proj_w : tensor<16x64xf32> init <normal(0.0, 0.02)>
    fsdp.param @proj_b : tensor<16xf32> init <zeros>
    fsdp.forward (%x: tensor<8x16xf32>) -> tensor<f32> {
      %w1 = fsdp.get_param @fc_w : tensor<64x16xf32>
      %w2 = fsdp.get_param @proj_w : tensor<16x64xf32>
      %b2 = fsdp.get_param @proj_b : tensor<16xf32>
      %h = nn.linear %x, %w1 : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
      %a = nn.gelu %h : tensor<8x64xf32>
      %y = nn.linear %a, %w2, %b2 : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// The pre-activation read by the loss too: the forward fuses and the loss
// reads `pre`. The GELU's output read twice (c_proj and the loss): its
// cotangent is a sum, not c_proj's input gradient alone, so the backward
// keeps nn.linear_grad and nn.gelu_grad.
// ON-LABEL: func.func @shared_train_step(
// ON: %[[PRE:[^ ,]+]], %[[Y:[^ ]+]] = nn.linear_gelu %arg4, %arg0 {
// ON-NEXT: nn.linear %[[Y]], %arg1, %arg2
// ON-NEXT: nn.add %{{[^ ]+}}, %[[PRE]]
// ON-NEXT: nn.add %{{[^ ]+}}, %[[Y]]
// ON-NOT: nn.linear_gelu_grad
// ON: nn.linear_grad
// ON: nn.gelu_grad %{{[^ ]+}}, %[[PRE]] {approximate = #nn.approximation<tanh>
// ON-NOT: nn.linear_gelu_grad
// ON: return
fsdp.model @shared {
  fsdp.module @root kind "Block" unit {
    fsdp.param @fc_w : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.param @proj_w : tensor<16x16xf32> init <normal(0.0, 0.02)>
    fsdp.param @proj_b : tensor<16xf32> init <zeros>
    fsdp.forward (%x: tensor<8x16xf32>) -> tensor<f32> {
      %w1 = fsdp.get_param @fc_w : tensor<16x16xf32>
      %w2 = fsdp.get_param @proj_w : tensor<16x16xf32>
      %b2 = fsdp.get_param @proj_b : tensor<16xf32>
      %h = nn.linear %x, %w1 : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
      %a = nn.gelu %h {approximate = #nn.approximation<tanh>} : tensor<8x16xf32>
      %y = nn.linear %a, %w2, %b2 : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %s = nn.add %y, %h : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %t = nn.add %s, %a : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %t {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// A linear in one unit and the GELU of its result in another stay apart
// in the forward; the backward's c_proj gradient and GELU gradient are
// both the root's and fuse, reading the other unit's linear output.
// ON-LABEL: func.func @units_train_step(
// ON-NOT: nn.linear_gelu
// ON: %[[H:[^ ]+]] = nn.linear %{{.*}}fsdp.unit = "fc"
// ON-NEXT: nn.gelu %[[H]] {{.*}}fsdp.unit = ""
// ON: nn.linear_gelu_grad %{{[^ ]+}}, %{{[^ ]+}}, %arg1, %[[H]] {fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""}
// ON-NOT: nn.gelu_grad
// ON: return
fsdp.model @units {
  fsdp.module @root kind "GPT" {
    fsdp.module @fc kind "Linear" unit {
      fsdp.param @w : tensor<64x16xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<8x16xf32>) -> tensor<8x64xf32> {
        %w = fsdp.get_param @w : tensor<64x16xf32>
        %h = nn.linear %x, %w : (tensor<8x16xf32>, tensor<64x16xf32>) -> tensor<8x64xf32>
        fsdp.return %h : tensor<8x64xf32>
      }
    }
    fsdp.param @proj_w : tensor<16x64xf32> init <normal(0.0, 0.02)>
    fsdp.param @proj_b : tensor<16xf32> init <zeros>
    fsdp.forward (%x: tensor<8x16xf32>) -> tensor<f32> {
      %w2 = fsdp.get_param @proj_w : tensor<16x64xf32>
      %b2 = fsdp.get_param @proj_b : tensor<16xf32>
      %h = fsdp.call @fc(%x) : (tensor<8x16xf32>) -> tensor<8x64xf32>
      %a = nn.gelu %h {approximate = #nn.approximation<tanh>} : tensor<8x64xf32>
      %y = nn.linear %a, %w2, %b2 : (tensor<8x64xf32>, tensor<16x64xf32>, tensor<16xf32>) -> tensor<8x16xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<8x16xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
