// The character-level GPT demo (vocab 128, context 64, width 128, 4 heads,
// 4 layers, batch 8): the Python builder reproduces it (and the GPT-2 example),
// round trip, summary, and the units and collectives the FSDP pipeline gives
// it with one unit per Block on 2 ranks.
// RUN: %python -m fsdp_mlir.models gpt2 --name char_gpt --vocab 128 --ctx 64 --width 128 --heads 4 --layers 4 --batch 8 | grep -v '^//' > %t.gen
// RUN: grep -v '^//' %examples/char_gpt.mlir > %t.ref
// RUN: diff %t.gen %t.ref
// RUN: %python -m fsdp_mlir.models gpt2 --name gpt2 --vocab 64 --ctx 16 --width 32 --heads 4 --layers 2 --batch 4 | grep -v '^//' > %t.gen2
// RUN: grep -v '^//' %examples/gpt2.mlir > %t.ref2
// RUN: diff %t.gen2 %t.ref2
// RUN: fsdp-opt %examples/char_gpt.mlir | fsdp-opt | FileCheck %s --check-prefix=IR
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-model-summary -o /dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: fsdp-opt %examples/char_gpt.mlir --fsdp-pipeline="world-size=2 auto-wrap-policy=module-kind wrap-kinds=Block optimizer=adamw report=true" --fsdp-model-summary -o /dev/null | FileCheck %s --check-prefix=PIPE

// IR: fsdp.model @char_gpt
// IR: fsdp.module @"3" kind "Block"
// IR: init <normal({{.*}}, 0.00707106781186547{{[0-9]*}})>
// IR: fsdp.get_param @transformer::@wte::@weight : tensor<128x128xf32>
// IR: nn.cross_entropy %{{.*}}, %{{.*}} : (tensor<512x128xf32>, tensor<512xi64>) -> tensor<f32>

// 16384 (wte) + 8192 (wpe) + 4 x 198272 (blocks: 12*128^2 + 13*128) + 256
// (ln_f) = 817920 parameters; unwrapped, the root is the only unit.
// SUMMARY:      model char_gpt: 817920 parameters (817920 trainable), 3271680 bytes; 0 buffer elements (0 bytes); 1 FSDP units
// SUMMARY-NEXT: module kind unit flat own subtree bytes buffers
// SUMMARY-NEXT: (root) GPT yes 817920 0 817920 3271680 0
// SUMMARY:      transformer.h.0 Block 0 198272 793088 0

// Wrapping each Block gives 5 units: the root keeps wte, wpe and ln_f
// (16384 + 8192 + 256 = 24832). Per step: 5 forward all-gathers, 4 backward
// ones (the blocks; the root stays gathered after the forward), 5
// reduce-scatters.
// PIPE:      fsdp-report: model char_gpt, full-shard on #fsdp.mesh<shard = 2> (2 ranks)
// PIPE:      peak memory per rank: {{[0-9]+}} bytes
// PIPE:      collectives per step: 14, {{[0-9]+}} bytes; all_gather backward 4; all_gather forward 5; reduce_scatter backward 5
// PIPE:      model char_gpt: 817920 parameters (817920 trainable), 3271680 bytes; 0 buffer elements (0 bytes); 5 FSDP units
// PIPE-NEXT: module kind unit flat own subtree bytes buffers
// PIPE-NEXT: (root) GPT yes 24832 0 817920 3271680 0
// PIPE:      transformer.h.0 Block yes 198272 0 198272 793088 0
// PIPE:      transformer.h.1 Block yes 198272 0 198272 793088 0
// PIPE:      transformer.h.2 Block yes 198272 0 198272 793088 0
// PIPE:      transformer.h.3 Block yes 198272 0 198272 793088 0
// PIPE:      transformer.ln_f LayerNorm 256 256 1024 0
