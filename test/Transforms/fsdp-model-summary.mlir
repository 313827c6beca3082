// The summary counts own and subtree parameters, bytes by dtype, trainable
// parameters and buffers, marks units, and leaves the IR unchanged.
// RUN: fsdp-opt %s --fsdp-model-summary | FileCheck %s --check-prefix=TEXT
// RUN: fsdp-opt %s --fsdp-model-summary=json=true -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: fsdp-opt %s --fsdp-model-summary="json=true output=%t.json" -o /dev/null
// RUN: %python -c "import json,sys; d=json.load(open(sys.argv[1])); m=d['models'][0]; print(m['model'], m['params'], m['trainable_params'], [x['subtree_params'] for x in m['modules']])" %t.json | FileCheck %s --check-prefix=FILE
// RUN: not fsdp-opt %s --fsdp-model-summary=output=%t.missing/dir/summary.txt -o /dev/null 2>&1 | FileCheck %s --check-prefix=ERR --implicit-check-not=fsdp.model

// TEXT:      model mixed: 120 parameters (112 trainable), 352 bytes; 10 buffer elements (40 bytes); 2 FSDP units
// TEXT-NEXT: module   kind       unit  own  subtree  bytes  buffers
// TEXT-NEXT: (root)   Net        yes    8   120  352  10
// TEXT-NEXT: encoder  Encoder    yes    0   64   128  8
// TEXT-NEXT: encoder.proj  Linear     64   64   128  0
// TEXT-NEXT: head     Linear          48   48   192  0
// TEXT:      model second: 4 parameters
// TEXT:      fsdp.model @mixed

// JSON:      "models": [
// JSON:        "model": "mixed",
// JSON:        "modules": [
// JSON:            "buffer_bytes": 40,
// JSON-NEXT:       "buffers": 10,
// JSON-NEXT:       "kind": "Net",
// JSON-NEXT:       "name": "",
// JSON-NEXT:       "own_bytes": 32,
// JSON-NEXT:       "own_params": 8,
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
