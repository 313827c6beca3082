// The examples, wrapped by each policy; `--fsdp-model-summary` shows the
// units and their flat parameters. The sed strips the manual units of
// NestedWrappedModule. Numbers are subtree parameter counts:
// module = 496 = module.0 36 + module.1 352 (= 80 + 272) + module.2 68 + module.3 40.

// size, min-params=40, as _recursive_wrap does it: module.0 (36) is below the
// threshold and not wrapped; module.1.0, module.1.1, module.2, module.3 are;
// module.1 is left with 352 - 352 = 0 and module with 496 - 460 = 36, so
// neither is wrapped; the root (never wrapped by the policy) holds module.0.
// RUN: sed -E 's/ unit(<[^>]*>)? \{/ {/' %examples/nested_wrapped.mlir \
// RUN:   | fsdp-opt --fsdp-auto-wrap="policy=size min-params=40" --fsdp-model-summary \
// RUN:   | FileCheck %s --check-prefix=SIZE40
// SIZE40:      model nested_wrapped: 496 parameters (496 trainable), 1984 bytes; 0 buffer elements (0 bytes); 5 FSDP units
// SIZE40-NEXT: module     kind                unit flat own subtree bytes buffers
// SIZE40-NEXT: (root)     NestedWrappedModule yes   36   0     496  1984       0
// SIZE40-NEXT: module     Sequential                     0     496  1984       0
// SIZE40-NEXT: module.0   Linear                        36      36   144       0
// SIZE40-NEXT: module.1   Sequential                     0     352  1408       0
// SIZE40-NEXT: module.1.0 Linear              yes   80  80      80   320       0
// SIZE40-NEXT: module.1.1 Linear              yes  272 272     272  1088       0
// SIZE40-NEXT: module.2   Linear              yes   68  68      68   272       0
// SIZE40-NEXT: module.3   Linear              yes   40  40      40   160       0
// SIZE40:      fsdp.module @root kind "NestedWrappedModule" unit {
// SIZE40-NEXT:   fsdp.module @module kind "Sequential" {
// SIZE40-NEXT:     fsdp.module @"0" kind "Linear" {
// SIZE40:          fsdp.module @"1" kind "Sequential" {
// SIZE40-NEXT:       fsdp.module @"0" kind "Linear" unit {
// SIZE40:            fsdp.module @"1" kind "Linear" unit {
// SIZE40:          fsdp.module @"2" kind "Linear" unit {
// SIZE40:          fsdp.module @"3" kind "Linear" unit {

// always: every module is a unit, the parameter-less Sequentials too (their
// flat parameters are empty): 8 units, 5 of them with parameters.
// RUN: sed -E 's/ unit(<[^>]*>)? \{/ {/' %examples/nested_wrapped.mlir \
// RUN:   | fsdp-opt --fsdp-auto-wrap=policy=always --fsdp-model-summary -o /dev/null \
// RUN:   | FileCheck %s --check-prefix=ALWAYS
// ALWAYS:      model nested_wrapped: {{.*}}; 8 FSDP units
// ALWAYS-NEXT: module     kind                unit flat own subtree
// ALWAYS-NEXT: (root)     NestedWrappedModule yes    0   0     496
// ALWAYS-NEXT: module     Sequential          yes    0   0     496
// ALWAYS-NEXT: module.0   Linear              yes   36  36      36
// ALWAYS-NEXT: module.1   Sequential          yes    0   0     352
// ALWAYS-NEXT: module.1.0 Linear              yes   80  80      80
// ALWAYS-NEXT: module.1.1 Linear              yes  272 272     272
// ALWAYS-NEXT: module.2   Linear              yes   68  68      68
// ALWAYS-NEXT: module.3   Linear              yes   40  40      40

// none (the default): the example's manual wrap() units are kept.
// RUN: fsdp-opt %examples/nested_wrapped.mlir --fsdp-auto-wrap --fsdp-model-summary -o /dev/null \
// RUN:   | FileCheck %s --check-prefix=NONE
// NONE:      model nested_wrapped: {{.*}}; 4 FSDP units
// NONE-NEXT: module     kind                unit flat own subtree
// NONE-NEXT: (root)     NestedWrappedModule yes   76   0     496
// NONE-NEXT: module     Sequential                     0     496
// NONE-NEXT: module.0   Linear                        36      36
// NONE-NEXT: module.1   Sequential          yes  272   0     352
// NONE-NEXT: module.1.0 Linear              yes   80  80      80
// NONE-NEXT: module.1.1 Linear                       272     272
// NONE-NEXT: module.2   Linear              yes   68  68      68
// NONE-NEXT: module.3   Linear                        40      40

// module-kind, kinds=Block (transformer_auto_wrap_policy on GPT-2's blocks):
// the root keeps wte + wpe + ln_f = 2048 + 512 + 64.
// RUN: fsdp-opt %examples/gpt2.mlir --fsdp-auto-wrap="policy=module-kind kinds=Block" --fsdp-model-summary \
// RUN:   | FileCheck %s --check-prefix=BLOCK
// BLOCK:      model gpt2: {{.*}}; 3 FSDP units
// BLOCK-NEXT: module                  kind       unit flat  own subtree
// BLOCK-NEXT: (root)                  GPT        yes  2624    0   28032
// BLOCK-NEXT: transformer             ModuleDict            0   28032
// BLOCK-NEXT: transformer.wte         Embedding          2048    2048
// BLOCK-NEXT: transformer.wpe         Embedding           512     512
// BLOCK-NEXT: transformer.h           ModuleList            0   25408
// BLOCK-NEXT: transformer.h.0         Block      yes 12704    0   12704
// BLOCK:      transformer.h.1         Block      yes 12704    0   12704
// BLOCK:      transformer.ln_f        LayerNorm            64      64
// BLOCK:      fsdp.module @root kind "GPT" unit {
// BLOCK:        fsdp.module @"0" kind "Block" unit {
// BLOCK:        fsdp.module @"1" kind "Block" unit {

// module-kind, kinds=Block,Embedding: wte is a unit but its weight, tied to
// the output projection the root reads, goes to the root (flat 0 in wte,
// 2048 + 64 in the root); wpe's is not tied and stays in wpe.
// RUN: fsdp-opt %examples/gpt2.mlir --fsdp-auto-wrap="policy=module-kind kinds=Block,Embedding" --fsdp-model-summary -o /dev/null \
// RUN:   | FileCheck %s --check-prefix=TIED
// TIED:      model gpt2: {{.*}}; 5 FSDP units
// TIED-NEXT: module                  kind       unit flat  own subtree
// TIED-NEXT: (root)                  GPT        yes  2112    0   28032
// TIED-NEXT: transformer             ModuleDict            0   28032
// TIED-NEXT: transformer.wte         Embedding  yes     0 2048    2048
// TIED-NEXT: transformer.wpe         Embedding  yes   512  512     512
// TIED-NEXT: transformer.h           ModuleList            0   25408
// TIED-NEXT: transformer.h.0         Block      yes 12704    0   12704
// TIED:      transformer.h.1         Block      yes 12704    0   12704
// TIED:      transformer.ln_f        LayerNorm            64      64

// The small models below, one per case.
// RUN: fsdp-opt %s -split-input-file --fsdp-auto-wrap=policy=size --fsdp-model-summary -o /dev/null \
// RUN:   | FileCheck %s --check-prefix=HIGH
// RUN: fsdp-opt %s -split-input-file --fsdp-auto-wrap="policy=size min-params=20" --fsdp-model-summary \
// RUN:   | FileCheck %s --check-prefix=SIZE20
// RUN: fsdp-opt %s -split-input-file --fsdp-auto-wrap="policy=size min-params=20 force-leaf-kinds=Dropout exclude-kinds=Dropout" --fsdp-model-summary -o /dev/null \
// RUN:   | FileCheck %s --check-prefix=OVERRIDE

// With the default threshold (1e8 parameters) nothing is wrapped but the root.
// HIGH: model force_leaf: {{.*}}; 1 FSDP units
// HIGH: model exclude: {{.*}}; 1 FSDP units
// HIGH: model reshard: {{.*}}; 1 FSDP units

// A MultiheadAttention (a force-leaf kind by default) is neither recursed
// into nor wrapped itself: its 52 parameters stay with the root although
// out_proj alone reaches the threshold. With force-leaf-kinds=Dropout
// (replacing the default) out_proj and then attn's remaining 32 are wrapped.
// SIZE20-LABEL: model force_leaf:
// SIZE20-SAME:  2 FSDP units
// SIZE20-NEXT:  module        kind               unit flat own subtree
// SIZE20-NEXT:  (root)        Net                yes    52   0      72
// SIZE20-NEXT:  attn          MultiheadAttention           32      52
// SIZE20-NEXT:  attn.out_proj Linear                       20      20
// SIZE20-NEXT:  head          Linear             yes    20  20      20
// OVERRIDE-LABEL: model force_leaf:
// OVERRIDE-SAME:  4 FSDP units
// OVERRIDE-NEXT:  module        kind               unit flat own subtree
// OVERRIDE-NEXT:  (root)        Net                yes     0   0      72
// OVERRIDE-NEXT:  attn          MultiheadAttention yes    32  32      52
// OVERRIDE-NEXT:  attn.out_proj Linear             yes    20  20      20
// OVERRIDE-NEXT:  head          Linear             yes    20  20      20
fsdp.model @force_leaf {
  fsdp.module @root kind "Net" {
    fsdp.module @attn kind "MultiheadAttention" {
      fsdp.param @in_proj_weight : tensor<8x4xf32> init <zeros>
      fsdp.module @out_proj kind "Linear" {
        fsdp.param @weight : tensor<4x4xf32> init <zeros>
        fsdp.param @bias : tensor<4xf32> init <zeros>
      }
    }
    fsdp.module @head kind "Linear" {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
      fsdp.param @bias : tensor<4xf32> init <zeros>
    }
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// A ModuleList (excluded by default) whose entries are each below the
// threshold but together reach it is recursed into and not wrapped; with
// exclude-kinds=Dropout (replacing the default) it is.
// SIZE20-LABEL: model exclude:
// SIZE20-SAME:  1 FSDP units
// SIZE20-NEXT:  module   kind       unit flat own subtree
// SIZE20-NEXT:  (root)   Net        yes    24   0      24
// SIZE20-NEXT:  layers   ModuleList           0      24
// OVERRIDE-LABEL: model exclude:
// OVERRIDE-SAME:  2 FSDP units
// OVERRIDE-NEXT:  module   kind       unit flat own subtree
// OVERRIDE-NEXT:  (root)   Net        yes     0   0      24
// OVERRIDE-NEXT:  layers   ModuleList yes    24   0      24
// OVERRIDE-NEXT:  layers.0 Linear                12      12
// OVERRIDE-NEXT:  layers.1 Linear                12      12
fsdp.model @exclude {
  fsdp.module @root kind "Net" {
    fsdp.module @layers kind "ModuleList" {
      fsdp.module @"0" kind "Linear" {
        fsdp.param @weight : tensor<2x4xf32> init <zeros>
        fsdp.param @bias : tensor<4xf32> init <zeros>
      }
      fsdp.module @"1" kind "Linear" {
        fsdp.param @weight : tensor<2x4xf32> init <zeros>
        fsdp.param @bias : tensor<4xf32> init <zeros>
      }
    }
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// -----

// A reshard_after_forward set on the root by hand is kept; the child is
// wrapped with a plain mark.
// SIZE20-LABEL: model reshard:
// SIZE20-SAME:  2 FSDP units
// SIZE20:       fsdp.module @root kind "Net" unit<reshard_after_forward = false> {
// SIZE20-NEXT:    fsdp.module @body kind "Linear" unit {
fsdp.model @reshard {
  fsdp.module @root kind "Net" unit<reshard_after_forward = false> {
    fsdp.module @body kind "Linear" {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
      fsdp.param @bias : tensor<4xf32> init <zeros>
    }
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
