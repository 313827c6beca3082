// Every nn verifier error, once.
// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

func.func @linear_weight_rank(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+2 {{weight must be 2-D [out_features, in_features]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.linear %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @linear_input_rank(%x: tensor<f32>, %w: tensor<16x8xf32>) {
  // expected-error @+2 {{input must have at least one dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.linear %x, %w : (tensor<f32>, tensor<16x8xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @linear_dtype(%x: tensor<4x8xbf16>, %w: tensor<16x8xf32>) {
  // expected-error @+2 {{input and weight element types differ: 'bf16' vs 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.linear %x, %w : (tensor<4x8xbf16>, tensor<16x8xf32>) -> tensor<4x16xbf16>
  return
}

// -----

func.func @linear_features(%x: tensor<4x7xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+2 {{weight has 8 input features but the input's last dimension is 7}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.linear %x, %w : (tensor<4x7xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{bias must be a tensor of shape [16], got 'tensor<8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @linear_bias_dtype(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf16>) {
  // expected-error @+2 {{bias element type 'f16' differs from the input's 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf16>) -> tensor<4x16xf32>
  return
}

// -----

func.func @linear_result(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x16xf32>' are incompatible with return type(s) of operation 'tensor<4x17xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x17xf32>
  return
}

// -----

func.func @dynamic_shape(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = nn.relu %x : tensor<?x8xf32>
  return
}

// -----

func.func @f64_data(%x: tensor<4xf64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = nn.relu %x : tensor<4xf64>
  return
}

// -----

func.func @matmul_rank(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{operands must have rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @add_of_two_integer_types(%a: tensor<2x8xi32>, %b: tensor<8xi64>) {
  // expected-error @+2 {{operand element types differ: 'i32' vs 'i64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.add %a, %b : (tensor<2x8xi32>, tensor<8xi64>) -> tensor<2x8xi32>
  return
}

// -----

func.func @div_of_integers(%a: tensor<2x8xi64>, %b: tensor<8xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = nn.div %a, %b : (tensor<2x8xi64>, tensor<8xi64>) -> tensor<2x8xi64>
  return
}

// -----

func.func @matmul_dtype(%a: tensor<2x8xf32>, %b: tensor<8x4xbf16>) {
  // expected-error @+2 {{operand element types differ: 'f32' vs 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<2x8xf32>, tensor<8x4xbf16>) -> tensor<2x4xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{contraction sizes differ: lhs has 8 columns, rhs has 4 rows}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.matmul %a, %b {transpose_rhs} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x2x8xf32>, %b: tensor<2x8x4xf32>) {
  // expected-error @+2 {{batch dimensions of 'tensor<3x2x8xf32>' and 'tensor<2x8x4xf32>' do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.matmul %a, %b : (tensor<3x2x8xf32>, tensor<2x8x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

func.func @binary_dtype(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+2 {{operand element types differ: 'f32' vs 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.add %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @binary_broadcast(%a: tensor<4x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{shapes 'tensor<4x3xf32>' and 'tensor<4xf32>' do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.mul %a, %b : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @unary_type(%a: tensor<4xf32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "nn.relu"(%a) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @dropout_p(%a: tensor<4xf32>) {
  // expected-error @+1 {{attribute 'p' failed to satisfy constraint: 64-bit float attribute whose value is in [0, 1)}}
  %0 = nn.dropout %a {p = 1.0 : f64, rng_id = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @random_empty_range() {
  // expected-error @+1 {{uniform range [2.000000e+00, 1.000000e+00) is empty}}
  %0 = nn.random {a = 2.0 : f64, b = 1.0 : f64, distribution = #nn.distribution<uniform>, rng_id = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @random_negative_std() {
  // expected-error @+1 {{normal standard deviation -1.000000e+00 is negative}}
  %0 = nn.random {a = 0.0 : f64, b = -1.0 : f64, distribution = #nn.distribution<normal>, rng_id = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @random_infinite() {
  // expected-error @+1 {{needs finite a and b, got 0.000000e+00 and INF}}
  %0 = nn.random {a = 0.0 : f64, b = 0x7FF0000000000000 : f64, distribution = #nn.distribution<uniform>, rng_id = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @random_integer() {
  // expected-error @+1 {{result #0 must be statically shaped tensor of}}
  %0 = nn.random {a = 0.0 : f64, b = 1.0 : f64, distribution = #nn.distribution<uniform>, rng_id = 0 : i64} : tensor<4xi64>
  return
}

// -----

func.func @layer_norm_rank(%x: tensor<f32>) {
  // expected-error @+2 {{input must be a tensor of rank >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.layer_norm %x : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @layer_norm_weight(%x: tensor<4x32xf32>, %g: tensor<4xf32>) {
  // expected-error @+2 {{weight must be a tensor of shape [32], got 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.layer_norm %x weight %g : (tensor<4x32xf32>, tensor<4xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @linear_gelu_weight(%x: tensor<4x8xf32>, %w: tensor<16x4xf32>) {
  // expected-error @+2 {{weight has 4 input features but the input's last dimension is 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = nn.linear_gelu %x, %w : (tensor<4x8xf32>, tensor<16x4xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>)
  return
}

// -----

func.func @linear_gelu_grad_pre(%g: tensor<4x16xf32>, %x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %pre: tensor<4x16xf32>) {
  // expected-error @+2 {{pre has type 'tensor<4x16xf32>' but the input gradient is 'tensor<4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = nn.linear_gelu_grad %g, %x, %w, %pre : (tensor<4x16xf32>, tensor<4x8xf32>, tensor<16x8xf32>, tensor<4x16xf32>) -> (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
  return
}

// -----

func.func @add_layer_norm_broadcast(%a: tensor<4x32xf32>, %b: tensor<32xf32>) {
  // expected-error @+2 {{lhs and rhs must have one type}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = nn.add_layer_norm %a, %b : (tensor<4x32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
  return
}

// -----

func.func @add_layer_norm_grad_broadcast(%g: tensor<4x32xf32>, %x: tensor<4x32xf32>, %r: tensor<32xf32>) {
  // expected-error @+2 {{addend has type 'tensor<32xf32>' but the input gradient has 'tensor<4x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = nn.add_layer_norm_grad %g, %x, %r : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>)
  return
}

// -----

func.func @add_layer_norm_weight(%a: tensor<4x32xf32>, %g: tensor<4xf32>) {
  // expected-error @+2 {{weight must be a tensor of shape [32], got 'tensor<4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = nn.add_layer_norm %a, %a weight %g : (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>)
  return
}

// -----

func.func @layer_norm_epsilon(%x: tensor<4x32xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %0 = nn.layer_norm %x {epsilon = 0.0 : f64} : (tensor<4x32xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<4x32xf32>, %g: tensor<32xbf16>) {
  // expected-error @+2 {{weight element type 'bf16' differs from the input's 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.rms_norm %x weight %g : (tensor<4x32xf32>, tensor<32xbf16>) -> tensor<4x32xf32>
  return
}

// -----

func.func @batch_norm_rank(%x: tensor<8xf32>, %c: tensor<8xf32>) {
  // expected-error @+2 {{input must be [N, C, ...] with rank >= 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = nn.batch_norm %x, %c, %c, %c, %c : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_stats(%x: tensor<8x4xf32>, %c: tensor<4xf32>, %s: tensor<8xf32>) {
  // expected-error @+2 {{running_var must be a tensor of shape [4], got 'tensor<8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:3 = nn.batch_norm %x, %c, %c, %c, %s : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<8xf32>)
  return
}

// -----

func.func @softmax_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = nn.softmax %x {dim = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @softmax_rank(%x: tensor<f32>) {
  // expected-error @+1 {{input must have rank >= 1}}
  %0 = nn.softmax %x : tensor<f32>
  return
}

// -----

func.func @embedding_table(%ids: tensor<4xi64>, %t: tensor<64xf32>) {
  // expected-error @+2 {{table must be 2-D [num_embeddings, dim]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.embedding %ids, %t : (tensor<4xi64>, tensor<64xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @embedding_float_ids(%ids: tensor<4xf32>, %t: tensor<64x8xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = nn.embedding %ids, %t : (tensor<4xf32>, tensor<64x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @packed_attention_width(%qkv: tensor<2x16x100xf32>) {
  // expected-error @+2 {{'nn.packed_attention' op qkv width 100 is not (num_heads + 2 x num_kv_heads) = 12 heads of one head dim}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.packed_attention %qkv {num_heads = 4 : i64, num_kv_heads = 4 : i64} : (tensor<2x16x100xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @packed_attention_grad_type(%g: tensor<2x16x16xf32>, %qkv: tensor<2x16x96xf32>) {
  // expected-error @+2 {{grad has type 'tensor<2x16x16xf32>' but the forward op produces 'tensor<2x16x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.packed_attention_grad %g, %qkv {num_heads = 4 : i64} : (tensor<2x16x16xf32>, tensor<2x16x96xf32>) -> tensor<2x16x96xf32>
  return
}

// -----

func.func @packed_attention_saved_stats(%g: tensor<2x16x32xf32>, %qkv: tensor<2x16x96xf32>, %s: tensor<2x16x4xf32>) {
  // expected-error @+2 {{'nn.packed_attention_grad' op saved must be the forward's result 'tensor<2x16x32xf32>' and its statistics 'tensor<2x4x16xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.packed_attention_grad %g, %qkv saved %g, %s {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x96xf32>, tensor<2x16x32xf32>, tensor<2x16x4xf32>) -> tensor<2x16x96xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<16x32xf32>) {
  // expected-error @+2 {{query, key and value must be 3-D [batch, seq, heads*dim]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %q, %q {num_heads = 4 : i64} : (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return
}

// -----

func.func @attention_dtype(%q: tensor<2x16x32xf32>, %k: tensor<2x16x32xbf16>) {
  // expected-error @+2 {{query, key and value element types differ}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %k, %k {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x16x32xf32>, %k: tensor<3x16x32xf32>) {
  // expected-error @+2 {{batch sizes differ: query 2, key 3, value 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %k, %k {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<3x16x32xf32>, tensor<3x16x32xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @attention_bias_shape(%q: tensor<2x16x32xf32>, %b: tensor<2x3x16x16xf32>) {
  // expected-error @+2 {{bias 'tensor<2x3x16x16xf32>' must be [1 or 2, 1 or 4, 16, 16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %q, %q bias %b {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x3x16x16xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @attention_bias_dtype(%q: tensor<2x16x32xf32>, %b: tensor<1x1x16x16xbf16>) {
  // expected-error @+2 {{bias element type 'bf16' differs from the query's 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %q, %q bias %b {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<1x1x16x16xbf16>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @attention_key_value(%q: tensor<2x16x32xf32>, %k: tensor<2x16x32xf32>, %v: tensor<2x8x32xf32>) {
  // expected-error @+2 {{key 'tensor<2x16x32xf32>' and value 'tensor<2x8x32xf32>' must have the same shape}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %k, %v {num_heads = 4 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x8x32xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @attention_heads(%q: tensor<2x16x30xf32>) {
  // expected-error @+2 {{query width 30 is not divisible by num_heads 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %q, %q {num_heads = 4 : i64} : (tensor<2x16x30xf32>, tensor<2x16x30xf32>, tensor<2x16x30xf32>) -> tensor<2x16x30xf32>
  return
}

// -----

func.func @attention_kv_heads(%q: tensor<2x16x32xf32>, %k: tensor<2x16x24xf32>) {
  // expected-error @+2 {{num_heads 4 is not a multiple of num_kv_heads 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 3 : i64} : (tensor<2x16x32xf32>, tensor<2x16x24xf32>, tensor<2x16x24xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @attention_key_width(%q: tensor<2x16x32xf32>, %k: tensor<2x16x8xf32>) {
  // expected-error @+2 {{key width 8 must be 2 kv heads x head dim 8 = 16}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.attention %q, %k, %k {num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x32xf32>, tensor<2x16x8xf32>, tensor<2x16x8xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @attention_num_heads(%q: tensor<2x16x32xf32>) {
  // expected-error @+1 {{attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = nn.attention %q, %q, %q {num_heads = 0 : i64} : (tensor<2x16x32xf32>, tensor<2x16x32xf32>, tensor<2x16x32xf32>) -> tensor<2x16x32xf32>
  return
}

// -----

func.func @rope_rank(%x: tensor<16x32xf32>) {
  // expected-error @+1 {{input must be 3-D [batch, seq, heads*dim], got 'tensor<16x32xf32>'}}
  %0 = nn.rope %x {num_heads = 4 : i64} : tensor<16x32xf32>
  return
}

// -----

func.func @rope_heads(%x: tensor<2x16x30xf32>) {
  // expected-error @+1 {{width 30 is not divisible by num_heads 4}}
  %0 = nn.rope %x {num_heads = 4 : i64} : tensor<2x16x30xf32>
  return
}

// -----

func.func @rope_odd(%x: tensor<2x16x12xf32>) {
  // expected-error @+1 {{head dim 3 must be even to rotate pairs}}
  %0 = nn.rope %x {num_heads = 4 : i64} : tensor<2x16x12xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{changes the shape: 'tensor<4x8xf32>' to 'tensor<32xbf16>'}}
  %0 = nn.cast %x : tensor<4x8xf32> to tensor<32xbf16>
  return
}

// -----

func.func @cast_to_i8(%x: tensor<4xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xi8>'}}
  %0 = nn.cast %x : tensor<4xf32> to tensor<4xi8>
  return
}

// -----

func.func @reshape_dtype(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{changes the element type (use nn.cast): 'f32' to 'bf16'}}
  %0 = nn.reshape %x : tensor<4x8xf32> to tensor<32xbf16>
  return
}

// -----

func.func @reshape_numel(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{changes the number of elements: 32 to 30}}
  %0 = nn.reshape %x : tensor<4x8xf32> to tensor<5x6xf32>
  return
}

// -----

func.func @transpose_length(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permutation has 2 entries for rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  return
}

// -----

func.func @transpose_repeat(%x: tensor<2x3x4xf32>) {
  // expected-error @+2 {{permutation [1, 1, 0] is not a permutation of 0..2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.transpose %x {permutation = array<i64: 1, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<3x3x2xf32>
  return
}

// -----

func.func @split_dim(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{dim 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = nn.split %x {dim = 2 : i64, sizes = array<i64: 3, 3>} : (tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
  return
}

// -----

func.func @split_sum(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{sizes add up to 5 but dimension 1 has size 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = nn.split %x {dim = 1 : i64, sizes = array<i64: 3, 2>} : (tensor<2x6xf32>) -> (tensor<2x3xf32>, tensor<2x2xf32>)
  return
}

// -----

func.func @split_empty(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{needs at least one size}}
  // expected-error @+1 {{failed to infer returned types}}
  nn.split %x {dim = 1 : i64, sizes = array<i64>} : (tensor<2x6xf32>) -> ()
  return
}

// -----

func.func @split_negative(%x: tensor<2x6xf32>) {
  // expected-error @+2 {{sizes must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = nn.split %x {dim = 1 : i64, sizes = array<i64: 7, -1>} : (tensor<2x6xf32>) -> (tensor<2x7xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+2 {{needs at least one input}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.concat {dim = 0 : i64} : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_dim(%a: tensor<2x3xf32>) {
  // expected-error @+2 {{dim -3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.concat %a, %a {dim = -3 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_rank(%a: tensor<2x3xf32>, %b: tensor<2x3x1xf32>) {
  // expected-error @+2 {{input #1 has type 'tensor<2x3x1xf32>', incompatible with 'tensor<2x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.concat %a, %b {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x3x1xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @concat_shape(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+2 {{input #1 differs in dimension 1: 4 vs 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.concat %a, %b {dim = 0 : i64} : (tensor<2x3xf32>, tensor<2x4xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @reduce_dim(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{dim 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.reduce_sum %x {dims = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_twice(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{dim -1 is listed twice}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.reduce_mean %x {dims = array<i64: 1, -1>} : (tensor<2x3xf32>) -> tensor<2xf32>
  return
}

// -----

func.func @cross_entropy_targets(%l: tensor<6x23xf32>, %t: tensor<5xi64>) {
  // expected-error @+2 {{targets 'tensor<5xi64>' must have the shape of logits without the class dimension}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.cross_entropy %l, %t : (tensor<6x23xf32>, tensor<5xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_rank(%l: tensor<f32>, %t: tensor<i64>) {
  // expected-error @+2 {{logits must be [..., num_classes]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.cross_entropy %l, %t : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_num_classes(%l: tensor<6x23xf32>, %t: tensor<6xi64>) {
  // expected-error @+2 {{'nn.cross_entropy' op num_classes = 24 exceeds the logits' last dimension (23)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.cross_entropy %l, %t {num_classes = 24 : i64} : (tensor<6x23xf32>, tensor<6xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_grad_num_classes(%l: tensor<6x23xf32>, %t: tensor<6xi64>, %g: tensor<f32>) {
  // expected-error @+2 {{'nn.cross_entropy_grad' op num_classes = 30 exceeds the logits' last dimension (23)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.cross_entropy_grad %g, %l, %t {num_classes = 30 : i64} : (tensor<f32>, tensor<6x23xf32>, tensor<6xi64>) -> tensor<6x23xf32>
  return
}

// -----

func.func @cross_entropy_with_grad_cotangent(%l: tensor<6x23xf32>, %t: tensor<6xi64>, %g: tensor<2xf32>) {
  // expected-error @+2 {{grad has type 'tensor<2xf32>' but the forward op produces 'tensor<f32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0:2 = nn.cross_entropy_with_grad %l, %t, %g : (tensor<6x23xf32>, tensor<6xi64>, tensor<2xf32>) -> (tensor<f32>, tensor<6x23xf32>)
  return
}

// -----

func.func @mse_types(%a: tensor<4xf32>, %b: tensor<5xf32>) {
  // expected-error @+2 {{input and target types differ: 'tensor<4xf32>' vs 'tensor<5xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.mse_loss %a, %b : (tensor<4xf32>, tensor<5xf32>) -> tensor<f32>
  return
}

// -----

func.func @div_shapes(%a: tensor<4x8xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{shapes 'tensor<4x8xf32>' and 'tensor<3xf32>' do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.div %a, %b : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @tanh_of_integers(%a: tensor<4xi64>) {
  // expected-error @+1 {{must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = nn.tanh %a : tensor<4xi64>
  return
}

// -----

func.func @clamp_without_bounds(%a: tensor<4xf32>) {
  // expected-error @+1 {{needs a min, a max or both}}
  %0 = nn.clamp %a : tensor<4xf32>
  return
}

// -----

func.func @clamp_inverted_bounds(%a: tensor<4xf32>) {
  // expected-error @+1 {{min 2.000000e+00 is above max 1.000000e+00}}
  %0 = nn.clamp %a {min = 2.0 : f64, max = 1.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @slice_past_the_end(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{window [4, 10) is empty or outside dimension 1 of size 8}}
  %0 = nn.slice %x {dim = 1 : i64, start = 4 : i64, end = 10 : i64} : (tensor<2x8xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @slice_empty(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{window [3, 3) is empty or outside dimension 1 of size 8}}
  %0 = nn.slice %x {dim = 1 : i64, start = 3 : i64, end = 3 : i64} : (tensor<2x8xf32>) -> tensor<2x0xf32>
  return
}

// -----

func.func @slice_dim(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = nn.slice %x {dim = 2 : i64, start = 0 : i64, end = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_result(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result type 'tensor<2x3xf32>' should be 'tensor<2x4xf32>'}}
  %0 = nn.slice %x {dim = 1 : i64, start = 0 : i64, end = 4 : i64} : (tensor<2x8xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_strided_result(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result type 'tensor<2x4xf32>' should be 'tensor<2x3xf32>'}}
  %0 = nn.slice %x {dim = 1 : i64, start = 1 : i64, end = 7 : i64, step = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{attribute 'step' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = nn.slice %x {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 0 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_grad_shape(%g: tensor<2x4xf32>) {
  // expected-error @+1 {{grad has type 'tensor<2x4xf32>' but slicing 'tensor<2x8xf32>' from 1 by step 3 gives at most 3 slices of dim 1 and the result's other dims}}
  %0 = nn.slice_grad %g {dim = 1 : i64, start = 1 : i64, step = 3 : i64} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_grad_other_dims(%g: tensor<3x2xf32>) {
  // expected-error @+1 {{grad has type 'tensor<3x2xf32>' but slicing 'tensor<2x8xf32>' from 1 by step 2 gives at most 4 slices of dim 1 and the result's other dims}}
  %0 = nn.slice_grad %g {dim = 1 : i64, start = 1 : i64, step = 2 : i64} : (tensor<3x2xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_grad_dim(%g: tensor<2x4xf32>) {
  // expected-error @+1 {{dim -1 is out of range for rank 2}}
  %0 = nn.slice_grad %g {dim = -1 : i64, start = 0 : i64, step = 2 : i64} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @cumsum_dim(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = nn.cumsum %x {dim = 2 : i64} : tensor<2x8xi64>
  return
}

// -----

func.func @cumsum_of_a_scalar(%x: tensor<f32>) {
  // expected-error @+1 {{dim 0 is out of range for rank 0}}
  %0 = nn.cumsum %x {dim = 0 : i64} : tensor<f32>
  return
}

// -----

func.func @cumsum_changes_type(%x: tensor<2x8xi32>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "nn.cumsum"(%x) {dim = 1 : i64} : (tensor<2x8xi32>) -> tensor<2x8xi64>
  return
}

// -----

func.func @pad_negative(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{low and high must be non-negative, got -1 and 1}}
  %0 = nn.pad %x {dim = 1 : i64, low = -1 : i64, high = 1 : i64} : (tensor<2x8xi64>) -> tensor<2x8xi64>
  return
}

// -----

func.func @pad_result(%x: tensor<2x8xi64>) {
  // expected-error @+1 {{result type 'tensor<2x9xi32>' should be 'tensor<2x9xi64>'}}
  %0 = nn.pad %x {dim = 1 : i64, low = 0 : i64, high = 1 : i64} : (tensor<2x8xi64>) -> tensor<2x9xi32>
  return
}

// -----

func.func @embedding_padding_idx(%ids: tensor<4xi64>, %table: tensor<8x4xf32>) {
  // expected-error @+2 {{padding_idx 8 is not a row of the 8-row table}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.embedding %ids, %table {padding_idx = 8 : i64} : (tensor<4xi64>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<2x3x4x4x4xf32>, %w: tensor<4x3x3x3x3xf32>) {
  // expected-error @+2 {{input must be [N, C, L] or [N, C, H, W], got 'tensor<2x3x4x4x4xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1, 1, 1>, pad_low = array<i64: 0, 0, 0>, pad_high = array<i64: 0, 0, 0>, dilation = array<i64: 1, 1, 1>, groups = 1 : i64} : (tensor<2x3x4x4x4xf32>, tensor<4x3x3x3x3xf32>) -> tensor<2x4x2x2x2xf32>
  return
}

// -----

func.func @conv_weight_rank(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+2 {{weight must have rank 4 like the input, got 'tensor<4x3x3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_element_types(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xbf16>) {
  // expected-error @+2 {{weight element type 'bf16' differs from the input's 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xbf16>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_geometry_length(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{stride must have 2 entries (one per spatial dim), got 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_stride_positive(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{stride entries must be positive, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1, 0>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_negative_padding(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{pad_high entries must be non-negative, got -1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: -1, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_groups_divide(%x: tensor<2x3x8x8xf32>, %w: tensor<4x1x3x3xf32>) {
  // expected-error @+2 {{groups 2 must divide the input channels 3 and the output channels 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x3x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_weight_channels(%x: tensor<2x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+2 {{weight has 4 input channels per group, the input 4 in 2 group(s)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_kernel_too_large(%x: tensor<2x3x4x4xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{spatial dim 1: the padded input (4) is smaller than the dilated kernel (5)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 2>, groups = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x2x1xf32>
  return
}

// -----

func.func @conv_bias_shape(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{bias must be a tensor of shape [4], got 'tensor<3xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.conv %x, %w, %b {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_transpose_shape(%x: tensor<2x4x4x4xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{input has type 'tensor<2x4x4x4xf32>' but convolving the result under this geometry (the spatial sizes must be (in - 1)·stride - pad_low - pad_high + dilation·(k - 1) + 1, plus at most stride - 1: PyTorch's output_padding) gives 'tensor<2x4x6x6xf32>'}}
  %0 = nn.conv_transpose %x, %w {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

// Stride 2 from 4 rows: 7 (output_padding 0) or 8 (1) rows, not 9.
func.func @conv_transpose_output_padding(%x: tensor<2x4x4x4xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{gives 'tensor<2x4x5x5xf32>'}}
  %0 = nn.conv_transpose %x, %w {stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x9x9xf32>
  return
}

// -----

func.func @conv_grad_weight_groups(%g: tensor<2x6x6x6xf32>, %x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{weight has 3 input channels per group, the input 3 in 3 group(s)}}
  %0 = nn.conv_grad_weight %g, %x {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 3 : i64} : (tensor<2x6x6x6xf32>, tensor<2x3x8x8xf32>) -> tensor<6x3x3x3xf32>
  return
}

// -----

func.func @max_pool_rank(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{input must be [N, C, L] or [N, C, H, W], got 'tensor<4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.max_pool %x {kernel = array<i64: 2>, stride = array<i64: 2>, padding = array<i64: 0>, dilation = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @max_pool_kernel_positive(%x: tensor<2x4x8x8xf32>) {
  // expected-error @+2 {{kernel entries must be positive, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.max_pool %x {kernel = array<i64: 0, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  return
}

// -----

func.func @max_pool_padding(%x: tensor<2x4x8x8xf32>) {
  // expected-error @+2 {{spatial dim 1: padding 2 exceeds half the dilated kernel (3)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.max_pool %x {kernel = array<i64: 3, 3>, stride = array<i64: 1, 1>, padding = array<i64: 1, 2>, dilation = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x8x10xf32>
  return
}

// -----

func.func @max_pool_grad_result(%g: tensor<2x4x4x4xf32>, %x: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{result type 'tensor<2x4x8x7xf32>' differs from the input's 'tensor<2x4x8x8xf32>'}}
  %0 = nn.max_pool_grad %g, %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x7xf32>
  return
}

// -----

func.func @max_pool_grad_shape(%g: tensor<2x4x3x3xf32>, %x: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{grad has type 'tensor<2x4x3x3xf32>' but the pooling produces 'tensor<2x4x4x4xf32>'}}
  %0 = nn.max_pool_grad %g, %x {kernel = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : (tensor<2x4x3x3xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// -----

func.func @topk_k_too_large(%x: tensor<16x4xf32>) {
  // expected-error @+2 {{k = 5 exceeds the last dimension 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %v, %i = nn.topk %x {k = 5 : i64} : (tensor<16x4xf32>) -> (tensor<16x5xf32>, tensor<16x5xi64>)
  return
}

// -----

func.func @topk_of_integers(%x: tensor<16x4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %v, %i = nn.topk %x {k = 2 : i64} : (tensor<16x4xi64>) -> (tensor<16x2xi64>, tensor<16x2xi64>)
  return
}

// -----

func.func @sort_of_a_scalar(%x: tensor<i64>) {
  // expected-error @+2 {{input must have rank >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %s, %p = nn.sort %x : (tensor<i64>) -> (tensor<i64>, tensor<i64>)
  return
}

// -----

func.func @histc_empty_range(%x: tensor<32xf32>) {
  // expected-error @+1 {{needs min < max, got [3.000000e+00, 3.000000e+00]}}
  %0 = nn.histc %x {bins = 4 : i64, min = 3.0, max = 3.0} : (tensor<32xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @floor_div_of_floats(%a: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = nn.floor_div %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @invert_permutation_2d(%p: tensor<4x8xi64>) {
  // expected-error @+1 {{input must be 1-D, got 'tensor<4x8xi64>'}}
  %0 = nn.invert_permutation %p : tensor<4x8xi64>
  return
}

// -----

func.func @grouped_matmul_groups(%x: tensor<32x8xf32>, %w: tensor<4x8x6xf32>, %offs: tensor<3xi32>) {
  // expected-error @+2 {{weight has 4 groups but offsets 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.grouped_matmul %x, %w, %offs : (tensor<32x8xf32>, tensor<4x8x6xf32>, tensor<3xi32>) -> tensor<32x6xf32>
  return
}

// -----

func.func @grouped_matmul_features(%x: tensor<32x7xf32>, %w: tensor<4x8x6xf32>, %offs: tensor<4xi32>) {
  // expected-error @+2 {{input rows have 7 features but the weights take 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.grouped_matmul %x, %w, %offs : (tensor<32x7xf32>, tensor<4x8x6xf32>, tensor<4xi32>) -> tensor<32x6xf32>
  return
}

// -----

func.func @grouped_matmul_weight_rank(%x: tensor<32x8xf32>, %w: tensor<8x6xf32>, %offs: tensor<4xi32>) {
  // expected-error @+2 {{weight must be 3-D [groups, K, N]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.grouped_matmul %x, %w, %offs : (tensor<32x8xf32>, tensor<8x6xf32>, tensor<4xi32>) -> tensor<32x6xf32>
  return
}

// -----

func.func @grouped_matmul_grad_weight_rows(%g: tensor<31x6xf32>, %x: tensor<32x8xf32>, %offs: tensor<4xi32>) {
  // expected-error @+2 {{grad must be 2-D with the input's 32 rows}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = nn.grouped_matmul_grad_weight %g, %x, %offs : (tensor<31x6xf32>, tensor<32x8xf32>, tensor<4xi32>) -> tensor<4x8x6xf32>
  return
}

// -----

func.func @id_range_of_floats(%x: tensor<8xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = nn.id_range %x {count = 10 : i64} : tensor<8xf32>
  return
}

// -----

func.func @id_range_without_ids(%x: tensor<8xi64>) {
  // expected-error @+1 {{attribute 'count' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = nn.id_range %x {count = 0 : i64} : tensor<8xi64>
  return
}

// -----

func.func @custom_vjp_arguments(%x: tensor<8xf32>) {
  // expected-error @+1 {{backward takes 0 arguments; expected 1 (the saved tensors, then one cotangent per output)}}
  %0 = nn.custom_vjp %x inputs(%x : tensor<8xf32>) : tensor<8xf32> {
    %z = arith.constant dense<0.0> : tensor<8xf32>
    nn.yield %z : tensor<8xf32>
  }
  return
}

// -----

func.func @custom_vjp_cotangent_shape(%x: tensor<8xf32>, %y: tensor<2x4xf32>) {
  // expected-error @+1 {{backward argument #0 is 'tensor<8xf32>' for 'tensor<2x4xf32>'}}
  %0 = nn.custom_vjp %y inputs(%x : tensor<8xf32>) : tensor<2x4xf32> {
  ^bb0(%dy: tensor<8xf32>):
    nn.yield %dy : tensor<8xf32>
  }
  return
}

// -----

func.func @custom_vjp_yield_count(%x: tensor<8xf32>) {
  %0 = nn.custom_vjp %x inputs(%x : tensor<8xf32>) : tensor<8xf32> {
  ^bb0(%dy: tensor<8xf32>):
    // expected-error @+1 {{yields 2 cotangents for 1 inputs}}
    nn.yield %dy, %dy : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

func.func @custom_vjp_draws(%x: tensor<8xf32>) {
  %0 = nn.custom_vjp %x inputs(%x : tensor<8xf32>) : tensor<8xf32> {
  ^bb0(%dy: tensor<8xf32>):
    // expected-error @+1 {{cannot be in nn.custom_vjp's backward: it holds nn and arith ops that draw no random numbers}}
    %d = nn.dropout %dy {p = 0.5 : f64, rng_id = 1 : i64} : tensor<8xf32>
    nn.yield %d : tensor<8xf32>
  }
  return
}

// -----

func.func @custom_vjp_reads_outside(%x: tensor<8xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = nn.custom_vjp %x inputs(%x : tensor<8xf32>) : tensor<8xf32> {
  ^bb0(%dy: tensor<8xf32>):
    // expected-error @+1 {{using value defined outside the region}}
    nn.yield %x : tensor<8xf32>
  }
  return
}

// -----

func.func @custom_vjp_integer_output(%ids: tensor<8xi64>, %x: tensor<8xf32>) {
  // expected-error @+1 {{operand #0 must be variadic of statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values}}
  %0 = nn.custom_vjp %ids inputs(%x : tensor<8xf32>) : tensor<8xi64> {
  ^bb0(%dy: tensor<8xi64>):
    %z = arith.constant dense<0.0> : tensor<8xf32>
    nn.yield %z : tensor<8xf32>
  }
  return
}
