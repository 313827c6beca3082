// RUN: fsdp-opt %s --convert-rt-to-llvm -split-input-file -verify-diagnostics

// A step is one straight-line block (convert-fsdp-to-rt emits it so).
// expected-error @+1 {{convert-rt-to-llvm: a step must be one block without results}}
func.func @branches(%ctx: !rt.context) {
  cf.br ^next
^next:
  return
}

// -----

func.func @tensor_constant(%ctx: !rt.context) {
  // expected-error @+1 {{convert-rt-to-llvm: only scalar constants}}
  %c = arith.constant dense<1> : tensor<2xi64>
  return
}
