// Per-unit mixed precision (#fsdp.unit<param_dtype = ..., reduce_dtype = ...,
// output_dtype = ..., cast_forward_inputs = ...>, FSDP2's per-module
// MixedPrecisionPolicy): each unit gathers and computes in its own param
// dtype, reduces in its own reduce dtype, casts its inputs and outputs; a
// field a unit leaves unset comes from the model-wide fsdp-mixed-precision.
// RUN: fsdp-opt %s --fsdp-build-train-step | FileCheck %s --check-prefix=STEP
// RUN: fsdp-opt %s --fsdp-mixed-precision="param-dtype=bf16 reduce-dtype=f32" --fsdp-pipeline="world-size=2" | FileCheck %s --check-prefix=SHARD
// RUN: fsdp-opt %s --fsdp-mixed-precision="param-dtype=bf16 reduce-dtype=f32" --fsdp-pipeline="world-size=2 report=true" -o /dev/null | FileCheck %s --check-prefix=REPORT

// No model-wide policy: the root casts nothing; block casts its input and
// parameters to bf16 and its output to f32; head casts that to f16 (its
// param dtype); gate has no dtype of its own nor the model's, so it casts
// nothing and PyTorch's type promotion widens the f16 product to f32.
// STEP-LABEL: func.func @two_train_step(
// STEP-NOT: fsdp.mixed_precision
// STEP: nn.cast %arg0 {{.*}}fsdp.unit = "block"} : tensor<16x16xf32> to tensor<16x16xbf16>
// STEP: nn.cast %arg2 {{.*}}fsdp.unit = "head"} : tensor<4x16xf32> to tensor<4x16xf16>
// STEP: %[[X:.*]] = nn.cast %arg6 {{.*}}fsdp.unit = "block"} : tensor<8x16xf32> to tensor<8x16xbf16>
// STEP: %[[H:.*]] = nn.linear %[[X]], {{.*}} -> tensor<8x16xbf16>
// STEP: %[[H32:.*]] = nn.cast %[[H]] {{.*}}fsdp.unit = "block"} : tensor<8x16xbf16> to tensor<8x16xf32>
// STEP: %[[H16:.*]] = nn.cast %[[H32]] {{.*}}fsdp.unit = "head"} : tensor<8x16xf32> to tensor<8x16xf16>
// STEP: %[[O:.*]] = nn.linear %[[H16]], {{.*}} -> tensor<8x4xf16>
// STEP: %[[O32:.*]] = nn.cast %[[O]] {{.*}}fsdp.unit = "gate"} : tensor<8x4xf16> to tensor<8x4xf32>
// STEP: nn.mul %[[O32]], %arg4 {{.*}} -> tensor<8x4xf32>

// cast_forward_inputs = false: gate's f32 input is not cast to its bf16;
// the product is promoted to f32.
// STEP-LABEL: func.func @keep_train_step(
// STEP: %[[S:.*]] = nn.cast %arg0 {{.*}} : tensor<8x4xf32> to tensor<8x4xbf16>
// STEP-NOT: nn.cast %arg2
// STEP: %[[S32:.*]] = nn.cast %[[S]] {{.*}} : tensor<8x4xbf16> to tensor<8x4xf32>
// STEP: nn.mul %arg2, %[[S32]]

// Sharded, under the model-wide bf16 / f32-reduce policy: block gathers in
// bf16 and reduces in f32 (its own); head gathers and reduces in f16 (its
// reduce dtype defaults to its own param dtype, not the model's f32); gate
// takes the model's bf16 gather and f32 reduction. keep's gate reduces in
// its own bf16.
// SHARD-LABEL: func.func @two_train_step(
// SHARD-SAME: fsdp.mixed_precision = {param_dtype = bf16, reduce_dtype = f32}
// SHARD-DAG: fsdp.unshard %{{.*}} unit "block" {{.*}} : tensor<136xbf16> -> !fsdp.token<tensor<272xbf16>>
// SHARD-DAG: fsdp.unshard %{{.*}} unit "head" {{.*}} : tensor<34xf16> -> !fsdp.token<tensor<68xf16>>
// SHARD-DAG: fsdp.unshard %{{.*}} unit "gate" {{.*}} : tensor<16xbf16> -> !fsdp.token<tensor<32xbf16>>
// SHARD-DAG: fsdp.reduce_grads %{{.*}} unit "gate" {{.*}} : tensor<32xf32> -> tensor<16xf32>
// SHARD-DAG: fsdp.reduce_grads %{{.*}} unit "head" {{.*}} : tensor<68xf16> -> tensor<34xf16>
// SHARD-DAG: fsdp.reduce_grads %{{.*}} unit "block" {{.*}} : tensor<272xf32> -> tensor<136xf32>
// SHARD-LABEL: func.func @keep_train_step(
// SHARD: fsdp.unshard %{{.*}} unit "gate" {{.*}} : tensor<16xbf16> -> !fsdp.token<tensor<32xbf16>>
// SHARD: fsdp.reduce_grads %{{.*}} unit "gate" {{.*}} : tensor<32xbf16> -> tensor<16xbf16>

// The report's bytes follow each unit's dtypes: 272 bf16 elements gathered
// are 544 bytes, 68 f16 136, and block's f32 reduction 1088.
// REPORT-LABEL: fsdp-report: model two
// REPORT: collectives per step: 8, 2296 bytes
// REPORT: 0   all_gather      block   forward    bf16          272         544
// REPORT: 1   all_gather      head    forward    f16            68         136
// REPORT: 2   all_gather      gate    forward    bf16           32          64
// REPORT: 5   reduce_scatter  gate    backward   f32            32         128
// REPORT: 6   reduce_scatter  head    backward   f16            68         136
// REPORT: 7   reduce_scatter  block   backward   f32           272        1088
// REPORT-LABEL: fsdp-report: model keep
// REPORT: 1   reduce_scatter  gate    backward   bf16           32          64
fsdp.model @two {
  fsdp.module @root kind "Net" {
    fsdp.module @block kind "Linear" unit<param_dtype = bf16, reduce_dtype = f32, output_dtype = f32> {
      fsdp.param @weight : tensor<16x16xf32> init <kaiming_uniform(2.23606797749979)>
      fsdp.param @bias : tensor<16xf32> init <uniform(-0.25, 0.25)>
      fsdp.forward (%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
        %w = fsdp.get_param @weight : tensor<16x16xf32>
        %b = fsdp.get_param @bias : tensor<16xf32>
        %y = nn.linear %x, %w, %b : (tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
        fsdp.return %y : tensor<8x16xf32>
      }
    }
    fsdp.module @head kind "Linear" unit<param_dtype = f16> {
      fsdp.param @weight : tensor<4x16xf32> init <kaiming_uniform(2.23606797749979)>
      fsdp.param @bias : tensor<4xf32> init <uniform(-0.25, 0.25)>
      fsdp.forward (%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
        %w = fsdp.get_param @weight : tensor<4x16xf32>
        %b = fsdp.get_param @bias : tensor<4xf32>
        %y = nn.linear %x, %w, %b : (tensor<8x16xf32>, tensor<4x16xf32>, tensor<4xf32>) -> tensor<8x4xf32>
        fsdp.return %y : tensor<8x4xf32>
      }
    }
    fsdp.module @gate kind "Gate" unit<cast_forward_inputs = true> {
      fsdp.param @scale : tensor<8x4xf32> init <ones>
      fsdp.forward (%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
        %s = fsdp.get_param @scale : tensor<8x4xf32>
        %y = nn.mul %x, %s : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
        fsdp.return %y : tensor<8x4xf32>
      }
    }
    fsdp.forward (%x: tensor<8x16xf32>, %target: tensor<8x4xf32>) -> tensor<f32> {
      %h = fsdp.call @block(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
      %o = fsdp.call @head(%h) : (tensor<8x16xf32>) -> tensor<8x4xf32>
      %g = fsdp.call @gate(%o) : (tensor<8x4xf32>) -> tensor<8x4xf32>
      %loss = nn.mse_loss %g, %target : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
fsdp.model @keep {
  fsdp.module @root kind "Net" {
    fsdp.module @gate kind "Gate" unit<param_dtype = bf16, cast_forward_inputs = false> {
      fsdp.param @scale : tensor<8x4xf32> init <ones>
      fsdp.forward (%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
        %s = fsdp.get_param @scale : tensor<8x4xf32>
        %y = nn.mul %x, %s : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
        fsdp.return %y : tensor<8x4xf32>
      }
    }
    fsdp.forward (%x: tensor<8x4xf32>, %target: tensor<8x4xf32>) -> tensor<f32> {
      %g = fsdp.call @gate(%x) : (tensor<8x4xf32>) -> tensor<8x4xf32>
      %loss = nn.mse_loss %g, %target : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
