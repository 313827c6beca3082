// Every nn op parses, verifies and prints back to the same text, in both the
// custom and the generic form.
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s --mlir-print-op-generic | fsdp-opt | FileCheck %s

// CHECK-LABEL: func @linear_algebra
func.func @linear_algebra(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>,
                          %q: tensor<2x4x16x8xbf16>, %k: tensor<2x4x16x8xbf16>, %m: tensor<8x3xbf16>) {
  // CHECK: nn.linear %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %0 = nn.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  // CHECK: nn.linear_gelu %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  %lg:2 = nn.linear_gelu %x, %w, %b : (tensor<2x4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>)
  // CHECK: nn.linear %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  %1 = nn.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
  // CHECK: nn.linear_gelu_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8x16xf32>, tensor<8x8xf32>, tensor<16x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
  %g = nn.reshape %1 : tensor<2x4x16xf32> to tensor<8x16xf32>
  %x2 = nn.reshape %x : tensor<2x4x8xf32> to tensor<8x8xf32>
  %lgg:3 = nn.linear_gelu_grad %g, %x2, %w, %x2 : (tensor<8x16xf32>, tensor<8x8xf32>, tensor<16x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<16x8xf32>, tensor<16xf32>)
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {transpose_rhs} : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) -> tensor<2x4x16x16xbf16>
  %2 = nn.matmul %q, %k {transpose_rhs} : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) -> tensor<2x4x16x16xbf16>
  // CHECK: nn.matmul %{{.*}}, %{{.*}} {transpose_lhs} : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) -> tensor<2x4x8x8xbf16>
  %3 = nn.matmul %q, %k {transpose_lhs} : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) -> tensor<2x4x8x8xbf16>
  // An unbatched rhs broadcasts over the batch dimensions.
  // CHECK: nn.matmul %{{.*}}, %{{.*}} : (tensor<2x4x16x8xbf16>, tensor<8x3xbf16>) -> tensor<2x4x16x3xbf16>
  %4 = nn.matmul %q, %m : (tensor<2x4x16x8xbf16>, tensor<8x3xbf16>) -> tensor<2x4x16x3xbf16>
  return
}

// CHECK-LABEL: func @elementwise
func.func @elementwise(%a: tensor<4x16x32xf16>, %b: tensor<16x32xf16>, %c: tensor<4x1x32xf16>) {
  // CHECK: nn.add %{{.*}}, %{{.*}} : (tensor<4x16x32xf16>, tensor<16x32xf16>) -> tensor<4x16x32xf16>
  %0 = nn.add %a, %b : (tensor<4x16x32xf16>, tensor<16x32xf16>) -> tensor<4x16x32xf16>
  // CHECK: nn.sub %{{.*}}, %{{.*}} : (tensor<4x1x32xf16>, tensor<16x32xf16>) -> tensor<4x16x32xf16>
  %1 = nn.sub %c, %b : (tensor<4x1x32xf16>, tensor<16x32xf16>) -> tensor<4x16x32xf16>
  // CHECK: nn.mul %{{.*}}, %{{.*}} : (tensor<4x16x32xf16>, tensor<4x16x32xf16>) -> tensor<4x16x32xf16>
  %2 = nn.mul %a, %a : (tensor<4x16x32xf16>, tensor<4x16x32xf16>) -> tensor<4x16x32xf16>
  // CHECK: nn.scale %{{.*}} {factor = 5.000000e-01 : f64} : tensor<4x16x32xf16>
  %3 = nn.scale %a {factor = 0.5 : f64} : tensor<4x16x32xf16>
  // CHECK: nn.relu %{{.*}} : tensor<4x16x32xf16>
  %4 = nn.relu %a : tensor<4x16x32xf16>
  // CHECK: nn.gelu %{{.*}} : tensor<4x16x32xf16>
  %5 = nn.gelu %a : tensor<4x16x32xf16>
  // CHECK: nn.gelu %{{.*}} {approximate = #nn.approximation<tanh>} : tensor<4x16x32xf16>
  %6 = nn.gelu %a {approximate = #nn.approximation<tanh>} : tensor<4x16x32xf16>
  // CHECK: nn.silu %{{.*}} : tensor<4x16x32xf16>
  %7 = nn.silu %a : tensor<4x16x32xf16>
  // CHECK: nn.dropout %{{.*}} {p = 1.000000e-01 : f64, rng_id = 3 : i64} : tensor<4x16x32xf16>
  %8 = nn.dropout %a {p = 0.1 : f64, rng_id = 3 : i64} : tensor<4x16x32xf16>
  return
}

// Random draws: a tensor of numbers from a distribution, no operands.
// CHECK-LABEL: func @random
func.func @random() {
  // CHECK: nn.random {a = 0.000000e+00 : f64, b = 1.000000e+00 : f64, distribution = #nn.distribution<normal>, rng_id = 2 : i64} : tensor<4x16xf32>
  %0 = nn.random {a = 0.0 : f64, b = 1.0 : f64, distribution = #nn.distribution<normal>, rng_id = 2 : i64} : tensor<4x16xf32>
  // CHECK: nn.random {a = -2.000000e+00 : f64, b = 3.000000e+00 : f64, distribution = #nn.distribution<uniform>, rng_id = 5 : i64} : tensor<8xbf16>
  %1 = nn.random {a = -2.0 : f64, b = 3.0 : f64, distribution = #nn.distribution<uniform>, rng_id = 5 : i64} : tensor<8xbf16>
  return
}

// RoBERTa's position ids: a float mask cast to i32, integer arithmetic with
// broadcasting, widened to i64; floats truncated to integers.
// CHECK-LABEL: func @integers
func.func @integers(%mask: tensor<2x16xf32>, %count: tensor<2x16xi32>, %one: tensor<i64>) {
  // CHECK: nn.cast %{{.*}} : tensor<2x16xf32> to tensor<2x16xi32>
  %m = nn.cast %mask : tensor<2x16xf32> to tensor<2x16xi32>
  // CHECK: nn.mul %{{.*}}, %{{.*}} : (tensor<2x16xi32>, tensor<2x16xi32>) -> tensor<2x16xi32>
  %p = nn.mul %count, %m : (tensor<2x16xi32>, tensor<2x16xi32>) -> tensor<2x16xi32>
  // CHECK: nn.cast %{{.*}} : tensor<2x16xi32> to tensor<2x16xi64>
  %l = nn.cast %p : tensor<2x16xi32> to tensor<2x16xi64>
  // CHECK: nn.add %{{.*}}, %{{.*}} : (tensor<2x16xi64>, tensor<i64>) -> tensor<2x16xi64>
  %ids = nn.add %l, %one : (tensor<2x16xi64>, tensor<i64>) -> tensor<2x16xi64>
  // CHECK: nn.sub %{{.*}}, %{{.*}} : (tensor<i64>, tensor<2x16xi64>) -> tensor<2x16xi64>
  %back = nn.sub %one, %ids : (tensor<i64>, tensor<2x16xi64>) -> tensor<2x16xi64>
  return
}

// CHECK-LABEL: func @pointwise_math
func.func @pointwise_math(%a: tensor<4x16x32xf32>, %b: tensor<16x1xf32>, %g: tensor<4x16x32xf32>) {
  // CHECK: nn.div %{{.*}}, %{{.*}} : (tensor<4x16x32xf32>, tensor<16x1xf32>) -> tensor<4x16x32xf32>
  %0 = nn.div %a, %b : (tensor<4x16x32xf32>, tensor<16x1xf32>) -> tensor<4x16x32xf32>
  // CHECK: nn.fmod %{{.*}}, %{{.*}} : (tensor<4x16x32xf32>, tensor<16x1xf32>) -> tensor<4x16x32xf32>
  %fmod = nn.fmod %a, %b : (tensor<4x16x32xf32>, tensor<16x1xf32>) -> tensor<4x16x32xf32>
  // CHECK: nn.tanh %{{.*}} : tensor<4x16x32xf32>
  %1 = nn.tanh %a : tensor<4x16x32xf32>
  // CHECK: nn.sigmoid %{{.*}} : tensor<4x16x32xf32>
  %2 = nn.sigmoid %a : tensor<4x16x32xf32>
  // CHECK: nn.exp %{{.*}} : tensor<4x16x32xf32>
  %3 = nn.exp %a : tensor<4x16x32xf32>
  // CHECK: nn.log %{{.*}} : tensor<4x16x32xf32>
  %4 = nn.log %a : tensor<4x16x32xf32>
  // CHECK: nn.sqrt %{{.*}} : tensor<4x16x32xf32>
  %5 = nn.sqrt %a : tensor<4x16x32xf32>
  // CHECK: nn.rsqrt %{{.*}} : tensor<4x16x32xf32>
  %6 = nn.rsqrt %a : tensor<4x16x32xf32>
  // CHECK: nn.abs %{{.*}} : tensor<4x16x32xf32>
  %7 = nn.abs %a : tensor<4x16x32xf32>
  // CHECK: nn.erf %{{.*}} : tensor<4x16x32xf32>
  %erf = nn.erf %a : tensor<4x16x32xf32>
  // CHECK: nn.sin %{{.*}} : tensor<4x16x32xf32>
  %sin = nn.sin %a : tensor<4x16x32xf32>
  // CHECK: nn.cos %{{.*}} : tensor<4x16x32xf32>
  %cos = nn.cos %a : tensor<4x16x32xf32>
  // CHECK: nn.acos %{{.*}} : tensor<4x16x32xf32>
  %acos = nn.acos %a : tensor<4x16x32xf32>
  // CHECK: nn.asin %{{.*}} : tensor<4x16x32xf32>
  %asin = nn.asin %a : tensor<4x16x32xf32>
  // CHECK: nn.atan %{{.*}} : tensor<4x16x32xf32>
  %atan = nn.atan %a : tensor<4x16x32xf32>
  // CHECK: nn.pow %{{.*}} {exponent = 2.000000e+00 : f64} : tensor<4x16x32xf32>
  %8 = nn.pow %a {exponent = 2.0 : f64} : tensor<4x16x32xf32>
  // CHECK: nn.clamp %{{.*}} {max = 6.000000e+00 : f64, min = 0.000000e+00 : f64} : tensor<4x16x32xf32>
  %9 = nn.clamp %a {min = 0.0 : f64, max = 6.0 : f64} : tensor<4x16x32xf32>
  // CHECK: nn.clamp %{{.*}} {max = 1.000000e+00 : f64} : tensor<4x16x32xf32>
  %10 = nn.clamp %a {max = 1.0 : f64} : tensor<4x16x32xf32>
  // CHECK: nn.unary_grad %{{.*}}, %{{.*}} {a = 2.000000e+00 : f64, fn = #nn.unary_fn<pow>} : tensor<4x16x32xf32>
  %11 = nn.unary_grad %g, %a {fn = #nn.unary_fn<pow>, a = 2.0 : f64} : tensor<4x16x32xf32>
  return
}

// CHECK-LABEL: func @windows
func.func @windows(%x: tensor<2x4x16x8xbf16>, %labels: tensor<2x16xi64>, %table: tensor<64x8xbf16>) {
  // CHECK: nn.embedding %{{.*}}, %{{.*}} {padding_idx = 0 : i64} : (tensor<2x16xi64>, tensor<64x8xbf16>) -> tensor<2x16x8xbf16>
  %e = nn.embedding %labels, %table {padding_idx = 0 : i64} : (tensor<2x16xi64>, tensor<64x8xbf16>) -> tensor<2x16x8xbf16>
  // CHECK: nn.slice %{{.*}} {dim = 3 : i64, end = 8 : i64, start = 4 : i64} : (tensor<2x4x16x8xbf16>) -> tensor<2x4x16x4xbf16>
  %0 = nn.slice %x {dim = 3 : i64, start = 4 : i64, end = 8 : i64} : (tensor<2x4x16x8xbf16>) -> tensor<2x4x16x4xbf16>
  // CHECK: nn.pad %{{.*}} {dim = 1 : i64, high = 1 : i64, low = 0 : i64, value = -1.000000e+02 : f64} : (tensor<2x16xi64>) -> tensor<2x17xi64>
  %1 = nn.pad %labels {dim = 1 : i64, low = 0 : i64, high = 1 : i64, value = -100.0 : f64} : (tensor<2x16xi64>) -> tensor<2x17xi64>
  // CHECK: nn.slice %{{.*}} {dim = 1 : i64, end = 17 : i64, start = 1 : i64} : (tensor<2x17xi64>) -> tensor<2x16xi64>
  %2 = nn.slice %1 {dim = 1 : i64, start = 1 : i64, end = 17 : i64} : (tensor<2x17xi64>) -> tensor<2x16xi64>
  // GPT-J's x[..., 1::2], and its gradient scattered back.
  // CHECK: nn.slice %{{.*}} {dim = 3 : i64, end = 8 : i64, start = 1 : i64, step = 2 : i64} : (tensor<2x4x16x8xbf16>) -> tensor<2x4x16x4xbf16>
  %3 = nn.slice %x {dim = 3 : i64, start = 1 : i64, end = 8 : i64, step = 2 : i64} : (tensor<2x4x16x8xbf16>) -> tensor<2x4x16x4xbf16>
  // CHECK: nn.slice_grad %{{.*}} {dim = 3 : i64, start = 1 : i64, step = 2 : i64} : (tensor<2x4x16x4xbf16>) -> tensor<2x4x16x8xbf16>
  %4 = nn.slice_grad %3 {dim = 3 : i64, start = 1 : i64, step = 2 : i64} : (tensor<2x4x16x4xbf16>) -> tensor<2x4x16x8xbf16>
  // A step past the end keeps one element: x[:, 3::9] of 8.
  // CHECK: nn.slice %{{.*}} {dim = 1 : i64, end = 16 : i64, start = 3 : i64, step = 9 : i64} : (tensor<2x16xi64>) -> tensor<2x2xi64>
  %5 = nn.slice %labels {dim = 1 : i64, start = 3 : i64, end = 16 : i64, step = 9 : i64} : (tensor<2x16xi64>) -> tensor<2x2xi64>
  // Running sums of ids (no gradient) and of floats, from the end.
  // CHECK: nn.cumsum %{{.*}} {dim = 1 : i64} : tensor<2x16xi64>
  %6 = nn.cumsum %labels {dim = 1 : i64} : tensor<2x16xi64>
  // CHECK: nn.cumsum %{{.*}} {dim = -1 : i64, reverse} : tensor<2x4x16x8xbf16>
  %7 = nn.cumsum %x {dim = -1 : i64, reverse} : tensor<2x4x16x8xbf16>
  return
}

// CHECK-LABEL: func @normalization
func.func @normalization(%x: tensor<4x16x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>,
                         %img: tensor<8x4x5x5xf32>, %c: tensor<4xf32>) {
  // CHECK: nn.layer_norm %{{.*}} weight %{{.*}} bias %{{.*}} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  %0 = nn.layer_norm %x weight %g bias %b : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  // CHECK: nn.layer_norm %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  %1 = nn.layer_norm %x {epsilon = 1.0e-6 : f64} : (tensor<4x16x32xf32>) -> tensor<4x16x32xf32>
  // CHECK: nn.layer_norm %{{.*}} bias %{{.*}} : (tensor<4x16x32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  %2 = nn.layer_norm %x bias %b : (tensor<4x16x32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  // CHECK: nn.add_layer_norm %{{.*}}, %{{.*}} weight %{{.*}} bias %{{.*}} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x16x32xf32>, tensor<4x16x32xf32>)
  %s:2 = nn.add_layer_norm %x, %2 weight %g bias %b : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x16x32xf32>, tensor<4x16x32xf32>)
  // CHECK: nn.add_layer_norm %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> (tensor<4x16x32xf32>, tensor<4x16x32xf32>)
  %t:2 = nn.add_layer_norm %x, %2 {epsilon = 1.0e-6 : f64} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> (tensor<4x16x32xf32>, tensor<4x16x32xf32>)
  // CHECK: nn.add_layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} weight %{{.*}} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<32xf32>) -> (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>)
  %u:3 = nn.add_layer_norm_grad %2, %x, %0 weight %g : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<32xf32>) -> (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>)
  // CHECK: nn.add_layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 9.9999999999999995E-7 : f64} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>)
  %v:3 = nn.add_layer_norm_grad %2, %x, %0 {epsilon = 1.0e-6 : f64} : (tensor<4x16x32xf32>, tensor<4x16x32xf32>, tensor<4x16x32xf32>) -> (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>)
  // CHECK: nn.rms_norm %{{.*}} weight %{{.*}} : (tensor<4x16x32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  %3 = nn.rms_norm %x weight %g : (tensor<4x16x32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  // CHECK: nn.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {training} : (tensor<8x4x5x5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4x5x5xf32>, tensor<4xf32>, tensor<4xf32>)
  %4:3 = nn.batch_norm %img, %c, %c, %c, %c {training} : (tensor<8x4x5x5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4x5x5xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: nn.batch_norm %{{.*}} {momentum = 2.000000e-01 : f64} : (tensor<8x4x5x5xf32>
  %5:3 = nn.batch_norm %img, %c, %c, %c, %c {momentum = 0.2 : f64} : (tensor<8x4x5x5xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4x5x5xf32>, tensor<4xf32>, tensor<4xf32>)
  // CHECK: nn.softmax %{{.*}} : tensor<4x16x32xf32>
  %6 = nn.softmax %x : tensor<4x16x32xf32>
  // CHECK: nn.softmax %{{.*}} {dim = 1 : i64} : tensor<4x16x32xf32>
  %7 = nn.softmax %x {dim = 1 : i64} : tensor<4x16x32xf32>
  return
}

// CHECK-LABEL: func @transformer
func.func @transformer(%ids: tensor<2x16xi32>, %table: tensor<64x32xbf16>, %q: tensor<2x16x32xbf16>,
                       %kv: tensor<2x10x32xbf16>, %gkv: tensor<2x16x16xbf16>,
                       %packed: tensor<2x16x64xbf16>) {
  // CHECK: nn.embedding %{{.*}}, %{{.*}} : (tensor<2x16xi32>, tensor<64x32xbf16>) -> tensor<2x16x32xbf16>
  %0 = nn.embedding %ids, %table : (tensor<2x16xi32>, tensor<64x32xbf16>) -> tensor<2x16x32xbf16>
  // Self-attention with a causal mask.
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, num_heads = 4 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>) -> tensor<2x16x32xbf16>
  %1 = nn.attention %q, %q, %q {causal, num_heads = 4 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>) -> tensor<2x16x32xbf16>
  // Cross-attention to another sequence length, with an explicit scale.
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {num_heads = 8 : i64, scale = 2.500000e-01 : f64} : (tensor<2x16x32xbf16>, tensor<2x10x32xbf16>, tensor<2x10x32xbf16>) -> tensor<2x16x32xbf16>
  %2 = nn.attention %q, %kv, %kv {num_heads = 8 : i64, scale = 0.25 : f64} : (tensor<2x16x32xbf16>, tensor<2x10x32xbf16>, tensor<2x10x32xbf16>) -> tensor<2x16x32xbf16>
  // q, k, v as the slices of one packed projection, and its gradient.
  // CHECK: nn.packed_attention %{{.*}} {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x64xbf16>) -> tensor<2x16x32xbf16>
  %po = nn.packed_attention %packed {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x64xbf16>) -> tensor<2x16x32xbf16>
  // CHECK: nn.packed_attention_grad %{{.*}}, %{{.*}} {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  %pg = nn.packed_attention_grad %po, %packed {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x64xbf16>) -> tensor<2x16x64xbf16>
  // The forward keeping its softmax statistics (f32 [B, H, T]) for the
  // backward, which reads them with its result.
  // CHECK: %[[KO:.*]], %[[KS:.*]] = nn.packed_attention %{{.*}} {causal, keep_stats, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x64xbf16>) -> (tensor<2x16x32xbf16>, tensor<2x4x16xf32>)
  %ko, %ks = nn.packed_attention %packed {causal, keep_stats, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x64xbf16>) -> (tensor<2x16x32xbf16>, tensor<2x4x16xf32>)
  // CHECK: nn.packed_attention_grad %{{.*}}, %{{.*}} saved %[[KO]], %[[KS]] {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x64xbf16>, tensor<2x16x32xbf16>, tensor<2x4x16xf32>) -> tensor<2x16x64xbf16>
  %kg = nn.packed_attention_grad %ko, %packed saved %ko, %ks {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x64xbf16>, tensor<2x16x32xbf16>, tensor<2x4x16xf32>) -> tensor<2x16x64xbf16>
  // nn.attention likewise, its backward's saved operands after a bias.
  // CHECK: %[[AO:.*]], %[[AS:.*]] = nn.attention %{{.*}}, %{{.*}}, %{{.*}} {keep_stats, num_heads = 4 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>) -> (tensor<2x16x32xbf16>, tensor<2x4x16xf32>)
  %ao, %as = nn.attention %q, %q, %q {keep_stats, num_heads = 4 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>) -> (tensor<2x16x32xbf16>, tensor<2x4x16xf32>)
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} saved %[[AO]], %[[AS]] {num_heads = 4 : i64}
  %ag:3 = nn.attention_grad %ao, %q, %q, %q saved %ao, %as {num_heads = 4 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x4x16xf32>) -> (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x16x32xbf16>)
  // Grouped-query attention: 4 query heads share 2 key/value heads of dim 8.
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64}
  %3 = nn.attention %q, %gkv, %gkv {causal, num_heads = 4 : i64, num_kv_heads = 2 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x16xbf16>, tensor<2x16x16xbf16>) -> tensor<2x16x32xbf16>
  // An additive bias per batch element, broadcast over the heads (a
  // padding mask), and its gradient.
  // CHECK: nn.attention %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} {num_heads = 4 : i64} : (tensor<2x16x32xbf16>, tensor<2x10x32xbf16>, tensor<2x10x32xbf16>, tensor<2x1x16x10xbf16>) -> tensor<2x16x32xbf16>
  %b = arith.constant dense<0.0> : tensor<2x1x16x10xbf16>
  %6 = nn.attention %q, %kv, %kv bias %b {num_heads = 4 : i64} : (tensor<2x16x32xbf16>, tensor<2x10x32xbf16>, tensor<2x10x32xbf16>, tensor<2x1x16x10xbf16>) -> tensor<2x16x32xbf16>
  // CHECK: nn.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} bias %{{.*}} {num_heads = 4 : i64} : ({{.*}}) -> (tensor<2x16x32xbf16>, tensor<2x10x32xbf16>, tensor<2x10x32xbf16>, tensor<2x1x16x10xbf16>)
  %7:4 = nn.attention_grad %6, %q, %kv, %kv bias %b {num_heads = 4 : i64} : (tensor<2x16x32xbf16>, tensor<2x16x32xbf16>, tensor<2x10x32xbf16>, tensor<2x10x32xbf16>, tensor<2x1x16x10xbf16>) -> (tensor<2x16x32xbf16>, tensor<2x10x32xbf16>, tensor<2x10x32xbf16>, tensor<2x1x16x10xbf16>)
  // CHECK: nn.rope %{{.*}} {num_heads = 4 : i64} : tensor<2x16x32xbf16>
  %4 = nn.rope %q {num_heads = 4 : i64} : tensor<2x16x32xbf16>
  // CHECK: nn.rope %{{.*}} {num_heads = 2 : i64, theta = 5.000000e+05 : f64} : tensor<2x16x32xbf16>
  %5 = nn.rope %q {num_heads = 2 : i64, theta = 500000.0 : f64} : tensor<2x16x32xbf16>
  return
}

// CHECK-LABEL: func @shapes
func.func @shapes(%x: tensor<2x3x4xf32>, %y: tensor<2x5x4xf32>, %i: tensor<2x3xi64>) {
  // CHECK: nn.cast %{{.*}} : tensor<2x3x4xf32> to tensor<2x3x4xbf16>
  %0 = nn.cast %x : tensor<2x3x4xf32> to tensor<2x3x4xbf16>
  // CHECK: nn.cast %{{.*}} : tensor<2x3xi64> to tensor<2x3xf32>
  %1 = nn.cast %i : tensor<2x3xi64> to tensor<2x3xf32>
  // CHECK: nn.reshape %{{.*}} : tensor<2x3x4xf32> to tensor<6x4xf32>
  %2 = nn.reshape %x : tensor<2x3x4xf32> to tensor<6x4xf32>
  // CHECK: nn.reshape %{{.*}} : tensor<2x3xi64> to tensor<6xi64>
  %3 = nn.reshape %i : tensor<2x3xi64> to tensor<6xi64>
  // CHECK: nn.transpose %{{.*}} {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %4 = nn.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  // CHECK: nn.split %{{.*}} {dim = -1 : i64, sizes = array<i64: 1, 3>} : (tensor<2x3x4xf32>) -> (tensor<2x3x1xf32>, tensor<2x3x3xf32>)
  %5:2 = nn.split %x {dim = -1 : i64, sizes = array<i64: 1, 3>} : (tensor<2x3x4xf32>) -> (tensor<2x3x1xf32>, tensor<2x3x3xf32>)
  // CHECK: nn.concat %{{.*}}, %{{.*}} {dim = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  %6 = nn.concat %x, %y {dim = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  // CHECK: nn.reduce_sum %{{.*}} {dims = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  %7 = nn.reduce_sum %x {dims = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  // CHECK: nn.reduce_sum %{{.*}} {dims = array<i64: -1>, keepdim} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  %8 = nn.reduce_sum %x {dims = array<i64: -1>, keepdim} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
  // CHECK: nn.reduce_mean %{{.*}} {dims = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %9 = nn.reduce_mean %x {dims = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  return
}

// CHECK-LABEL: func @losses
func.func @losses(%logits: tensor<6x23xf32>, %targets: tensor<6xi64>, %seq: tensor<2x3x23xf32>,
                  %seq_targets: tensor<2x3xi32>, %y: tensor<4x8xf32>) {
  // CHECK: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<6x23xf32>, tensor<6xi64>) -> tensor<f32>
  %0 = nn.cross_entropy %logits, %targets : (tensor<6x23xf32>, tensor<6xi64>) -> tensor<f32>
  // CHECK: nn.cross_entropy %{{.*}}, %{{.*}} {ignore_index = 0 : i64, reduction = #nn.reduction<sum>} : (tensor<2x3x23xf32>, tensor<2x3xi32>) -> tensor<f32>
  %1 = nn.cross_entropy %seq, %seq_targets {reduction = #nn.reduction<sum>, ignore_index = 0 : i64} : (tensor<2x3x23xf32>, tensor<2x3xi32>) -> tensor<f32>
  // CHECK: nn.mse_loss %{{.*}}, %{{.*}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  %2 = nn.mse_loss %y, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  // CHECK: nn.mse_loss %{{.*}}, %{{.*}} {reduction = #nn.reduction<sum>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  %3 = nn.mse_loss %y, %y {reduction = #nn.reduction<sum>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  // CHECK: nn.cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}} {reduction = #nn.reduction<sum>} : (tensor<6x23xf32>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x23xf32>)
  %4:2 = nn.cross_entropy_with_grad %logits, %targets, %0 {reduction = #nn.reduction<sum>} : (tensor<6x23xf32>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x23xf32>)
  // CHECK: nn.cross_entropy_with_grad %{{.*}}, %{{.*}}, %{{.*}} {num_classes = 20 : i64} : (tensor<6x23xf32>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x23xf32>)
  %5:2 = nn.cross_entropy_with_grad %logits, %targets, %0 {num_classes = 20 : i64} : (tensor<6x23xf32>, tensor<6xi64>, tensor<f32>) -> (tensor<f32>, tensor<6x23xf32>)
  return
}

// CHECK-LABEL: func @convolution
func.func @convolution(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>,
                       %dw: tensor<3x1x7x7xbf16>, %xd: tensor<2x3x8x8xbf16>,
                       %s: tensor<2x3x9xf32>, %ws: tensor<6x1x4xf32>, %g: tensor<2x4x4x4xf32>) {
  // CHECK: nn.conv %{{.*}}, %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 1 : i64, pad_high = array<i64: 1, 1>, pad_low = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  %0 = nn.conv %x, %w, %b {stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
  // Depthwise (groups = channels), no bias.
  // CHECK: nn.conv %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 3 : i64, {{.*}}} : (tensor<2x3x8x8xbf16>, tensor<3x1x7x7xbf16>) -> tensor<2x3x8x8xbf16>
  %1 = nn.conv %xd, %dw {stride = array<i64: 1, 1>, pad_low = array<i64: 3, 3>, pad_high = array<i64: 3, 3>, dilation = array<i64: 1, 1>, groups = 3 : i64} : (tensor<2x3x8x8xbf16>, tensor<3x1x7x7xbf16>) -> tensor<2x3x8x8xbf16>
  // 1-D, padding='same' of an even dilated kernel: 3 before, 3 after.
  // CHECK: nn.conv %{{.*}}, %{{.*}} {dilation = array<i64: 2>, groups = 3 : i64, pad_high = array<i64: 3>, pad_low = array<i64: 3>, stride = array<i64: 1>} : (tensor<2x3x9xf32>, tensor<6x1x4xf32>) -> tensor<2x6x9xf32>
  %2 = nn.conv %s, %ws {stride = array<i64: 1>, pad_low = array<i64: 3>, pad_high = array<i64: 3>, dilation = array<i64: 2>, groups = 3 : i64} : (tensor<2x3x9xf32>, tensor<6x1x4xf32>) -> tensor<2x6x9xf32>
  // CHECK: nn.conv_transpose %{{.*}}, %{{.*}} {{{.*}}} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  %3 = nn.conv_transpose %g, %w {stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: nn.conv_grad_weight %{{.*}}, %{{.*}} {{{.*}}} : (tensor<2x4x4x4xf32>, tensor<2x3x8x8xf32>) -> tensor<4x3x3x3xf32>
  %4 = nn.conv_grad_weight %g, %x {stride = array<i64: 2, 2>, pad_low = array<i64: 1, 1>, pad_high = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x4x4x4xf32>, tensor<2x3x8x8xf32>) -> tensor<4x3x3x3xf32>
  return
}

// CHECK-LABEL: func @pooling
func.func @pooling(%x: tensor<2x4x8x8xf32>, %g: tensor<2x4x4x4xf32>, %s: tensor<2x3x9xbf16>) {
  // CHECK: nn.max_pool %{{.*}} {dilation = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  %0 = nn.max_pool %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
  // CHECK: nn.max_pool %{{.*}} {dilation = array<i64: 2>, kernel = array<i64: 2>, padding = array<i64: 1>, stride = array<i64: 2>} : (tensor<2x3x9xbf16>) -> tensor<2x3x5xbf16>
  %1 = nn.max_pool %s {kernel = array<i64: 2>, stride = array<i64: 2>, padding = array<i64: 1>, dilation = array<i64: 2>} : (tensor<2x3x9xbf16>) -> tensor<2x3x5xbf16>
  // CHECK: nn.max_pool_grad %{{.*}}, %{{.*}} {{{.*}}} : (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %2 = nn.max_pool_grad %g, %x {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<2x4x4x4xf32>, tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  return
}

// CHECK-LABEL: func @routing
func.func @routing(%scores: tensor<16x4xf32>, %ids: tensor<32xi64>, %idsf: tensor<32xf32>,
                   %x: tensor<32x8xbf16>, %w: tensor<4x8x6xbf16>, %offs: tensor<4xi32>,
                   %g: tensor<32x6xbf16>, %k: tensor<i64>) {
  // CHECK: nn.topk %{{.*}} {k = 2 : i64} : (tensor<16x4xf32>) -> (tensor<16x2xf32>, tensor<16x2xi64>)
  %v, %i = nn.topk %scores {k = 2 : i64} : (tensor<16x4xf32>) -> (tensor<16x2xf32>, tensor<16x2xi64>)
  // CHECK: nn.sort %{{.*}} : (tensor<32xi64>) -> (tensor<32xi64>, tensor<32xi64>)
  %s, %perm = nn.sort %ids : (tensor<32xi64>) -> (tensor<32xi64>, tensor<32xi64>)
  // CHECK: nn.histc %{{.*}} {bins = 4 : i64, max = 3.000000e+00 : f64, min = 0.000000e+00 : f64} : (tensor<32xf32>) -> tensor<4xf32>
  %counts = nn.histc %idsf {bins = 4 : i64, min = 0.0, max = 3.0} : (tensor<32xf32>) -> tensor<4xf32>
  // CHECK: nn.floor_div %{{.*}}, %{{.*}} : (tensor<32xi64>, tensor<i64>) -> tensor<32xi64>
  %tok = nn.floor_div %perm, %k : (tensor<32xi64>, tensor<i64>) -> tensor<32xi64>
  // CHECK: nn.invert_permutation %{{.*}} : tensor<32xi64>
  %inv = nn.invert_permutation %perm : tensor<32xi64>
  // CHECK: nn.grouped_matmul %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32x8xbf16>, tensor<4x8x6xbf16>, tensor<4xi32>) -> tensor<32x6xbf16>
  %y = nn.grouped_matmul %x, %w, %offs : (tensor<32x8xbf16>, tensor<4x8x6xbf16>, tensor<4xi32>) -> tensor<32x6xbf16>
  // CHECK: nn.grouped_matmul_grad_weight %{{.*}}, %{{.*}}, %{{.*}} : (tensor<32x6xbf16>, tensor<32x8xbf16>, tensor<4xi32>) -> tensor<4x8x6xbf16>
  %gw = nn.grouped_matmul_grad_weight %g, %x, %offs : (tensor<32x6xbf16>, tensor<32x8xbf16>, tensor<4xi32>) -> tensor<4x8x6xbf16>
  return
}

// Class labels with their range (and an ignored value): the same value.
// CHECK-LABEL: func @id_range
func.func @id_range(%labels: tensor<8xi64>, %ids: tensor<2x4xi32>) -> (tensor<8xi64>, tensor<2x4xi32>) {
  // CHECK: nn.id_range %{{.*}} {count = 10 : i64, ignore = -100 : i64} : tensor<8xi64>
  %y = nn.id_range %labels {count = 10 : i64, ignore = -100 : i64} : tensor<8xi64>
  // CHECK: nn.id_range %{{.*}} {count = 3 : i64} : tensor<2x4xi32>
  %z = nn.id_range %ids {count = 3 : i64} : tensor<2x4xi32>
  return %y, %z : tensor<8xi64>, tensor<2x4xi32>
}

// detach(): the same value and type.
// CHECK-LABEL: func @stop_gradient
func.func @stop_gradient(%x: tensor<4x16xbf16>) -> tensor<4x16xbf16> {
  // CHECK: nn.stop_gradient %{{.*}} : tensor<4x16xbf16>
  %y = nn.stop_gradient %x : tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}

// A hand-written backward: the saved tensors and the outputs' cotangents
// in, the inputs' cotangents out.
// CHECK-LABEL: func @custom_vjp
func.func @custom_vjp(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK: nn.custom_vjp %{{.*}} inputs(%{{.*}} : tensor<4x8xf32>) saved(%{{.*}} : tensor<4x8xf32>) : tensor<4x8xf32> {
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<4x8xf32>, %{{.*}}: tensor<4x8xf32>):
  // CHECK-NEXT: nn.mul
  // CHECK-NEXT: nn.yield %{{.*}} : tensor<4x8xf32>
  %r = nn.custom_vjp %y inputs(%x : tensor<4x8xf32>) saved(%s : tensor<4x8xf32>) : tensor<4x8xf32> {
  ^bb0(%saved: tensor<4x8xf32>, %dy: tensor<4x8xf32>):
    %dx = nn.mul %dy, %saved : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    nn.yield %dx : tensor<4x8xf32>
  }
  // CHECK: nn.custom_vjp %{{.*}} : tensor<4x8xf32> {
  // CHECK-NEXT: ^bb0(%{{.*}}: tensor<4x8xf32>):
  // CHECK-NEXT: nn.yield
  %c = nn.custom_vjp %r : tensor<4x8xf32> {
  ^bb0(%dy: tensor<4x8xf32>):
    nn.yield
  }
  return %c : tensor<4x8xf32>
}
