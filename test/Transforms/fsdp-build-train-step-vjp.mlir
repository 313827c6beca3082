// The generated backward of every nn op: the cotangent ops each VJP builds,
// and that they reach the optimizer update of the right parameter. Each
// case sums its result into the loss (seeded with 1) unless the op is the
// loss itself.
// RUN: fsdp-opt %s -split-input-file --fsdp-build-train-step | FileCheck %s

// linear with a bias: dx = g·W (leading dims flattened), dW = gᵀ·x and
// db = Σ g in one nn.linear_grad.
// CHECK-LABEL: func.func @linear_train_step
// CHECK: %[[G:[^ ,:]+]] = nn.reshape %{{.*}} : tensor<2x3x5xf32> to tensor<6x5xf32>
// CHECK: %[[X:[^ ,:]+]] = nn.reshape %arg0 {{.*}} : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK: %[[GX:[^ ,:]+]], %[[DW:[^ ,:]+]], %[[DB:[^ ,:]+]] = nn.linear_grad %[[G]], %[[X]], %arg1 {{.*}} : (tensor<6x5xf32>, tensor<6x4xf32>, tensor<5x4xf32>) -> (tensor<6x4xf32>, tensor<5x4xf32>, tensor<5xf32>)
// CHECK: %[[DX:[^ ,:]+]] = nn.reshape %[[GX]] {{.*}} : tensor<6x4xf32> to tensor<2x3x4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
// CHECK: fsdp.sgd_step %arg1, %[[DW]]
// CHECK: fsdp.sgd_step %arg2, %[[DB]]
fsdp.model @linear {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x3x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @w : tensor<5x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<5xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x3x4xf32>
      %w = fsdp.get_param @w : tensor<5x4xf32>
      %b = fsdp.get_param @b : tensor<5xf32>
      %y = nn.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x3x5xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// linear without a bias: two GEMMs, dx = g·W and dW = gᵀ·x.
// CHECK-LABEL: func.func @linear_no_bias_train_step
// CHECK: %[[G:[^ ,:]+]] = nn.reshape %{{.*}} : tensor<2x3x5xf32> to tensor<6x5xf32>
// CHECK: %[[X:[^ ,:]+]] = nn.reshape %arg0 {{.*}} : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK: %[[GX:[^ ,:]+]] = nn.matmul %[[G]], %arg1 {{.*}} : (tensor<6x5xf32>, tensor<5x4xf32>) -> tensor<6x4xf32>
// CHECK: %[[DX:[^ ,:]+]] = nn.reshape %[[GX]] {{.*}} : tensor<6x4xf32> to tensor<2x3x4xf32>
// CHECK: %[[DW:[^ ,:]+]] = nn.matmul %[[G]], %[[X]] {{.*}}transpose_lhs{{.*}} : (tensor<6x5xf32>, tensor<6x4xf32>) -> tensor<5x4xf32>
// CHECK-NOT: nn.linear_grad
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
// CHECK: fsdp.sgd_step %arg1, %[[DW]]
fsdp.model @linear_no_bias {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x3x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @w : tensor<5x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x3x4xf32>
      %w = fsdp.get_param @w : tensor<5x4xf32>
      %y = nn.linear %x, %w : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x3x5xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// keep (torch.where's branch) passes the cotangent where the mask holds and
// gives the mask none; a comparison has no gradient either: b, used only
// through the mask, gets no gradient and no update (torch's grad None).
// CHECK-LABEL: func.func @where_train_step
// CHECK: %[[M:[^ ,:]+]] = nn.gt %arg0, %arg1 {{.*}} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
// CHECK: nn.keep %arg0, %[[M]] {fsdp.phase = #fsdp<phase forward>
// CHECK-NOT: nn.gt
// CHECK: %[[GA:[^ ,:]+]] = nn.keep %{{.*}}, %[[M]] {fsdp.phase = #fsdp<phase backward>{{.*}} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[GA]]
// CHECK-NOT: fsdp.sgd_step
// CHECK: return {{.*}} : tensor<f32>, tensor<3x4xf32>, tensor<i64>
fsdp.model @where {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<3x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<3x4xf32>
      %b = fsdp.get_param @b : tensor<4xf32>
      %m = nn.gt %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %y = nn.keep %a, %m : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<3x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// maximum: each operand's cotangent is g times its winner weight (1 where
// it wins, 1/2 on a tie), the broadcast operand's summed to its shape.
// CHECK-LABEL: func.func @maximum_train_step
// CHECK: %[[WA:[^ ,:]+]] = nn.max_weight %arg0, %arg1 {{.*}} : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
// CHECK: %[[GA:[^ ,:]+]] = nn.mul %{{.*}}, %[[WA]]
// CHECK: %[[WB:[^ ,:]+]] = nn.max_weight %arg1, %arg0 {{.*}} : (tensor<4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK: %[[GB:[^ ,:]+]] = nn.mul %{{.*}}, %[[WB]]
// CHECK: %[[DB:[^ ,:]+]] = nn.reduce_sum %[[GB]] {dims = array<i64: 0>{{.*}}} : (tensor<3x4xf32>) -> tensor<4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[GA]]
// CHECK: fsdp.sgd_step %arg1, %[[DB]]
fsdp.model @maximum {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<3x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<3x4xf32>
      %b = fsdp.get_param @b : tensor<4xf32>
      %y = nn.maximum %a, %b : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<3x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// matmul with a transposed, unbatched rhs: the rhs gradient is summed over the batch.
// CHECK-LABEL: func.func @matmul_train_step
// CHECK: %[[DA:[^ ,:]+]] = nn.matmul %[[G:[^ ,:]+]], %arg1 {{.*}} : (tensor<2x3x5xf32>, tensor<5x4xf32>) -> tensor<2x3x4xf32>
// CHECK: %[[GB:[^ ,:]+]] = nn.matmul %[[G]], %arg0 {{.*}}transpose_lhs{{.*}}{{.*}} : (tensor<2x3x5xf32>, tensor<2x3x4xf32>) -> tensor<2x5x4xf32>
// CHECK: %[[DB:[^ ,:]+]] = nn.reduce_sum %[[GB]] {dims = array<i64: 0>{{.*}}}{{.*}} : (tensor<2x5x4xf32>) -> tensor<5x4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[DA]]
// CHECK: fsdp.sgd_step %arg1, %[[DB]]
fsdp.model @matmul {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<2x3x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<5x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<2x3x4xf32>
      %b = fsdp.get_param @b : tensor<5x4xf32>
      %y = nn.matmul %a, %b {transpose_rhs} : (tensor<2x3x4xf32>, tensor<5x4xf32>) -> tensor<2x3x5xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x3x5xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// add with broadcasting: the broadcast operand's gradient is summed over the expanded dims.
// CHECK-LABEL: func.func @add_train_step
// CHECK: %[[G:[^ ,:]+]] = nn.broadcast
// CHECK: %[[DB:[^ ,:]+]] = nn.reduce_sum %[[G]] {dims = array<i64: 0>{{.*}}}{{.*}} : (tensor<4x3xf32>) -> tensor<3xf32>
// CHECK: fsdp.sgd_step %arg0, %[[G]]
// CHECK: fsdp.sgd_step %arg1, %[[DB]]
fsdp.model @add {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<4x3xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<3xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<4x3xf32>
      %b = fsdp.get_param @b : tensor<3xf32>
      %y = nn.add %a, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// sub: the rhs gets the negated cotangent.
// CHECK-LABEL: func.func @sub_train_step
// CHECK: %[[G:[^ ,:]+]] = nn.broadcast
// CHECK: %[[N:[^ ,:]+]] = nn.scale %[[G]] {factor = -1.000000e+00{{.*}} : f64{{.*}}}
// CHECK: %[[S:[^ ,:]+]] = nn.reduce_sum %[[N]] {dims = array<i64: 1>{{.*}}}{{.*}} : (tensor<4x3xf32>) -> tensor<4xf32>
// CHECK: %[[DB:[^ ,:]+]] = nn.reshape %[[S]] {{.*}} : tensor<4xf32> to tensor<4x1xf32>
// CHECK: fsdp.sgd_step %arg1, %[[DB]]
fsdp.model @sub {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<4x3xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<4x1xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<4x3xf32>
      %b = fsdp.get_param @b : tensor<4x1xf32>
      %y = nn.sub %a, %b : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// mul: each operand gets the cotangent times the other operand.
// CHECK-LABEL: func.func @mul_train_step
// CHECK: %[[G:[^ ,:]+]] = nn.broadcast
// CHECK: %[[DA:[^ ,:]+]] = nn.mul %[[G]], %arg1
// CHECK: %[[DB:[^ ,:]+]] = nn.mul %[[G]], %arg0
// CHECK: fsdp.sgd_step %arg0, %[[DA]]
// CHECK: fsdp.sgd_step %arg1, %[[DB]]
fsdp.model @mul {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<4xf32>
      %b = fsdp.get_param @b : tensor<4xf32>
      %y = nn.mul %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// scale: the cotangent scaled by the same factor.
// CHECK-LABEL: func.func @scale_train_step
// CHECK: %[[G:[^ ,:]+]] = nn.broadcast
// CHECK: %[[D:[^ ,:]+]] = nn.scale %[[G]] {factor = 3.000000e+00{{.*}} : f64{{.*}}} : tensor<4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @scale {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<4xf32>
      %y = nn.scale %a {factor = 3.0 : f64} : tensor<4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// relu, gelu (tanh) and silu: their gradient kernels, on the forward inputs.
// CHECK-LABEL: func.func @activations_train_step
// CHECK: %[[R:[^ ,:]+]] = nn.relu %arg0
// CHECK: %[[GE:[^ ,:]+]] = nn.gelu %[[R]]
// CHECK: %[[D1:[^ ,:]+]] = nn.silu_grad %{{.*}}, %[[GE]]
// CHECK: %[[D2:[^ ,:]+]] = nn.gelu_grad %[[D1]], %[[R]] {approximate = #nn.approximation<tanh>{{.*}}}
// CHECK: %[[D3:[^ ,:]+]] = nn.relu_grad %[[D2]], %arg0
// CHECK: fsdp.sgd_step %arg0, %[[D3]]
fsdp.model @activations {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<4xf32>
      %r = nn.relu %a : tensor<4xf32>
      %g = nn.gelu %r {approximate = #nn.approximation<tanh>} : tensor<4xf32>
      %y = nn.silu %g : tensor<4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// dropout: the same mask applied to the cotangent. The inlined dropout gets
// its own id, 7 << 32 | site 0, so that every call and micro-batch draws its
// own mask; its VJP reuses that id.
// CHECK-LABEL: func.func @dropout_train_step
// CHECK: %[[G:[^ ,:]+]] = nn.broadcast
// CHECK: %[[D:[^ ,:]+]] = nn.dropout %[[G]] {{.*}}p = 2.500000e-01{{.*}} : f64, rng_id = 30064771072 : i64} : tensor<4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @dropout {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<4xf32>
      %y = nn.dropout %a {p = 0.25 : f64, rng_id = 7 : i64} : tensor<4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// layer_norm: one layer_norm_grad gives the input, weight and bias gradients.
// CHECK-LABEL: func.func @layer_norm_train_step
// CHECK: %[[DX:[^ ,:]+]], %[[DW:[^ ,:]+]], %[[DB:[^ ,:]+]] = nn.layer_norm_grad %{{.*}}, %arg0 weight %arg1 {{.*}}{{.*}} : (tensor<2x8xf32>, tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
// CHECK: fsdp.sgd_step %arg1, %[[DW]]
// CHECK: fsdp.sgd_step %arg2, %[[DB]]
fsdp.model @layer_norm {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x8xf32> init <normal(0.0, 1.0)>
    fsdp.param @g : tensor<8xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x8xf32>
      %g = fsdp.get_param @g : tensor<8xf32>
      %b = fsdp.get_param @b : tensor<8xf32>
      %y = nn.layer_norm %x weight %g bias %b : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// rms_norm: rms_norm_grad.
// CHECK-LABEL: func.func @rms_norm_train_step
// CHECK: %[[DX:[^ ,:]+]], %[[DW:[^ ,:]+]] = nn.rms_norm_grad %{{.*}}, %arg0 weight %arg1
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
// CHECK: fsdp.sgd_step %arg1, %[[DW]]
fsdp.model @rms_norm {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x8xf32> init <normal(0.0, 1.0)>
    fsdp.param @g : tensor<8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x8xf32>
      %g = fsdp.get_param @g : tensor<8xf32>
      %y = nn.rms_norm %x weight %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// batch_norm in training: batch_norm_grad; the new running statistics are returned as buffers.
// CHECK-LABEL: func.func @batch_norm_train_step
// CHECK-SAME: %arg4: tensor<4xf32> {fsdp.buffer = "running_mean"}, %arg5: tensor<4xf32> {fsdp.buffer = "running_var"}
// CHECK: %[[Y:[^ ,:]+]], %[[M:[^ ,:]+]], %[[V:[^ ,:]+]] = nn.batch_norm %arg0, %arg1, %arg2, %arg4, %arg5 {{.*}}training
// CHECK: %[[DX:[^ ,:]+]], %[[DW:[^ ,:]+]], %[[DB:[^ ,:]+]] = nn.batch_norm_grad %{{.*}}, %arg0, %arg1, %arg4, %arg5 {{.*}}training
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
// CHECK: fsdp.sgd_step %arg1, %[[DW]]
// CHECK: fsdp.sgd_step %arg2, %[[DB]]
// CHECK: return {{.*}}, %[[M]], %[[V]] :
fsdp.model @batch_norm {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<8x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @w : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.buffer @running_mean : tensor<4xf32> init <zeros>
    fsdp.buffer @running_var : tensor<4xf32> init <ones>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<8x4xf32>
      %w = fsdp.get_param @w : tensor<4xf32>
      %b = fsdp.get_param @b : tensor<4xf32>
      %rm = fsdp.get_buffer @running_mean : tensor<4xf32>
      %rv = fsdp.get_buffer @running_var : tensor<4xf32>
      %y, %m, %v = nn.batch_norm %x, %w, %b, %rm, %rv {training} : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)
      fsdp.set_buffer @running_mean, %m : tensor<4xf32>
      fsdp.set_buffer @running_var, %v : tensor<4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<8x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// conv with a bias (strided, padded, grouped): dx = nn.conv_transpose and
// dW = nn.conv_grad_weight with the forward's geometry, db = Σ g over N and
// the spatial dims.
// CHECK-LABEL: func.func @conv_train_step
// CHECK: %[[Y:[^ ,:]+]] = nn.conv %arg0, %arg1, %arg2 {dilation = array<i64: 1, 2>, {{.*}}groups = 2 : i64, pad_high = array<i64: 2, 1>, pad_low = array<i64: 1, 1>, stride = array<i64: 2, 1>}
// CHECK-DAG: %[[DX:[^ ,:]+]] = nn.conv_transpose %[[G:[^ ,:]+]], %arg1 {dilation = array<i64: 1, 2>, {{.*}}groups = 2 : i64, pad_high = array<i64: 2, 1>, pad_low = array<i64: 1, 1>, stride = array<i64: 2, 1>} : (tensor<2x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x6x6xf32>
// CHECK-DAG: %[[DW:[^ ,:]+]] = nn.conv_grad_weight %[[G]], %arg0 {dilation = array<i64: 1, 2>, {{.*}}groups = 2 : i64, pad_high = array<i64: 2, 1>, pad_low = array<i64: 1, 1>, stride = array<i64: 2, 1>} : (tensor<2x6x4x4xf32>, tensor<2x4x6x6xf32>) -> tensor<6x2x3x3xf32>
// CHECK-DAG: %[[DB:[^ ,:]+]] = nn.reduce_sum %[[G]] {dims = array<i64: 0, 2, 3>{{.*}}} : (tensor<2x6x4x4xf32>) -> tensor<6xf32>
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
// CHECK: fsdp.sgd_step %arg1, %[[DW]]
// CHECK: fsdp.sgd_step %arg2, %[[DB]]
fsdp.model @conv {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x4x6x6xf32> init <normal(0.0, 1.0)>
    fsdp.param @w : tensor<6x2x3x3xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<6xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x4x6x6xf32>
      %w = fsdp.get_param @w : tensor<6x2x3x3xf32>
      %b = fsdp.get_param @b : tensor<6xf32>
      %y = nn.conv %x, %w, %b {stride = array<i64: 2, 1>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 2, 1>, dilation = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x6x6xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x4x4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x6x4x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// conv1d without a bias: the two conv gradients only.
// CHECK-LABEL: func.func @conv1d_train_step
// CHECK: nn.conv_transpose %{{.*}}, %arg1 {{.*}} : (tensor<2x4x7xf32>, tensor<4x3x2xf32>) -> tensor<2x3x8xf32>
// CHECK: nn.conv_grad_weight %{{.*}}, %arg0 {{.*}} : (tensor<2x4x7xf32>, tensor<2x3x8xf32>) -> tensor<4x3x2xf32>
// CHECK-NOT: nn.reduce_sum {{.*}} -> tensor<4xf32>
// CHECK: fsdp.sgd_step %arg0
fsdp.model @conv1d {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x3x8xf32> init <normal(0.0, 1.0)>
    fsdp.param @w : tensor<4x3x2xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x3x8xf32>
      %w = fsdp.get_param @w : tensor<4x3x2xf32>
      %y = nn.conv %x, %w {stride = array<i64: 1>, pad_low = array<i64: 0>, pad_high = array<i64: 0>, dilation = array<i64: 1>, groups = 1 : i64} : (tensor<2x3x8xf32>, tensor<4x3x2xf32>) -> tensor<2x4x7xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x4x7xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// conv_transpose (F.conv_transpose2d, stride 2, padding 1, output_padding
// 1, two groups): dx = nn.conv of the cotangent with the same weight and
// geometry (no bias), dW = nn.conv_grad_weight with the op's input as the
// gradient and the cotangent as the convolved input.
// CHECK-LABEL: func.func @conv_transpose_train_step
// CHECK: nn.conv_transpose %arg0, %arg1 {{.*}} : (tensor<2x4x3x3xf32>, tensor<4x3x3x3xf32>) -> tensor<2x6x6x6xf32>
// CHECK-DAG: %[[DX:[^ ,:]+]] = nn.conv %[[G:[^ ,:]+]], %arg1 {dilation = array<i64: 1, 1>, {{.*}}groups = 2 : i64, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x6x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x3x3xf32>
// CHECK-DAG: %[[DW:[^ ,:]+]] = nn.conv_grad_weight %arg0, %[[G]] {dilation = array<i64: 1, 1>, {{.*}}groups = 2 : i64, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x4x3x3xf32>, tensor<2x6x6x6xf32>) -> tensor<4x3x3x3xf32>
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
// CHECK: fsdp.sgd_step %arg1, %[[DW]]
fsdp.model @conv_transpose {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x4x3x3xf32> init <normal(0.0, 1.0)>
    fsdp.param @w : tensor<4x3x3x3xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x4x3x3xf32>
      %w = fsdp.get_param @w : tensor<4x3x3x3xf32>
      %y = nn.conv_transpose %x, %w {stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x3x3xf32>, tensor<4x3x3x3xf32>) -> tensor<2x6x6x6xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x6x6x6xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// max_pool: nn.max_pool_grad of the cotangent and the pooled input, with
// the forward's window.
// CHECK-LABEL: func.func @max_pool_train_step
// CHECK: nn.max_pool %arg0 {dilation = array<i64: 1, 1>, {{.*}}kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}
// CHECK: %[[DX:[^ ,:]+]] = nn.max_pool_grad %{{.*}}, %arg0 {dilation = array<i64: 1, 1>, {{.*}}kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x3x3x3xf32>, tensor<2x3x6x5xf32>) -> tensor<2x3x6x5xf32>
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
fsdp.model @max_pool {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x3x6x5xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x3x6x5xf32>
      %y = nn.max_pool %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<2x3x6x5xf32>) -> tensor<2x3x3x3xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x3x3x3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// softmax: y·(g − Σ g·y) from forward ops.
// CHECK-LABEL: func.func @softmax_train_step
// CHECK: %[[Y:[^ ,:]+]] = nn.softmax %arg0
// CHECK: %[[GY:[^ ,:]+]] = nn.mul %[[G:[^ ,:]+]], %[[Y]]
// CHECK: %[[S:[^ ,:]+]] = nn.reduce_sum %[[GY]] {dims = array<i64: -1>{{.*}}keepdim}{{.*}} : (tensor<2x5xf32>) -> tensor<2x1xf32>
// CHECK: %[[C:[^ ,:]+]] = nn.sub %[[G]], %[[S]]
// CHECK: %[[D:[^ ,:]+]] = nn.mul %[[Y]], %[[C]]
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @softmax {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<2x5xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<2x5xf32>
      %y = nn.softmax %a : tensor<2x5xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x5xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// embedding: the table gradient (deterministic scatter-add); the indices get none.
// CHECK-LABEL: func.func @embedding_train_step
// CHECK: %[[D:[^ ,:]+]] = nn.embedding_grad %{{.*}}, %arg2 {{.*}}num_embeddings = 10{{.*}} : i64{{.*}} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @embedding {
  fsdp.module @root kind "Test" {
    fsdp.param @t : tensor<10x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%ids: tensor<2x3xi64>) -> tensor<f32> {
      %t = fsdp.get_param @t : tensor<10x4xf32>
      %y = nn.embedding %ids, %t : (tensor<2x3xi64>, tensor<10x4xf32>) -> tensor<2x3x4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// self-attention: attention_grad; the three cotangents of the shared input are summed.
// CHECK-LABEL: func.func @attention_train_step
// CHECK: %[[Q:[^ ,:]+]], %[[K:[^ ,:]+]], %[[V:[^ ,:]+]] = nn.attention_grad %{{.*}}, %arg0, %arg0, %arg0 {causal{{.*}}num_heads = 2{{.*}} : i64}
// CHECK: %[[S1:[^ ,:]+]] = nn.add %[[Q]], %[[K]]
// CHECK: %[[S2:[^ ,:]+]] = nn.add %[[S1]], %[[V]]
// CHECK: fsdp.sgd_step %arg0, %[[S2]]
fsdp.model @attention {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<1x4x8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<1x4x8xf32>
      %y = nn.attention %x, %x, %x {causal, num_heads = 2 : i64} : (tensor<1x4x8xf32>, tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<1x4x8xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<1x4x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// attention with a learned bias (T5's relative positions, broadcast over
// the batch): attention_grad's fourth result is the bias's gradient.
// CHECK-LABEL: func.func @attention_bias_train_step
// CHECK: %{{[^ ,:]+}}, %{{[^ ,:]+}}, %{{[^ ,:]+}}, %[[DB:[^ ,:]+]] = nn.attention_grad %{{.*}}, %arg0, %arg0, %arg0 bias %arg1 {{.*}}num_heads = 2 : i64}
// CHECK-SAME: -> ({{.*}}, tensor<1x2x4x4xf32>)
// CHECK: fsdp.sgd_step %arg1, %[[DB]]
fsdp.model @attention_bias {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x4x8xf32> init <normal(0.0, 1.0)>
    fsdp.param @bias : tensor<1x2x4x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x4x8xf32>
      %b = fsdp.get_param @bias : tensor<1x2x4x4xf32>
      %y = nn.attention %x, %x, %x bias %b {num_heads = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<1x2x4x4xf32>) -> tensor<2x4x8xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x4x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// rope: the inverse rotation.
// CHECK-LABEL: func.func @rope_train_step
// CHECK: %[[D:[^ ,:]+]] = nn.rope %{{.*}} {{.*}}inverse{{.*}}num_heads = 2{{.*}} : i64} : tensor<1x4x8xf32>
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @rope {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<1x4x8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<1x4x8xf32>
      %y = nn.rope %x {num_heads = 2 : i64} : tensor<1x4x8xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<1x4x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// cast: the cotangent cast back to the parameter's dtype.
// CHECK-LABEL: func.func @cast_train_step
// CHECK: %[[D:[^ ,:]+]] = nn.cast %{{.*}} : tensor<4xf32> to tensor<4xbf16>
// CHECK: fsdp.sgd_step %arg0, %[[D]] {{.*}} : (tensor<4xbf16>, tensor<4xbf16>, tensor<i64>) -> tensor<4xbf16>
fsdp.model @cast {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<4xbf16> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<4xbf16>
      %y = nn.cast %x : tensor<4xbf16> to tensor<4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// reshape and transpose: the inverse reshape and permutation.
// CHECK-LABEL: func.func @reshape_transpose_train_step
// CHECK: %[[R:[^ ,:]+]] = nn.reshape %{{.*}} : tensor<24xf32> to tensor<3x4x2xf32>
// CHECK: %[[D:[^ ,:]+]] = nn.transpose %[[R]] {{.*}}permutation = array<i64: 2, 0, 1>}{{.*}} : (tensor<3x4x2xf32>) -> tensor<2x3x4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @reshape_transpose {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x3x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x3x4xf32>
      %t = nn.transpose %x {permutation = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
      %y = nn.reshape %t : tensor<3x4x2xf32> to tensor<24xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<24xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// split with an unused piece: its cotangent is zeros in the concat.
// CHECK-LABEL: func.func @split_train_step
// CHECK: %[[Z:[^ ,:]+]] = arith.constant {{.*}}dense<0.000000e+00>{{.*}} : tensor<2x2xf32>
// CHECK: %[[D:[^ ,:]+]] = nn.concat %[[Z]], %{{.*}} {dim = 1{{.*}} : i64{{.*}}} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x6xf32>
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @split {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x6xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x6xf32>
      %a, %b = nn.split %x {dim = 1 : i64, sizes = array<i64: 2, 4>} : (tensor<2x6xf32>) -> (tensor<2x2xf32>, tensor<2x4xf32>)
      %loss = nn.reduce_sum %b {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// concat: the cotangent split back into the inputs' sizes.
// CHECK-LABEL: func.func @concat_train_step
// CHECK: %[[D:[^ ,:]+]]:2 = nn.split %{{.*}} {dim = -1{{.*}} : i64{{.*}}sizes = array<i64: 3, 5>} : (tensor<2x8xf32>) -> (tensor<2x3xf32>, tensor<2x5xf32>)
// CHECK: fsdp.sgd_step %arg0, %[[D]]#0
// CHECK: fsdp.sgd_step %arg1, %[[D]]#1
fsdp.model @concat {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<2x3xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<2x5xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<2x3xf32>
      %b = fsdp.get_param @b : tensor<2x5xf32>
      %y = nn.concat %a, %b {dim = -1 : i64} : (tensor<2x3xf32>, tensor<2x5xf32>) -> tensor<2x8xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// reduce_mean: the cotangent spread over the reduced dims and divided by their size.
// CHECK-LABEL: func.func @reduce_mean_train_step
// CHECK: %[[K:[^ ,:]+]] = nn.reshape %{{.*}} : tensor<3xf32> to tensor<1x3x1xf32>
// CHECK: %[[B:[^ ,:]+]] = nn.broadcast %[[K]] {{.*}} : tensor<1x3x1xf32> to tensor<2x3x4xf32>
// CHECK: %[[D:[^ ,:]+]] = nn.scale %[[B]] {factor = 1.250000e-01{{.*}} : f64{{.*}}}
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @reduce_mean {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x3x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x3x4xf32>
      %y = nn.reduce_mean %x {dims = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// cross_entropy (the loss itself): cross_entropy_grad of the logits, seeded
// with 1, computed with the loss in one op (the seed moved up to it).
// CHECK-LABEL: func.func @cross_entropy_train_step
// CHECK: %[[ONE:[^ ,:]+]] = arith.constant {{.*}}dense<1.000000e+00>{{.*}} : tensor<f32>
// CHECK-NEXT: %[[LOSS:[^ ,:]+]], %[[D:[^ ,:]+]] = nn.cross_entropy_with_grad %arg0, %arg2, %[[ONE]] {{.*}}ignore_index = 0{{.*}} : i64{{.*}} : (tensor<6x5xf32>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x5xf32>)
// CHECK-NOT: nn.cross_entropy
// CHECK: fsdp.sgd_step %arg0, %[[D]]
// CHECK: return %[[LOSS]]
fsdp.model @cross_entropy {
  fsdp.module @root kind "Test" {
    fsdp.param @l : tensor<6x5xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%t: tensor<6xi64>) -> tensor<f32> {
      %l = fsdp.get_param @l : tensor<6x5xf32>
      %loss = nn.cross_entropy %l, %t {ignore_index = 0 : i64} : (tensor<6x5xf32>, tensor<6xi64>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// mse_loss (mean over 8 elements): 2(x − t)/8 · g; the target gets the negation.
// CHECK-LABEL: func.func @mse_loss_train_step
// CHECK: %[[DIFF:[^ ,:]+]] = nn.sub %arg0, %arg1
// CHECK: %[[S:[^ ,:]+]] = nn.scale %[[DIFF]] {factor = 2.500000e-01{{.*}} : f64{{.*}}}
// CHECK: %[[DX:[^ ,:]+]] = nn.mul %[[S]], %{{.*}}
// CHECK: %[[DT:[^ ,:]+]] = nn.scale %[[DX]] {factor = -1.000000e+00{{.*}} : f64{{.*}}}
// CHECK: fsdp.sgd_step %arg0, %[[DX]]
// CHECK: fsdp.sgd_step %arg1, %[[DT]]
fsdp.model @mse_loss {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @t : tensor<2x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x4xf32>
      %t = fsdp.get_param @t : tensor<2x4xf32>
      %loss = nn.mse_loss %x, %t : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// broadcast: the cotangent summed back to the input shape.
// CHECK-LABEL: func.func @broadcast_train_step
// CHECK: %[[S:[^ ,:]+]] = nn.reduce_sum %{{.*}} {dims = array<i64: 0, 2>{{.*}}}{{.*}} : (tensor<2x3x4xf32>) -> tensor<3xf32>
// CHECK: %[[D:[^ ,:]+]] = nn.reshape %[[S]] {{.*}} : tensor<3xf32> to tensor<3x1xf32>
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @broadcast {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<3x1xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<3x1xf32>
      %y = nn.broadcast %x : tensor<3x1xf32> to tensor<2x3x4xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// Pointwise math: one nn.unary_grad of the same function and parameters
// (clamp's missing bound is infinite); div: g / b and -(g * y) / b.
// CHECK-LABEL: func.func @math_train_step
// CHECK: %[[Y:[^ ,:]+]] = nn.div %{{.*}}, %arg1 {{.*}}: (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[GL:[^ ,:]+]] = nn.div %[[G:[^ ,:]+]], %arg1 {{.*}}: (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[GY:[^ ,:]+]] = nn.mul %[[G]], %[[Y]] {{.*}}: (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[Q:[^ ,:]+]] = nn.div %[[GY]], %arg1 {{.*}}: (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
// CHECK: %[[NQ:[^ ,:]+]] = nn.scale %[[Q]] {factor = -1.000000e+00 : f64
// CHECK: %[[GD:[^ ,:]+]] = nn.reduce_sum %[[NQ]] {dims = array<i64: 0>{{.*}}} : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK: %[[GC:[^ ,:]+]] = nn.unary_grad %[[GL]], %{{.*}} {a = -5.000000e-01 : f64, b = 0x7FF0000000000000 : f64, fn = #nn.unary_fn<clamp>{{.*}}} : tensor<2x3xf32>
// CHECK: %[[GP:[^ ,:]+]] = nn.unary_grad %[[GC]], %{{.*}} {a = 1.500000e+00 : f64, fn = #nn.unary_fn<pow>{{.*}}} : tensor<2x3xf32>
// CHECK: %[[GE:[^ ,:]+]] = nn.unary_grad %[[GP]], %{{.*}} {fn = #nn.unary_fn<erf>{{.*}}} : tensor<2x3xf32>
// CHECK: %[[GCO:[^ ,:]+]] = nn.unary_grad %[[GE]], %{{.*}} {fn = #nn.unary_fn<cos>{{.*}}} : tensor<2x3xf32>
// CHECK: %[[GS:[^ ,:]+]] = nn.unary_grad %[[GCO]], %{{.*}} {fn = #nn.unary_fn<sin>{{.*}}} : tensor<2x3xf32>
// CHECK: %[[GAC:[^ ,:]+]] = nn.unary_grad %[[GS]], %{{.*}} {fn = #nn.unary_fn<acos>{{.*}}} : tensor<2x3xf32>
// CHECK: %[[GAS:[^ ,:]+]] = nn.unary_grad %[[GAC]], %{{.*}} {fn = #nn.unary_fn<asin>{{.*}}} : tensor<2x3xf32>
// CHECK: %[[GAT:[^ ,:]+]] = nn.unary_grad %[[GAS]], %{{.*}} {fn = #nn.unary_fn<atan>{{.*}}} : tensor<2x3xf32>
// CHECK: %[[GX:[^ ,:]+]] = nn.unary_grad %[[GAT]], %arg0 {fn = #nn.unary_fn<tanh>{{.*}}} : tensor<2x3xf32>
// CHECK: fsdp.sgd_step %arg0, %[[GX]]
// CHECK: fsdp.sgd_step %arg1, %[[GD]]
fsdp.model @math {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x3xf32> init <normal(0.0, 1.0)>
    fsdp.param @d : tensor<3xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x3xf32>
      %d = fsdp.get_param @d : tensor<3xf32>
      %th = nn.tanh %x : tensor<2x3xf32>
      %at = nn.atan %th : tensor<2x3xf32>
      %as = nn.asin %at : tensor<2x3xf32>
      %ac = nn.acos %as : tensor<2x3xf32>
      %sn = nn.sin %ac : tensor<2x3xf32>
      %cs = nn.cos %sn : tensor<2x3xf32>
      %t = nn.erf %cs : tensor<2x3xf32>
      %p = nn.pow %t {exponent = 1.5 : f64} : tensor<2x3xf32>
      %c = nn.clamp %p {min = -0.5 : f64} : tensor<2x3xf32>
      %y = nn.div %c, %d : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
      %loss = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// slice and pad are each other's VJP.
// CHECK-LABEL: func.func @window_train_step
// CHECK: %[[S:[^ ,:]+]] = nn.slice %{{.*}} {dim = 1 : i64, end = 7 : i64, {{.*}}start = 2 : i64} : (tensor<2x9x4xf32>) -> tensor<2x5x4xf32>
// CHECK: %[[DP:[^ ,:]+]] = nn.pad %[[S]] {dim = 1 : i64, {{.*}}high = 2 : i64, low = 1 : i64{{.*}}} : (tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
// CHECK: fsdp.sgd_step %arg0, %[[DP]]
fsdp.model @window {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x8x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x8x4xf32>
      %s = nn.slice %x {dim = 1 : i64, start = 1 : i64, end = 6 : i64} : (tensor<2x8x4xf32>) -> tensor<2x5x4xf32>
      %p = nn.pad %s {dim = 1 : i64, low = 2 : i64, high = 2 : i64, value = 1.0 : f64} : (tensor<2x5x4xf32>) -> tensor<2x9x4xf32>
      %loss = nn.reduce_sum %p {dims = array<i64: 0, 1, 2>} : (tensor<2x9x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// A strided slice's VJP scatters the cotangent into zeros (nn.slice_grad),
// here GPT-J's x[:, ::2] times x[:, 1::2]: each half's gradient is the
// other half, scattered to its own positions, then summed.
// CHECK-LABEL: func.func @strided_window_train_step
// CHECK: %[[EVEN:[^ ,:]+]] = nn.slice %arg0 {dim = 1 : i64, end = 8 : i64, {{.*}}start = 0 : i64, step = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x4xf32>
// CHECK: %[[ODD:[^ ,:]+]] = nn.slice %arg0 {dim = 1 : i64, end = 8 : i64, {{.*}}start = 1 : i64, step = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x4xf32>
// CHECK-DAG: %[[GEVEN:[^ ,:]+]] = nn.mul %{{[^,]+}}, %[[ODD]] {fsdp.phase = #fsdp<phase backward>
// CHECK-DAG: %[[GODD:[^ ,:]+]] = nn.mul %{{[^,]+}}, %[[EVEN]] {fsdp.phase = #fsdp<phase backward>
// CHECK-DAG: %[[DODD:[^ ,:]+]] = nn.slice_grad %[[GODD]] {dim = 1 : i64, {{.*}}start = 1 : i64, step = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x8xf32>
// CHECK-DAG: %[[DEVEN:[^ ,:]+]] = nn.slice_grad %[[GEVEN]] {dim = 1 : i64, {{.*}}start = 0 : i64, step = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x8xf32>
// CHECK: %[[D:[^ ,:]+]] = nn.add %[[DODD]], %[[DEVEN]]
// CHECK: fsdp.sgd_step %arg0, %[[D]]
fsdp.model @strided_window {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x8xf32>
      %even = nn.slice %x {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x4xf32>
      %odd = nn.slice %x {dim = 1 : i64, start = 1 : i64, end = 8 : i64, step = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x4xf32>
      %p = nn.mul %even, %odd : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %loss = nn.reduce_sum %p {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// A strided slice that ends early (x[:, 1:5:2] of 8: positions 1 and 3,
// not 5 and 7) scatters its 2 slices back (nn.slice_grad infers the count
// from grad's type).
// CHECK-LABEL: func.func @strided_early_end_train_step
// CHECK: %[[PART:[^ ,:]+]] = nn.slice %arg0 {dim = 1 : i64, end = 5 : i64, {{.*}}start = 1 : i64, step = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x2xf32>
// CHECK: nn.slice_grad %{{[^ ]+}} {dim = 1 : i64, {{.*}}start = 1 : i64, step = 2 : i64} : (tensor<2x2xf32>) -> tensor<2x8xf32>
fsdp.model @strided_early_end {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x8xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x8xf32>
      %part = nn.slice %x {dim = 1 : i64, start = 1 : i64, end = 5 : i64, step = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x2xf32>
      %p = nn.mul %part, %part : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      %loss = nn.reduce_sum %p {dims = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// cumsum's VJP is the reversed cumsum of its cotangent (a reversed one's
// the forward one); a cumsum of ids on the way to an embedding gets none.
// CHECK-LABEL: func.func @cumsum_train_step
// CHECK: %[[C:[^ ,:]+]] = nn.cumsum %arg0 {dim = 1 : i64{{.*}}} : tensor<2x4xf32>
// CHECK: %[[R:[^ ,:]+]] = nn.cumsum %[[C]] {dim = 0 : i64{{.*}}reverse} : tensor<2x4xf32>
// CHECK: nn.cumsum %arg3 {dim = 1 : i64{{.*}}} : tensor<2x4xi64>
// CHECK: %[[DR:[^ ,:]+]] = nn.cumsum %{{[^ ]+}} {dim = 0 : i64, fsdp.phase = #fsdp<phase backward>, fsdp.unit = ""} : tensor<2x4xf32>
// CHECK: %[[DC:[^ ,:]+]] = nn.cumsum %[[DR]] {dim = 1 : i64{{.*}}reverse} : tensor<2x4xf32>
// CHECK-NOT: nn.cumsum
// CHECK: fsdp.sgd_step %arg0, %[[DC]]
fsdp.model @cumsum {
  fsdp.module @root kind "Test" {
    fsdp.param @x : tensor<2x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @table : tensor<16x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%ids: tensor<2x4xi64>) -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x4xf32>
      %c = nn.cumsum %x {dim = 1 : i64} : tensor<2x4xf32>
      %r = nn.cumsum %c {dim = 0 : i64, reverse} : tensor<2x4xf32>
      %pos = nn.cumsum %ids {dim = 1 : i64} : tensor<2x4xi64>
      %table = fsdp.get_param @table : tensor<16x4xf32>
      %e = nn.embedding %pos, %table : (tensor<2x4xi64>, tensor<16x4xf32>) -> tensor<2x4x4xf32>
      %es = nn.reduce_sum %e {dims = array<i64: 2>} : (tensor<2x4x4xf32>) -> tensor<2x4xf32>
      %p = nn.mul %r, %es : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %loss = nn.reduce_sum %p {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// Integers computed at run time carry no gradient: RoBERTa's position ids
// (a mask cast to i32, its cumsum, times the mask, widened, + 1) and a
// trained value truncated to ids reach the loss only through embedding
// indices, so the backward has no integer op and no cast back; the table
// and %w still get their gradients.
// CHECK-LABEL: func.func @integer_positions_train_step
// CHECK: nn.embedding_grad
// CHECK-NOT: xi32>
// CHECK-NOT: nn.cumsum {{.*}}xi64>
// CHECK: fsdp.sgd_step
fsdp.model @integer_positions {
  fsdp.module @root kind "Test" {
    fsdp.param @table : tensor<8x4xf32> init <normal(0.0, 1.0)>
    fsdp.param @w : tensor<2x4xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%ids: tensor<2x4xi64>) -> tensor<f32> {
      %f = nn.cast %ids : tensor<2x4xi64> to tensor<2x4xf32>
      %pad = arith.constant dense<1.0> : tensor<f32>
      %keep = nn.ne %f, %pad : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
      %mask = nn.cast %keep : tensor<2x4xf32> to tensor<2x4xi32>
      %wide = nn.cast %mask : tensor<2x4xi32> to tensor<2x4xi64>
      %count = nn.cumsum %wide {dim = 1 : i64} : tensor<2x4xi64>
      %narrow = nn.cast %count : tensor<2x4xi64> to tensor<2x4xi32>
      %masked = nn.mul %narrow, %mask : (tensor<2x4xi32>, tensor<2x4xi32>) -> tensor<2x4xi32>
      %long = nn.cast %masked : tensor<2x4xi32> to tensor<2x4xi64>
      %one = arith.constant dense<1> : tensor<i64>
      %pos = nn.add %long, %one : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
      %table = fsdp.get_param @table : tensor<8x4xf32>
      %e = nn.embedding %pos, %table : (tensor<2x4xi64>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
      %w = fsdp.get_param @w : tensor<2x4xf32>
      %wids = nn.cast %w : tensor<2x4xf32> to tensor<2x4xi64>
      %e2 = nn.embedding %wids, %table : (tensor<2x4xi64>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
      %es = nn.add %e, %e2 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
      %s = nn.reduce_sum %es {dims = array<i64: 2>} : (tensor<2x4x4xf32>) -> tensor<2x4xf32>
      %p = nn.mul %s, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %loss = nn.reduce_sum %p {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// embedding with padding_idx: the table's gradient times a [V, 1] mask with
// a zero in the padding row (nn.Embedding(padding_idx=1)).
// CHECK-LABEL: func.func @padded_embedding_train_step
// CHECK: %[[G:[^ ,:]+]] = nn.embedding_grad
// CHECK: %[[M:[^ ,:]+]] = arith.constant {{.*}}dense<{{\[}}[1.000000e+00], [0.000000e+00], [1.000000e+00]]> : tensor<3x1xf32>
// CHECK: %[[DT:[^ ,:]+]] = nn.mul %[[G]], %[[M]] {{.*}}: (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
// CHECK: fsdp.sgd_step %arg0, %[[DT]]
fsdp.model @padded_embedding {
  fsdp.module @root kind "Test" {
    fsdp.param @table : tensor<3x2xf32> init <normal(0.0, 1.0)>
    fsdp.forward (%ids: tensor<4xi64>) -> tensor<f32> {
      %t = fsdp.get_param @table : tensor<3x2xf32>
      %e = nn.embedding %ids, %t {padding_idx = 1 : i64} : (tensor<4xi64>, tensor<3x2xf32>) -> tensor<4x2xf32>
      %loss = nn.reduce_sum %e {dims = array<i64: 0, 1>} : (tensor<4x2xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// stop_gradient (detach): the loss a·b + a reaches a through both terms but
// b only through the product, whose a-side is detached; so a's gradient is
// the sum's 1 alone (the product's term, b, is cut) and b's is a. The op
// itself is gone from the step: its result is its operand.
// CHECK-LABEL: func.func @detach_train_step
// CHECK-NOT: nn.stop_gradient
// CHECK: %[[PROD:[^ ,:]+]] = nn.mul %arg0, %arg1 {fsdp.phase = #fsdp<phase forward>
// CHECK: %[[ONES:[^ ,:]+]] = nn.broadcast
// CHECK-NOT: nn.stop_gradient
// CHECK: %[[GB:[^ ,:]+]] = nn.mul %[[ONES]], %arg0 {fsdp.phase = #fsdp<phase backward>
// CHECK-NOT: nn.mul
// CHECK: fsdp.sgd_step %arg0, %[[ONES]]
// CHECK: fsdp.sgd_step %arg1, %[[GB]]
fsdp.model @detach {
  fsdp.module @root kind "Test" {
    fsdp.param @a : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.param @b : tensor<4xf32> init <normal(0.0, 1.0)>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<4xf32>
      %b = fsdp.get_param @b : tensor<4xf32>
      %d = nn.stop_gradient %a : tensor<4xf32>
      %p = nn.mul %d, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %y = nn.add %p, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
