//===- AutodiffNumericTest.cpp - generated gradients vs finite differences -===//
//
// fsdp-build-train-step with SGD at lr = 1 returns param - grad, so a float64
// evaluation of the generated step reads the gradient back; central finite
// differences of the step's loss, evaluated the same way, are the
// independent reference. This checks the VJP compositions (transposed and
// batched matmuls, broadcasting, reductions, shape ops, softmax, ties,
// accumulation); the fused gradient kernels are checked against finite
// differences in the runtime's own tests.
//
//===----------------------------------------------------------------------===//

#include "ReferenceEvaluator.h"

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using fsdp::test::Tensor;

namespace {

class AutodiffNumericTest : public ::testing::Test {
protected:
  AutodiffNumericTest() {
    context.loadDialect<fsdp::FSDPDialect, nn::NNDialect, func::FuncDialect,
                        arith::ArithDialect>();
  }

  /// Checks every trainable parameter's generated gradient against central
  /// finite differences of the loss.
  void checkGradients(StringRef source, int64_t microBatches = 1) {
    module = parseSourceString<ModuleOp>(source, &context);
    ASSERT_TRUE(module) << "model does not parse";
    PassManager pm(&context);
    fsdp::FSDPBuildTrainStepPassOptions options;
    options.lr = 1.0;
    options.gradAccumSteps = microBatches;
    pm.addPass(fsdp::createFSDPBuildTrainStepPass(options));
    ASSERT_TRUE(succeeded(pm.run(*module))) << "pass failed";
    auto step = *module->getOps<func::FuncOp>().begin();

    std::mt19937 rng(42);
    std::uniform_real_distribution<double> uniform(-1.0, 1.0);
    std::vector<Tensor> args;
    for (BlockArgument arg : step.getArguments()) {
      Tensor t = Tensor::zeros(
          std::vector<int64_t>(cast<RankedTensorType>(arg.getType()).getShape().begin(),
                               cast<RankedTensorType>(arg.getType()).getShape().end()));
      for (double &x : t.data)
        x = uniform(rng);
      args.push_back(t);
    }
    auto run = [&](const std::vector<Tensor> &inputs) {
      std::string error;
      FailureOr<std::vector<Tensor>> outputs =
          fsdp::test::evaluate(step, inputs, error);
      EXPECT_TRUE(succeeded(outputs)) << error;
      return succeeded(outputs) ? *outputs : std::vector<Tensor>();
    };
    std::vector<Tensor> outputs = run(args);
    ASSERT_FALSE(outputs.empty());

    int checked = 0;
    for (unsigned r = 0; r < step.getNumResults(); ++r) {
      auto name = step.getResultAttrOfType<StringAttr>(r, "fsdp.param");
      if (!name)
        continue;
      unsigned a = 0;
      while (step.getArgAttrOfType<StringAttr>(a, "fsdp.param") != name)
        ++a;
      for (int64_t i = 0; i < args[a].numel(); ++i) {
        double generated = args[a].data[i] - outputs[r].data[i];
        const double h = 1e-6;
        std::vector<Tensor> plus = args, minus = args;
        plus[a].data[i] += h;
        minus[a].data[i] -= h;
        double fd = (run(plus)[0].data[0] - run(minus)[0].data[0]) / (2 * h);
        EXPECT_NEAR(generated, fd, 1e-6 * std::max(1.0, std::abs(fd)))
            << name.getValue().str() << "[" << i << "]";
        ++checked;
      }
    }
    EXPECT_GT(checked, 0);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

TEST_F(AutodiffNumericTest, LinearReluSoftmaxMaxMinMasksBroadcastingAndMSE) {
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<2x3x4xf32> init <zeros>
    fsdp.param @w : tensor<5x4xf32> init <zeros>
    fsdp.param @b : tensor<5xf32> init <zeros>
    fsdp.param @s : tensor<5xf32> init <zeros>
    fsdp.param @t : tensor<3x1xf32> init <zeros>
    fsdp.forward (%target: tensor<3x5xf32>) -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x3x4xf32>
      %w = fsdp.get_param @w : tensor<5x4xf32>
      %b = fsdp.get_param @b : tensor<5xf32>
      %s = fsdp.get_param @s : tensor<5xf32>
      %t = fsdp.get_param @t : tensor<3x1xf32>
      %y = nn.linear %x, %w, %b : (tensor<2x3x4xf32>, tensor<5x4xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
      %r = nn.relu %y : tensor<2x3x5xf32>
      %p = nn.softmax %r : tensor<2x3x5xf32>
      %m = nn.mul %p, %s : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
      %d = nn.sub %m, %t : (tensor<2x3x5xf32>, tensor<3x1xf32>) -> tensor<2x3x5xf32>
      %hi = nn.maximum %d, %t : (tensor<2x3x5xf32>, tensor<3x1xf32>) -> tensor<2x3x5xf32>
      %lo = nn.minimum %s, %hi : (tensor<5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      %on = nn.gt %lo, %s : (tensor<2x3x5xf32>, tensor<5xf32>) -> tensor<2x3x5xf32>
      %kept = nn.keep %lo, %on : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      %gated = nn.mul %kept, %on : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      %a = nn.reduce_mean %gated {dims = array<i64: 0>} : (tensor<2x3x5xf32>) -> tensor<3x5xf32>
      %l = nn.mse_loss %a, %target : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, ShapeOpsAndTransposedBatchedMatmuls) {
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @a : tensor<2x3x4xf32> init <zeros>
    fsdp.param @m : tensor<6x3xf32> init <zeros>
    fsdp.param @n : tensor<5x3xf32> init <zeros>
    fsdp.param @c : tensor<2x4x6xf32> init <zeros>
    fsdp.param @d : tensor<5x3xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %a = fsdp.get_param @a : tensor<2x3x4xf32>
      %m = fsdp.get_param @m : tensor<6x3xf32>
      %n = fsdp.get_param @n : tensor<5x3xf32>
      %c = fsdp.get_param @c : tensor<2x4x6xf32>
      %d = fsdp.get_param @d : tensor<5x3xf32>
      %t = nn.transpose %a {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
      %r = nn.reshape %t : tensor<4x2x3xf32> to tensor<4x6xf32>
      %p, %q = nn.split %r {dim = 1 : i64, sizes = array<i64: 2, 4>} : (tensor<4x6xf32>) -> (tensor<4x2xf32>, tensor<4x4xf32>)
      %k = nn.concat %q, %p {dim = -1 : i64} : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x6xf32>
      %u = nn.matmul %k, %m : (tensor<4x6xf32>, tensor<6x3xf32>) -> tensor<4x3xf32>
      %v = nn.matmul %u, %n {transpose_rhs} : (tensor<4x3xf32>, tensor<5x3xf32>) -> tensor<4x5xf32>
      %w = nn.matmul %c, %v {transpose_lhs} : (tensor<2x4x6xf32>, tensor<4x5xf32>) -> tensor<2x6x5xf32>
      %z = nn.matmul %d, %w {transpose_lhs, transpose_rhs} : (tensor<5x3xf32>, tensor<2x6x5xf32>) -> tensor<2x3x6xf32>
      %h = nn.scale %z {factor = 0.5 : f64} : tensor<2x3x6xf32>
      %sq = nn.mul %h, %h : (tensor<2x3x6xf32>, tensor<2x3x6xf32>) -> tensor<2x3x6xf32>
      %l = nn.reduce_sum %sq {dims = array<i64: 0, 1, 2>} : (tensor<2x3x6xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, TiedParameterWithAccumulatedMicroBatches) {
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.module @enc kind "Linear" {
      fsdp.param @weight : tensor<3x4xf32> init <zeros>
      fsdp.forward (%x: tensor<2x4xf32>) -> tensor<2x3xf32> {
        %w = fsdp.get_param @weight : tensor<3x4xf32>
        %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
        fsdp.return %y : tensor<2x3xf32>
      }
    }
    fsdp.forward (%x: tensor<2x4xf32>) -> tensor<f32> {
      %h = fsdp.call @enc(%x) : (tensor<2x4xf32>) -> tensor<2x3xf32>
      %w = fsdp.get_param @enc::@weight : tensor<3x4xf32>
      %back = nn.matmul %h, %w : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
      %e = nn.sub %back, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %sq = nn.mul %e, %e : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
      %l = nn.reduce_mean %sq {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
)mlir",
                 /*microBatches=*/3);
}

TEST_F(AutodiffNumericTest, PointwiseMathDivSliceAndPad) {
  // exp(y) keeps log, sqrt, rsqrt, pow 1.5 and the divisor positive;
  // tanh(x) / 2 keeps acos and asin inside (-1, 1).
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<2x6xf32> init <zeros>
    fsdp.param @y : tensor<6xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x6xf32>
      %y = fsdp.get_param @y : tensor<6xf32>
      %t = nn.tanh %x : tensor<2x6xf32>
      %s = nn.sigmoid %x : tensor<2x6xf32>
      %e = nn.exp %y : tensor<6xf32>
      %l = nn.log %e : tensor<6xf32>
      %q = nn.sqrt %e : tensor<6xf32>
      %r = nn.rsqrt %e : tensor<6xf32>
      %p = nn.pow %e {exponent = 1.5 : f64} : tensor<6xf32>
      %x2 = nn.pow %x {exponent = 2.0 : f64} : tensor<2x6xf32>
      %a = nn.abs %x : tensor<2x6xf32>
      %c = nn.clamp %x {min = -0.5 : f64, max = 0.5 : f64} : tensor<2x6xf32>
      %er = nn.erf %x : tensor<2x6xf32>
      %sn = nn.sin %x : tensor<2x6xf32>
      %cs = nn.cos %x : tensor<2x6xf32>
      %sc0 = nn.mul %sn, %cs : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %h = nn.scale %t {factor = 0.5 : f64} : tensor<2x6xf32>
      %ao = nn.acos %h : tensor<2x6xf32>
      %ai = nn.asin %h : tensor<2x6xf32>
      %at = nn.atan %x : tensor<2x6xf32>
      %aoi = nn.mul %ao, %ai : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %inv = nn.add %aoi, %at : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %sc = nn.add %sc0, %inv : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %ts0 = nn.add %t, %er : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %te = nn.add %ts0, %sc : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %ts = nn.mul %te, %s : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %d = nn.div %ts, %e : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
      %ac = nn.mul %a, %c : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %u = nn.add %d, %ac : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %v = nn.add %u, %x2 : (tensor<2x6xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
      %w = nn.mul %v, %r : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
      %qp = nn.add %q, %p : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
      %qpl = nn.mul %qp, %l : (tensor<6xf32>, tensor<6xf32>) -> tensor<6xf32>
      %z = nn.add %w, %qpl : (tensor<2x6xf32>, tensor<6xf32>) -> tensor<2x6xf32>
      %sl = nn.slice %z {dim = 1 : i64, start = 1 : i64, end = 4 : i64} : (tensor<2x6xf32>) -> tensor<2x3xf32>
      %pd = nn.pad %sl {dim = 0 : i64, low = 1 : i64, high = 2 : i64, value = 0.5 : f64} : (tensor<2x3xf32>) -> tensor<5x3xf32>
      %sq = nn.mul %pd, %pd : (tensor<5x3xf32>, tensor<5x3xf32>) -> tensor<5x3xf32>
      %rest = nn.slice %z {dim = 1 : i64, start = 4 : i64, end = 6 : i64} : (tensor<2x6xf32>) -> tensor<2x2xf32>
      %a1 = nn.reduce_sum %sq {dims = array<i64: 0, 1>} : (tensor<5x3xf32>) -> tensor<f32>
      %a2 = nn.reduce_sum %rest {dims = array<i64: 0, 1>} : (tensor<2x2xf32>) -> tensor<f32>
      %loss = nn.add %a1, %a2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, FmodOfBothOperands) {
  // fmod(3x, exp(y)) squared: the dividend's gradient passes through, the
  // divisor's is minus the truncated quotient times it (|3x| < 3 over
  // exp(y) > 0.36: quotients up to 8, not only 0); broadcast over rows.
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<3x4xf32> init <zeros>
    fsdp.param @y : tensor<4xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<3x4xf32>
      %y = fsdp.get_param @y : tensor<4xf32>
      %x3 = nn.scale %x {factor = 3.0 : f64} : tensor<3x4xf32>
      %e = nn.exp %y : tensor<4xf32>
      %r = nn.fmod %x3, %e : (tensor<3x4xf32>, tensor<4xf32>) -> tensor<3x4xf32>
      %sq = nn.mul %r, %r : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
      %loss = nn.reduce_sum %sq {dims = array<i64: 0, 1>} : (tensor<3x4xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, StridedSlicesScatterTheirGradients) {
  // GPT-J's interleaved halves x[:, ::2] and x[:, 1::2] (a product, so each
  // gradient reads the other half), and a step that leaves a tail unread
  // (x[1:6:3] along dim 0 picks rows 1 and 4 of 6).
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<6x8xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<6x8xf32>
      %even = nn.slice %x {dim = 1 : i64, start = 0 : i64, end = 8 : i64, step = 2 : i64} : (tensor<6x8xf32>) -> tensor<6x4xf32>
      %odd = nn.slice %x {dim = 1 : i64, start = 1 : i64, end = 8 : i64, step = 2 : i64} : (tensor<6x8xf32>) -> tensor<6x4xf32>
      %p = nn.mul %even, %odd : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
      %rows = nn.slice %x {dim = 0 : i64, start = 1 : i64, end = 6 : i64, step = 3 : i64} : (tensor<6x8xf32>) -> tensor<2x8xf32>
      %sq = nn.mul %rows, %rows : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
      %a1 = nn.reduce_sum %p {dims = array<i64: 0, 1>} : (tensor<6x4xf32>) -> tensor<f32>
      %a2 = nn.reduce_sum %sq {dims = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
      %loss = nn.add %a1, %a2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, CumsumForwardAndReversed) {
  // A running sum along dim 1, squared (so the gradient reads the values),
  // and a reversed one along dim 0 (whose VJP is a forward cumsum).
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<3x5xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<3x5xf32>
      %c = nn.cumsum %x {dim = 1 : i64} : tensor<3x5xf32>
      %sq = nn.mul %c, %c : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
      %r = nn.cumsum %sq {dim = -2 : i64, reverse} : tensor<3x5xf32>
      %t = nn.tanh %r : tensor<3x5xf32>
      %loss = nn.reduce_sum %t {dims = array<i64: 0, 1>} : (tensor<3x5xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, MixtureOfExpertsRouterAndGroupedGemm) {
  // A Mixtral-style expert layer: top-2 of 4 experts per token from a
  // softmax router, tokens sorted by expert, one grouped GEMM over the
  // segments the histogram's cumsum ends, weighted by the normalised top-k
  // values and put back in token order. The gradients reach the tokens
  // (through the gathered rows and the router), the router (through the
  // top-k values) and the experts (through the transposed weights).
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<6x5xf32> init <zeros>
    fsdp.param @router : tensor<4x5xf32> init <zeros>
    fsdp.param @experts : tensor<4x3x5xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<6x5xf32>
      %r = fsdp.get_param @router : tensor<4x5xf32>
      %logits = nn.linear %x, %r : (tensor<6x5xf32>, tensor<4x5xf32>) -> tensor<6x4xf32>
      %p = nn.softmax %logits : tensor<6x4xf32>
      %v, %i = nn.topk %p {k = 2 : i64} : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi64>)
      %vsum = nn.reduce_sum %v {dims = array<i64: 1>, keepdim} : (tensor<6x2xf32>) -> tensor<6x1xf32>
      %vn = nn.div %v, %vsum : (tensor<6x2xf32>, tensor<6x1xf32>) -> tensor<6x2xf32>
      %flat = nn.reshape %i : tensor<6x2xi64> to tensor<12xi64>
      %s, %perm = nn.sort %flat : (tensor<12xi64>) -> (tensor<12xi64>, tensor<12xi64>)
      %k = arith.constant dense<2> : tensor<i64>
      %tok = nn.floor_div %perm, %k : (tensor<12xi64>, tensor<i64>) -> tensor<12xi64>
      %rows = nn.embedding %tok, %x : (tensor<12xi64>, tensor<6x5xf32>) -> tensor<12x5xf32>
      %sf = nn.cast %s : tensor<12xi64> to tensor<12xf32>
      %counts = nn.histc %sf {bins = 4 : i64, min = 0.0, max = 3.0} : (tensor<12xf32>) -> tensor<4xf32>
      %ci = nn.cast %counts : tensor<4xf32> to tensor<4xi32>
      %offs = nn.cumsum %ci {dim = 0 : i64} : tensor<4xi32>
      %we = fsdp.get_param @experts : tensor<4x3x5xf32>
      %wt = nn.transpose %we {permutation = array<i64: 0, 2, 1>} : (tensor<4x3x5xf32>) -> tensor<4x5x3xf32>
      %y = nn.grouped_matmul %rows, %wt, %offs : (tensor<12x5xf32>, tensor<4x5x3xf32>, tensor<4xi32>) -> tensor<12x3xf32>
      %t = nn.tanh %y : tensor<12x3xf32>
      %vf = nn.reshape %vn : tensor<6x2xf32> to tensor<12x1xf32>
      %w = nn.embedding %perm, %vf : (tensor<12xi64>, tensor<12x1xf32>) -> tensor<12x1xf32>
      %yw = nn.mul %t, %w : (tensor<12x3xf32>, tensor<12x1xf32>) -> tensor<12x3xf32>
      %inv = nn.invert_permutation %perm : tensor<12xi64>
      %back = nn.embedding %inv, %yw : (tensor<12xi64>, tensor<12x3xf32>) -> tensor<12x3xf32>
      %sq = nn.mul %back, %back : (tensor<12x3xf32>, tensor<12x3xf32>) -> tensor<12x3xf32>
      %loss = nn.reduce_sum %sq {dims = array<i64: 0, 1>} : (tensor<12x3xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, ConvolutionsStridedPaddedDilatedGrouped) {
  // A grouped 2-D convolution with stride, dilation, a bias and 'same'-style
  // uneven padding, squared through tanh (so the gradients read the
  // values), then a 1-D convolution without bias of its flattened rows.
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<2x4x5x6xf32> init <zeros>
    fsdp.param @w : tensor<6x2x2x3xf32> init <zeros>
    fsdp.param @b : tensor<6xf32> init <zeros>
    fsdp.param @v : tensor<3x6x2xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x4x5x6xf32>
      %w = fsdp.get_param @w : tensor<6x2x2x3xf32>
      %b = fsdp.get_param @b : tensor<6xf32>
      %v = fsdp.get_param @v : tensor<3x6x2xf32>
      %y = nn.conv %x, %w, %b {stride = array<i64: 2, 1>, pad_low = array<i64: 0, 2>, pad_high = array<i64: 1, 2>, dilation = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x5x6xf32>, tensor<6x2x2x3xf32>, tensor<6xf32>) -> tensor<2x6x3x6xf32>
      %t = nn.tanh %y : tensor<2x6x3x6xf32>
      %sq = nn.mul %t, %y : (tensor<2x6x3x6xf32>, tensor<2x6x3x6xf32>) -> tensor<2x6x3x6xf32>
      %r = nn.reshape %sq : tensor<2x6x3x6xf32> to tensor<2x6x18xf32>
      %z = nn.conv %r, %v {stride = array<i64: 3>, pad_low = array<i64: 1>, pad_high = array<i64: 0>, dilation = array<i64: 1>, groups = 1 : i64} : (tensor<2x6x18xf32>, tensor<3x6x2xf32>) -> tensor<2x3x6xf32>
      %loss = nn.reduce_sum %z {dims = array<i64: 0, 1, 2>} : (tensor<2x3x6xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, TransposedConvolutions) {
  // F.conv_transpose2d with stride, padding, output_padding (the result's
  // extra row, past the last window of the convolution it transposes),
  // dilation and two groups, plus a bias; then F.conv_transpose1d with a
  // dilation above its stride and output_padding 1 (pad_high 0). Squared
  // through tanh, so the gradients read the values.
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<2x4x3x3xf32> init <zeros>
    fsdp.param @w : tensor<4x3x3x2xf32> init <zeros>
    fsdp.param @b : tensor<6x1x1xf32> init <zeros>
    fsdp.param @v : tensor<2x3x4xf32> init <zeros>
    fsdp.param @u : tensor<3x2x3xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x4x3x3xf32>
      %w = fsdp.get_param @w : tensor<4x3x3x2xf32>
      %b = fsdp.get_param @b : tensor<6x1x1xf32>
      %v = fsdp.get_param @v : tensor<2x3x4xf32>
      %u = fsdp.get_param @u : tensor<3x2x3xf32>
      %c = nn.conv_transpose %x, %w {stride = array<i64: 2, 1>, pad_low = array<i64: 1, 0>, pad_high = array<i64: 1, 0>, dilation = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x3x3xf32>, tensor<4x3x3x2xf32>) -> tensor<2x6x6x5xf32>
      %y = nn.add %c, %b : (tensor<2x6x6x5xf32>, tensor<6x1x1xf32>) -> tensor<2x6x6x5xf32>
      %t = nn.tanh %y : tensor<2x6x6x5xf32>
      %sq = nn.mul %t, %y : (tensor<2x6x6x5xf32>, tensor<2x6x6x5xf32>) -> tensor<2x6x6x5xf32>
      %l1 = nn.reduce_sum %sq {dims = array<i64: 0, 1, 2, 3>} : (tensor<2x6x6x5xf32>) -> tensor<f32>
      %z = nn.conv_transpose %v, %u {stride = array<i64: 1>, pad_low = array<i64: 1>, pad_high = array<i64: 0>, dilation = array<i64: 2>, groups = 1 : i64} : (tensor<2x3x4xf32>, tensor<3x2x3xf32>) -> tensor<2x2x7xf32>
      %tz = nn.tanh %z : tensor<2x2x7xf32>
      %sz = nn.mul %tz, %z : (tensor<2x2x7xf32>, tensor<2x2x7xf32>) -> tensor<2x2x7xf32>
      %l2 = nn.reduce_sum %sz {dims = array<i64: 0, 1, 2>} : (tensor<2x2x7xf32>) -> tensor<f32>
      %loss = nn.add %l1, %l2 : (tensor<f32>, tensor<f32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
)mlir");
}

TEST_F(AutodiffNumericTest, MaxPoolingRoutesToEachWindowsMaximum) {
  // Overlapping padded 3x3 windows (an input can be the maximum of several)
  // after a convolution, and a dilated 1-D pooling, through tanh.
  checkGradients(R"mlir(
fsdp.model @m {
  fsdp.module @root kind "Net" {
    fsdp.param @x : tensor<2x2x5x6xf32> init <zeros>
    fsdp.param @w : tensor<3x2x1x1xf32> init <zeros>
    fsdp.forward () -> tensor<f32> {
      %x = fsdp.get_param @x : tensor<2x2x5x6xf32>
      %w = fsdp.get_param @w : tensor<3x2x1x1xf32>
      %c = nn.conv %x, %w {stride = array<i64: 1, 1>, pad_low = array<i64: 0, 0>, pad_high = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x2x5x6xf32>, tensor<3x2x1x1xf32>) -> tensor<2x3x5x6xf32>
      %p = nn.max_pool %c {kernel = array<i64: 3, 3>, stride = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 1>} : (tensor<2x3x5x6xf32>) -> tensor<2x3x3x3xf32>
      %r = nn.reshape %p : tensor<2x3x3x3xf32> to tensor<2x3x9xf32>
      %q = nn.max_pool %r {kernel = array<i64: 2>, stride = array<i64: 2>, padding = array<i64: 1>, dilation = array<i64: 2>} : (tensor<2x3x9xf32>) -> tensor<2x3x5xf32>
      %t = nn.tanh %q : tensor<2x3x5xf32>
      %sq = nn.mul %t, %q : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
      %loss = nn.reduce_sum %sq {dims = array<i64: 0, 1, 2>} : (tensor<2x3x5xf32>) -> tensor<f32>
      fsdp.return %loss : tensor<f32>
    }
  }
}
)mlir");
}

} // namespace
