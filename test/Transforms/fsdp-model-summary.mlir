// The summary counts own and subtree parameters, bytes by dtype, trainable
// parameters and buffers, marks units, and leaves the IR unchanged.
// RUN: fsdp-opt %s --fsdp-model-summary | FileCheck %s --check-prefix=TEXT
// RUN: fsdp-opt %s --fsdp-model-summary=json=true -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: fsdp-opt %s --fsdp-model-summary="json=true output=%t.json" -o /dev/null
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); m=d['models'][0]; print(m['model'], m['params'], m['trainable_params'], [x['subtree_params'] for x in m['modules']])" %t.json | FileCheck %s --check-prefix=FILE
// RUN: not fsdp-opt %s --fsdp-model-summary=output=%t.missing/dir/summary.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=ERR --implicit-check-not=fsdp.model

// TEXT:      model mixed: 120 parameters (112 trainable), 352 bytes; 10 buffer elements (40 bytes); 2 FSDP units
// TEXT-NEXT: module   kind       unit flat  own  subtree  bytes  buffers
// TEXT-NEXT: (root)   Net        yes   56    8   120  352  10
// TEXT-NEXT: encoder  Encoder    yes   64    0   64   128  8
// TEXT-NEXT: encoder.proj  Linear         64   64   128  0
// TEXT-NEXT: head     Linear              48   48   192  0
// The root is a unit even when not marked.
// TEXT:      model second: 4 parameters (4 trainable), 16 bytes; 0 buffer elements (0 bytes); 1 FSDP units
// TEXT-NEXT: module kind unit flat own subtree bytes buffers
// TEXT-NEXT: (root) Tiny yes  4    4   4   16   0

// JSON:      "models": [
// JSON:        "model": "mixed",
// JSON:        "modules": [
// JSON:            "buffer_bytes": 40,
// JSON-NEXT:       "buffers": 10,
// JSON-NEXT:       "flat_params": 56,
// JSON-NEXT:       "kind": "Net",
// JSON-NEXT:       "name": "",
// JSON-NEXT:       "own_bytes": 32,
// JSON-NEXT:       "own_params": 8,
// JSON-NEXT:       "rank_local": false,
// JSON-NEXT:       "subtree_bytes": 352,
// JSON-NEXT:       "subtree_params": 120,
// JSON-NEXT:       "trainable_params": 112,
// JSON-NEXT:       "unit": true
// JSON:            "name": "encoder.proj",
// JSON:        "param_bytes": 352,
// JSON-NEXT:   "params": 120,
// JSON-NEXT:   "trainable_params": 112
// JSON:        "model": "second",

// FILE: mixed 120 112 [120, 64, 64, 48]

// ERR: error: fsdp-model-summary: cannot open output file

fsdp.model @mixed {
  fsdp.module @root kind "Net" unit {
    // Frozen: counted as a parameter, not as trainable.
    fsdp.param @scale : tensor<8xf32> init <ones> {requires_grad = false}
    fsdp.buffer @step : tensor<2xi32> init <zeros>
    fsdp.module @encoder kind "Encoder" unit {
      fsdp.buffer @running_mean : tensor<8xf32> init <zeros>
      fsdp.module @proj kind "Linear" {
        // bf16: 2 bytes per element.
        fsdp.param @weight : tensor<8x8xbf16> init <normal(0.0, 0.02)>
        fsdp.forward (%x: tensor<2x8xbf16>) -> tensor<2x8xbf16> {
          %w = fsdp.get_param @weight : tensor<8x8xbf16>
          %y = nn.linear %x, %w : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
          fsdp.return %y : tensor<2x8xbf16>
        }
      }
    }
    fsdp.module @head kind "Linear" {
      fsdp.param @weight : tensor<4x10xf32> init <normal(0.0, 0.02)>
      fsdp.param @bias : tensor<8xf32> init <zeros>
    }
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

fsdp.model @second {
  fsdp.module @root kind "Tiny" {
    fsdp.param @w : tensor<4xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

// A tied weight (declared in the wte unit, also read by the root) belongs to
// the lowest unit enclosing all its readers: the root.
// TEXT:      model tied: 8 parameters (8 trainable), 32 bytes; 0 buffer elements (0 bytes); 2 FSDP units
// TEXT-NEXT: module kind unit flat own subtree bytes buffers
// TEXT-NEXT: (root) GPT       yes 8 0 8 32 0
// TEXT-NEXT: wte    Embedding yes 0 8 8 32 0
fsdp.model @tied {
  fsdp.module @root kind "GPT" {
    fsdp.module @wte kind "Embedding" unit {
      fsdp.param @weight : tensor<4x2xf32> init <normal(0.0, 0.02)>
      fsdp.forward (%ids: tensor<3xi64>) -> tensor<3x2xf32> {
        %w = fsdp.get_param @weight : tensor<4x2xf32>
        %e = nn.embedding %ids, %w : (tensor<3xi64>, tensor<4x2xf32>) -> tensor<3x2xf32>
        fsdp.return %e : tensor<3x2xf32>
      }
    }
    fsdp.forward (%ids: tensor<3xi64>, %t: tensor<3xi64>) -> tensor<f32> {
      %x = fsdp.call @wte(%ids) : (tensor<3xi64>) -> tensor<3x2xf32>
      %w = fsdp.get_param @wte::@weight : tensor<4x2xf32>
      %logits = nn.linear %x, %w : (tensor<3x2xf32>, tensor<4x2xf32>) -> tensor<3x4xf32>
      %loss = nn.cross_entropy %logits, %t : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}

// The IR itself is printed unchanged after the summaries.
// TEXT: fsdp.model @mixed
// TEXT: fsdp.model @second
// TEXT: fsdp.model @tied
