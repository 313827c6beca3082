// Bad options and IR that cannot be differentiated are errors with a location.
// RUN: split-file %s %t
// RUN: fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=lamb" -verify-diagnostics -o /dev/null
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="lr=-2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="beta1=0.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adamw momentum=0.9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adam dampening=0.1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAM-DAMPENING
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=lion momentum=0.9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LION-MOMENTUM
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=lion eps=1e-6" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LION-EPS
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=lion param-groups=*:eps=1e-6" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LION-GROUP
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=lion beta2=1.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=LION-BETA
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adafactor beta1=0.8" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAFACTOR-BETA
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adamw eps2=0.1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAFACTOR-ONLY
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adafactor beta2-decay=0.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAFACTOR-DECAY
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adafactor eps1=-2" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAFACTOR-EPS
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adafactor clip-threshold=0.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAFACTOR-D
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adafactor param-groups=*:beta1=0.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAFACTOR-GROUP
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="optimizer=adafactor momentum=0.9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAFACTOR-MOMENTUM
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="nesterov=true" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="grad-accum-steps=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=ACCUM
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="clip-grad-norm=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="weight-decay=-0.5" -o /dev/null 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step --fsdp-build-train-step -o /dev/null 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="param-groups=ndim<two:weight-decay=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NDIM
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="param-groups=*.bias" -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOTHING
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="param-groups=*.bias:decay=0" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SETTING
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="param-groups=*.bias:lr-scale=-1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: not fsdp-opt %t/model.mlir --fsdp-build-train-step="param-groups=[:lr-scale=1" -o /dev/null 2>&1 | FileCheck %s --check-prefix=GLOB
// RUN: fsdp-opt %t/no-vjp.mlir --fsdp-build-train-step -verify-diagnostics -o /dev/null
// RUN: fsdp-opt %t/stats-loss.mlir --fsdp-build-train-step -verify-diagnostics -o /dev/null


// LR: model.mlir:2:1: error: fsdp-build-train-step: lr must be >= 0, got -2
// BETA: error: fsdp-build-train-step: beta1, beta2 and eps are Adam / AdamW options; the optimizer is sgd
// MOMENTUM: error: fsdp-build-train-step: momentum, dampening and nesterov are SGD options; the optimizer is adamw
// ADAM-DAMPENING: error: fsdp-build-train-step: momentum, dampening and nesterov are SGD options; the optimizer is adam
// LION-MOMENTUM: error: fsdp-build-train-step: momentum, dampening and nesterov are SGD options; the optimizer is lion
// LION-EPS: error: fsdp-build-train-step: eps is an Adam / AdamW option; the optimizer is lion
// LION-GROUP: error: fsdp-build-train-step: param group '*:eps=1e-6': unknown setting 'eps' (weight-decay, lr-scale, beta1, beta2 for lion)
// LION-BETA: error: fsdp-build-train-step: beta1 and beta2 must be in [0, 1), got (9.000000e-01, 1.500000e+00)
// ADAFACTOR-BETA: error: fsdp-build-train-step: beta1, beta2 and eps are Adam / AdamW options; the optimizer is adafactor
// ADAFACTOR-ONLY: error: fsdp-build-train-step: beta2-decay, eps1, eps2 and clip-threshold are Adafactor options; the optimizer is adamw
// ADAFACTOR-DECAY: error: fsdp-build-train-step: beta2-decay must be <= 0, got 5.000000e-01
// ADAFACTOR-EPS: error: fsdp-build-train-step: eps1 and eps2 must be >= 0, got (-2.000000e+00, 1.000000e-03)
// ADAFACTOR-D: error: fsdp-build-train-step: clip-threshold (Adafactor's d) must be >= 1, got 5.000000e-01
// ADAFACTOR-GROUP: error: fsdp-build-train-step: param group '*:beta1=0.5': unknown setting 'beta1' (weight-decay, lr-scale for adafactor)
// ADAFACTOR-MOMENTUM: error: fsdp-build-train-step: momentum, dampening and nesterov are SGD options; the optimizer is adafactor
// NESTEROV: error: fsdp-build-train-step: nesterov needs a momentum and zero dampening (as torch.optim.SGD)
// ACCUM: error: fsdp-build-train-step: grad-accum-steps must be >= 1, got 0
// CLIP: error: fsdp-build-train-step: clip-grad-norm must be >= 0, got -1
// TWICE: error: 'fsdp.model' op already has a train step
// NDIM: model.mlir:2:1: error: fsdp-build-train-step: param group 'ndim<two:weight-decay=0': expected ndim<K with an integer K
// NOTHING: error: fsdp-build-train-step: param group '*.bias': sets nothing; add :weight-decay=X or :lr-scale=X
// SETTING: error: fsdp-build-train-step: param group '*.bias:decay=0': unknown setting 'decay' (weight-decay, lr-scale, momentum, dampening for sgd)
// VALUE: error: fsdp-build-train-step: param group '*.bias:lr-scale=-1': 'lr-scale=-1' needs a number >= 0
// GLOB: error: fsdp-build-train-step: param group '[:lr-scale=1': the selector is not ndim<K, ndim>=K, kind=CLASS or a name pattern
// DECAY: error: fsdp-build-train-step: weight-decay must be >= 0, got -5.000000e-01

//--- model.mlir
// expected-error @+1 {{fsdp-build-train-step: unknown optimizer 'lamb'; expected sgd, adam, adamw, lion or adafactor}}
module {
  fsdp.model @m {
    fsdp.module @root kind "Net" {
      fsdp.param @w : tensor<4xf32> init <ones>
      fsdp.forward () -> tensor<f32> {
        %w = fsdp.get_param @w : tensor<4xf32>
        %l = nn.reduce_sum %w {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
        fsdp.return %l : tensor<f32>
      }
    }
  }
}

//--- no-vjp.mlir
// An op without a VJP between a parameter and the loss.
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<4xf32> init <ones>
    fsdp.forward () -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<4xf32>
      // expected-error @+1 {{'arith.addf' op has no VJP (DifferentiableOpInterface), but the loss depends on it through a trained parameter}}
      %d = arith.addf %w, %w : tensor<4xf32>
      %l = nn.reduce_sum %d {dims = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

//--- stats-loss.mlir
// A loss computed from attention's softmax statistics: they have no
// gradient.
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @w : tensor<2x4x96xf32> init <ones>
    fsdp.forward () -> tensor<f32> {
      %w = fsdp.get_param @w : tensor<2x4x96xf32>
      // expected-error @+2 {{'nn.packed_attention' op the loss depends on its softmax statistics, which have no gradient}}
      // expected-error @+1 {{'nn.packed_attention' op failed to build its VJP}}
      %o, %s = nn.packed_attention %w {keep_stats, num_heads = 4 : i64} : (tensor<2x4x96xf32>) -> (tensor<2x4x32xf32>, tensor<2x4x4xf32>)
      %l = nn.reduce_sum %s {dims = array<i64: 0, 1, 2>} : (tensor<2x4x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
