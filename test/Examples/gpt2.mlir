// The GPT-2 example: round trip (also through the generic form) and summary.
// The tied lm_head adds no parameters: wte (64x32) is counted once.
// RUN: fsdp-opt %examples/gpt2.mlir | fsdp-opt | FileCheck %s --check-prefix=IR
// RUN: fsdp-opt %examples/gpt2.mlir --mlir-print-op-generic | fsdp-opt | FileCheck %s --check-prefix=IR
// RUN: fsdp-opt %examples/gpt2.mlir --fsdp-model-summary=json=true -o /dev/null | %python -c "import json,sys; m=json.load(sys.stdin)['models'][0]; r=m['modules'][0]; print(m['params'], len(m['modules']), {x['name']: x['subtree_params'] for x in m['modules']}['transformer.h.0'], r['unit'], r['flat_params'])" | FileCheck %s --check-prefix=JSON

// IR: fsdp.model @gpt2
// IR: fsdp.get_param @transformer::@wte::@weight : tensor<64x32xf32>
// IR: nn.cross_entropy

// 2048 (wte) + 512 (wpe) + 2 x 12704 (blocks) + 64 (ln_f); 24 modules; the
// root is the only unit and holds everything.
// JSON: 28032 24 12704 True 28032
