//===- StepTimeTest.cpp - the step-time model against a hand computation --===//
//
// predictStepTime on steps small enough to cost by hand from the machine
// profile's rates: a GEMM's FLOPs at the GEMM rate, an elementwise kernel's
// bytes at the memory bandwidth, a ring all-reduce's two passes at the
// link bandwidth plus a latency per ring step, and a fixed cost per call;
// ops on different streams overlap.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/StepTime.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

class StepTimeTest : public ::testing::Test {
protected:
  StepTimeTest() {
    context.loadDialect<FSDPDialect, nn::NNDialect, func::FuncDialect>();
    // Round numbers: 1 GFLOP/s, 1 GB/s, 5 us per ring step, 10 us per call.
    profile.gemmGflops = 1;
    profile.memoryGBps = 1;
    profile.linkGBps = 1;
    profile.linkLatencyUs = 5;
    profile.opOverheadUs = 10;
  }

  StepTime predict(const char *source) {
    module = parseSourceString<ModuleOp>(source, &context);
    EXPECT_TRUE(module) << "the test step does not parse";
    auto step = *module->getOps<func::FuncOp>().begin();
    return predictStepTime(step, profile);
  }

  MLIRContext context;
  MachineProfile profile;
  OwningOpRef<ModuleOp> module;
};

constexpr double kTolerance = 1e-12; // seconds

// A linear layer and a ReLU on the compute stream, one after the other; the
// return takes no time.
TEST_F(StepTimeTest, ComputeOpsAddTheirFlopsBytesAndCallCost) {
  StepTime t = predict(R"mlir(
    func.func @step(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
      %y = nn.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
      %z = nn.relu %y : tensor<4x16xf32>
      return %z : tensor<4x16xf32>
    }
  )mlir");
  // linear: 2 * rows 4 * out 16 * in 8 = 1024 FLOPs at 1 GFLOP/s, + 10 us.
  double linear = 1024 / 1e9 + 10e-6;
  // relu: reads and writes 4 * 16 f32 = 256 bytes each at 1 GB/s, + 10 us.
  double relu = 512 / 1e9 + 10e-6;
  EXPECT_NEAR(t.compute, linear + relu, kTolerance);
  EXPECT_NEAR(t.total, linear + relu, kTolerance);
  EXPECT_EQ(t.communication, 0.0);
  EXPECT_NEAR(t.exposed(), 0.0, kTolerance);
}

// A 16-bit GEMM runs at the 16-bit rate when the profile has one.
TEST_F(StepTimeTest, HalfWidthGemmsUseTheirOwnRate) {
  profile.gemmGflops16 = 4;
  StepTime t = predict(R"mlir(
    func.func @step(%x: tensor<4x8xbf16>, %w: tensor<16x8xbf16>) -> tensor<4x16xbf16> {
      %y = nn.linear %x, %w : (tensor<4x8xbf16>, tensor<16x8xbf16>) -> tensor<4x16xbf16>
      return %y : tensor<4x16xbf16>
    }
  )mlir");
  EXPECT_NEAR(t.total, 1024 / 4e9 + 10e-6, kTolerance);
}

// An all-reduce over 4 ranks runs on its own stream beside the GEMM: the
// step takes the longer of the two, and the part of it the compute stream
// waits is exposed.
TEST_F(StepTimeTest, CollectivesOverlapComputeOnTheirStream) {
  StepTime t = predict(R"mlir(
    func.func @step(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %g: tensor<256xf32>)
        -> (tensor<4x16xf32>, tensor<256xf32>) {
      %y = nn.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
      %r = fsdp.all_reduce %g mesh<shard = 4> group world dtype f32 sum : tensor<256xf32>
      return %y, %r : tensor<4x16xf32>, tensor<256xf32>
    }
  )mlir");
  double linear = 1024 / 1e9 + 10e-6;
  // Ring all-reduce of 1024 bytes over 4 ranks: two passes (reduce-scatter
  // and all-gather), each 3 steps moving 3/4 of the bytes at 1 GB/s and
  // paying 5 us per step; + 10 us for the call.
  double pass = 3.0 / 4.0 * 1024 / 1e9 + 3 * 5e-6;
  double allReduce = 2 * pass + 10e-6;
  EXPECT_NEAR(t.compute, linear, kTolerance);
  EXPECT_NEAR(t.communication, allReduce, kTolerance);
  EXPECT_NEAR(t.total, allReduce, kTolerance);
  EXPECT_NEAR(t.exposed(), allReduce - linear, kTolerance);
}

} // namespace
