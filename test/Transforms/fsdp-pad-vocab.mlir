// fsdp-pad-vocab pads a head whose logits reach a cross-entropy to the next
// multiple of `multiple` classes: the weight (and bias) zero-padded by
// nn.pad, the logits and their reshapes / casts / slices of other
// dimensions that wide, the losses told num_classes; other uses of the
// logits (a returned output) read them sliced back. Heads already aligned,
// smaller than min-classes or without a loss are left alone.
// RUN: fsdp-opt %s -split-input-file --fsdp-pad-vocab="multiple=8 min-classes=64" | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-pad-vocab | FileCheck %s --check-prefix=DEFAULT
// RUN: not fsdp-opt %s -split-input-file --fsdp-pad-vocab="multiple=0" 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: fsdp-pad-vocab: multiple and min-classes must be positive, got 0 and 4096

// The tied head: the embedding keeps the table, the head reads it padded.
// CHECK-LABEL: fsdp.model @lm
// CHECK: %[[W:.*]] = fsdp.get_param @wte : tensor<100x8xf32>
// CHECK: nn.embedding %{{.*}}, %[[W]]
// CHECK: %[[WP:.*]] = nn.pad %[[W]] {dim = 0 : i64, high = 4 : i64, low = 0 : i64} : (tensor<100x8xf32>) -> tensor<104x8xf32>
// CHECK: %[[L:.*]] = nn.linear %{{.*}}, %[[WP]] : (tensor<2x4x8xf32>, tensor<104x8xf32>) -> tensor<2x4x104xf32>
// CHECK: %[[S:.*]] = nn.slice %[[L]] {dim = 0 : i64, end = 1 : i64, start = 0 : i64} : (tensor<2x4x104xf32>) -> tensor<1x4x104xf32>
// CHECK: %[[F:.*]] = nn.reshape %[[S]] : tensor<1x4x104xf32> to tensor<4x104xf32>
// CHECK: %[[C:.*]] = nn.cast %[[F]] : tensor<4x104xf32> to tensor<4x104xbf16>
// CHECK: nn.cross_entropy %[[C]], %{{.*}} {num_classes = 100 : i64} : (tensor<4x104xbf16>, tensor<4xi64>) -> tensor<bf16>
// CHECK: %[[BACK:.*]] = nn.slice %[[L]] {dim = 2 : i64, end = 100 : i64, start = 0 : i64} : (tensor<2x4x104xf32>) -> tensor<2x4x100xf32>
// CHECK: fsdp.return {names = ["loss", "logits"]} %{{.*}}, %[[BACK]]
// DEFAULT-LABEL: fsdp.model @lm
// DEFAULT-NOT: nn.pad
// DEFAULT: nn.cross_entropy %{{.*}} : (tensor<4x100xbf16>
fsdp.model @lm {
  fsdp.module @root kind "LM" unit {
    fsdp.param @wte : tensor<100x8xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%ids: tensor<2x4xi64>, %t: tensor<4xi64>) -> (tensor<bf16>, tensor<2x4x100xf32>) {
      %w = fsdp.get_param @wte : tensor<100x8xf32>
      %x = nn.embedding %ids, %w : (tensor<2x4xi64>, tensor<100x8xf32>) -> tensor<2x4x8xf32>
      %logits = nn.linear %x, %w : (tensor<2x4x8xf32>, tensor<100x8xf32>) -> tensor<2x4x100xf32>
      %first = nn.slice %logits {dim = 0 : i64, start = 0 : i64, end = 1 : i64} : (tensor<2x4x100xf32>) -> tensor<1x4x100xf32>
      %flat = nn.reshape %first : tensor<1x4x100xf32> to tensor<4x100xf32>
      %half = nn.cast %flat : tensor<4x100xf32> to tensor<4x100xbf16>
      %loss = nn.cross_entropy %half, %t : (tensor<4x100xbf16>, tensor<4xi64>) -> tensor<bf16>
      fsdp.return {names = ["loss", "logits"]} %loss, %logits : tensor<bf16>, tensor<2x4x100xf32>
    }
  }
}

// -----

// A head with a bias, in a child module's forward; a matmul by [in,
// classes] pads the weight's columns.
// CHECK-LABEL: fsdp.model @heads
// CHECK: %[[BP:.*]] = nn.pad %{{.*}} {dim = 0 : i64, high = 6 : i64, low = 0 : i64} : (tensor<66xf32>) -> tensor<72xf32>
// CHECK: nn.linear %{{.*}}, %{{.*}}, %[[BP]] : (tensor<4x8xf32>, tensor<72x8xf32>, tensor<72xf32>) -> tensor<4x72xf32>
// CHECK: %[[MP:.*]] = nn.pad %{{.*}} {dim = 1 : i64, high = 6 : i64, low = 0 : i64} : (tensor<8x66xf32>) -> tensor<8x72xf32>
// CHECK: %[[M:.*]] = nn.matmul %{{.*}}, %[[MP]] : (tensor<4x8xf32>, tensor<8x72xf32>) -> tensor<4x72xf32>
// CHECK: nn.cross_entropy %[[M]], %{{.*}} {num_classes = 66 : i64, reduction = #nn.reduction<sum>}
fsdp.model @heads {
  fsdp.module @root kind "Heads" unit {
    fsdp.module @head kind "Linear" {
      fsdp.param @weight : tensor<66x8xf32> init <normal(0.0, 0.02)>
      fsdp.param @bias : tensor<66xf32> init <zeros>
      fsdp.param @proj : tensor<8x66xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> tensor<f32> {
        %w = fsdp.get_param @weight : tensor<66x8xf32>
        %b = fsdp.get_param @bias : tensor<66xf32>
        %l = nn.linear %x, %w, %b : (tensor<4x8xf32>, tensor<66x8xf32>, tensor<66xf32>) -> tensor<4x66xf32>
        %a = nn.cross_entropy %l, %t : (tensor<4x66xf32>, tensor<4xi64>) -> tensor<f32>
        %p = fsdp.get_param @proj : tensor<8x66xf32>
        %m = nn.matmul %x, %p : (tensor<4x8xf32>, tensor<8x66xf32>) -> tensor<4x66xf32>
        %c = nn.cross_entropy %m, %t {reduction = #nn.reduction<sum>} : (tensor<4x66xf32>, tensor<4xi64>) -> tensor<f32>
        %loss = nn.add %a, %c : (tensor<f32>, tensor<f32>) -> tensor<f32>
        fsdp.return %loss : tensor<f32>
      }
    }
    fsdp.forward (%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> tensor<f32> {
      %loss = fsdp.call @head(%x, %t) : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// -----

// Hugging Face's head: a child module (kind Linear) returns the logits; its
// forward's result and the call's are padded, the caller upcasts them for
// its loss and returns them sliced back.
// CHECK-LABEL: fsdp.model @hf
// CHECK: fsdp.module @lm_head kind "Linear" {
// CHECK: fsdp.forward (%{{.*}}: tensor<4x8xf32>) -> tensor<4x104xbf16> {
// CHECK: nn.pad %{{.*}} : (tensor<100x8xbf16>) -> tensor<104x8xbf16>
// CHECK: fsdp.return %{{.*}} : tensor<4x104xbf16>
// CHECK: %[[L:.*]] = fsdp.call @lm_head(%{{.*}}) : (tensor<4x8xf32>) -> tensor<4x104xbf16>
// CHECK: %[[F:.*]] = nn.cast %[[L]] : tensor<4x104xbf16> to tensor<4x104xf32>
// CHECK: nn.cross_entropy %[[F]], %{{.*}} {num_classes = 100 : i64}
// CHECK: %[[BACK:.*]] = nn.slice %[[L]] {dim = 1 : i64, end = 100 : i64, start = 0 : i64} : (tensor<4x104xbf16>) -> tensor<4x100xbf16>
// CHECK: fsdp.return {names = ["loss", "logits"]} %{{.*}}, %[[BACK]]
fsdp.model @hf {
  fsdp.module @root kind "GPT2LMHeadModel" unit {
    fsdp.module @lm_head kind "Linear" {
      fsdp.param @weight : tensor<100x8xbf16> init <normal(0.0, 0.02)>
      fsdp.forward (%x: tensor<4x8xf32>) -> tensor<4x100xbf16> {
        %w = fsdp.get_param @weight : tensor<100x8xbf16>
        %x16 = nn.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
        %l = nn.linear %x16, %w : (tensor<4x8xbf16>, tensor<100x8xbf16>) -> tensor<4x100xbf16>
        fsdp.return %l : tensor<4x100xbf16>
      }
    }
    fsdp.forward (%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x100xbf16>) {
      %logits = fsdp.call @lm_head(%x) : (tensor<4x8xf32>) -> tensor<4x100xbf16>
      %f = nn.cast %logits : tensor<4x100xbf16> to tensor<4x100xf32>
      %loss = nn.cross_entropy %f, %t : (tensor<4x100xf32>, tensor<4xi64>) -> tensor<f32>
      fsdp.return {names = ["loss", "logits"]} %loss, %logits : tensor<f32>, tensor<4x100xbf16>
    }
  }
}

// -----

// Left alone: an aligned vocabulary, logits that reach no loss (softmax),
// logits whose class dimension a reshape merges away, and a head under
// min-classes.
// CHECK-LABEL: fsdp.model @alone
// CHECK-NOT: nn.pad
// CHECK-NOT: num_classes
fsdp.model @alone {
  fsdp.module @root kind "Alone" unit {
    fsdp.param @aligned : tensor<96x8xf32> init <normal(0.0, 0.02)>
    fsdp.param @odd : tensor<65x8xf32> init <normal(0.0, 0.02)>
    fsdp.param @small : tensor<63x8xf32> init <normal(0.0, 0.02)>
    fsdp.forward (%x: tensor<4x8xf32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x65xf32>, tensor<260xf32>) {
      %a = fsdp.get_param @aligned : tensor<96x8xf32>
      %la = nn.linear %x, %a : (tensor<4x8xf32>, tensor<96x8xf32>) -> tensor<4x96xf32>
      %ca = nn.cross_entropy %la, %t : (tensor<4x96xf32>, tensor<4xi64>) -> tensor<f32>
      %o = fsdp.get_param @odd : tensor<65x8xf32>
      %lo = nn.linear %x, %o : (tensor<4x8xf32>, tensor<65x8xf32>) -> tensor<4x65xf32>
      %p = nn.softmax %lo {dim = 1 : i64} : tensor<4x65xf32>
      %flat = nn.reshape %lo : tensor<4x65xf32> to tensor<260xf32>
      %s = fsdp.get_param @small : tensor<63x8xf32>
      %ls = nn.linear %x, %s : (tensor<4x8xf32>, tensor<63x8xf32>) -> tensor<4x63xf32>
      %cs = nn.cross_entropy %ls, %t : (tensor<4x63xf32>, tensor<4xi64>) -> tensor<f32>
      %loss = nn.add %ca, %cs : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %loss, %p, %flat : tensor<f32>, tensor<4x65xf32>, tensor<260xf32>
    }
  }
}
