// Errors and warnings of fsdp-auto-wrap. Each case needs its own options, so
// each is its own file.
// RUN: split-file %s %t
// RUN: fsdp-opt %t/unknown-policy.mlir --fsdp-auto-wrap=policy=manual -verify-diagnostics
// RUN: fsdp-opt %t/empty-kinds.mlir --fsdp-auto-wrap=policy=module-kind -verify-diagnostics
// RUN: fsdp-opt %t/kinds-without-module-kind.mlir --fsdp-auto-wrap="kinds=Block" -verify-diagnostics
// RUN: fsdp-opt %t/negative-min-params.mlir --fsdp-auto-wrap="policy=size min-params=-1" -verify-diagnostics
// RUN: fsdp-opt %t/already-wrapped.mlir --fsdp-auto-wrap="policy=size min-params=1" -verify-diagnostics
// RUN: fsdp-opt %t/no-match.mlir --fsdp-auto-wrap="policy=module-kind kinds=Linear,Block" -verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=NOMATCH

//--- unknown-policy.mlir
// An unknown policy is an error that lists the valid ones.
// expected-error @+1 {{fsdp-auto-wrap: unknown policy 'manual' (expected size, module-kind, always or none)}}
module {
  fsdp.model @m {
    fsdp.module @root kind "Net" {
      fsdp.forward () -> tensor<f32> {
        %l = arith.constant dense<0.0> : tensor<f32>
        fsdp.return %l : tensor<f32>
      }
    }
  }
}

//--- empty-kinds.mlir
// policy=module-kind without kinds would wrap nothing.
// expected-error @+1 {{fsdp-auto-wrap: policy=module-kind needs at least one kind in 'kinds'}}
module {
  fsdp.model @m {
    fsdp.module @root kind "Net" {
      fsdp.forward () -> tensor<f32> {
        %l = arith.constant dense<0.0> : tensor<f32>
        fsdp.return %l : tensor<f32>
      }
    }
  }
}

//--- kinds-without-module-kind.mlir
// Kinds under another policy would be ignored: the model would stay one unit.
// expected-error @+1 {{fsdp-auto-wrap: 'kinds' (fsdp-pipeline's wrap-kinds) is used only by policy=module-kind, got policy=none}}
module {
  fsdp.model @m {
    fsdp.module @root kind "Net" {
      fsdp.forward () -> tensor<f32> {
        %l = arith.constant dense<0.0> : tensor<f32>
        fsdp.return %l : tensor<f32>
      }
    }
  }
}

//--- negative-min-params.mlir
// A negative threshold is an error.
// expected-error @+1 {{fsdp-auto-wrap: min-params must be >= 0, got -1}}
module {
  fsdp.model @m {
    fsdp.module @root kind "Net" {
      fsdp.forward () -> tensor<f32> {
        %l = arith.constant dense<0.0> : tensor<f32>
        fsdp.return %l : tensor<f32>
      }
    }
  }
}

//--- already-wrapped.mlir
// Auto-wrapping a model that already has units below the root is an error
// (PyTorch's _check_nested_wrapping) naming the first one in pre-order.
// expected-error @+1 {{fsdp-auto-wrap: module 'encoder.proj' is already an FSDP unit; policy=size cannot wrap a wrapped model (use policy=none to keep the units marked in the IR)}}
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.module @encoder kind "Encoder" {
      fsdp.module @proj kind "Linear" unit {
        fsdp.param @weight : tensor<4x4xf32> init <zeros>
      }
    }
    fsdp.module @head kind "Linear" unit {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}

//--- no-match.mlir
// A listed kind that matches no module is a warning naming it; the others
// are still wrapped.
// NOMATCH: fsdp.module @head kind "Linear" unit {
// expected-warning @+1 {{fsdp-auto-wrap: no module of kind 'Block' in the model}}
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.module @head kind "Linear" {
      fsdp.param @weight : tensor<4x4xf32> init <zeros>
    }
    fsdp.forward () -> tensor<f32> {
      %l = arith.constant dense<0.0> : tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
