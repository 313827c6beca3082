// A broken train-step contract is one line at the step's location, never
// the step itself (thousands of lines on a real model).
// RUN: not fsdp-opt %s 2>&1 | FileCheck %s
// CHECK: train-step-diagnostic.mlir:[[@LINE+4]]:1: error: 'func.func' op argument #1 of the train step has no role
// CHECK-NOT: see current operation
// CHECK-NOT: arith.constant
// CHECK-NOT: return
func.func @step(%w: tensor<4xf32> {fsdp.param = "w"}, %x: tensor<4xf32>)
    -> (tensor<f32> {fsdp.loss}) attributes {fsdp.model = @m} {
  %l = arith.constant dense<0.0> : tensor<f32>
  return %l : tensor<f32>
}
