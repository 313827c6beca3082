//===- NNBuildersTest.cpp - nn ops built from C++ infer their types --------===//
//
// Passes (autodiff, sharding) build nn ops without spelling result types;
// these tests pin the inferred types and the diagnostics of bad operands.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/NN/IR/NNDialect.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

class NNBuildersTest : public ::testing::Test {
protected:
  NNBuildersTest() : builder(&context) {
    context.loadDialect<nn::NNDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }

  RankedTensorType f32(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getF32Type());
  }
  RankedTensorType i64(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getI64Type());
  }

  /// Values of the given types: arguments of a fresh function.
  SmallVector<Value> arguments(ArrayRef<Type> types) {
    auto func = func::FuncOp::create(builder, builder.getUnknownLoc(), "f",
                                     builder.getFunctionType(types, {}));
    Block *entry = func.addEntryBlock();
    builder.setInsertionPointToStart(entry);
    return SmallVector<Value>(entry->getArguments());
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(NNBuildersTest, LinearInfersOutFeatures) {
  auto args = arguments({f32({2, 4, 8}), f32({16, 8}), f32({16})});
  auto op = nn::LinearOp::create(builder, builder.getUnknownLoc(), args[0],
                                 args[1], args[2]);
  EXPECT_EQ(op.getType(), f32({2, 4, 16}));
  EXPECT_TRUE(succeeded(verify(op)));
}

TEST_F(NNBuildersTest, BroadcastingAddInfersTheBroadcastShape) {
  auto args = arguments({f32({4, 1, 32}), f32({16, 32})});
  auto op = nn::AddOp::create(builder, builder.getUnknownLoc(), args[0],
                              args[1]);
  EXPECT_EQ(op.getType(), f32({4, 16, 32}));
}

TEST_F(NNBuildersTest, MatmulTransposesAndBroadcastsBatch) {
  auto args = arguments({f32({2, 3, 5, 8}), f32({7, 8})});
  auto op = nn::MatmulOp::create(builder, builder.getUnknownLoc(), args[0],
                                 args[1], /*transpose_lhs=*/false,
                                 /*transpose_rhs=*/true);
  EXPECT_EQ(op.getType(), f32({2, 3, 5, 7}));
}

TEST_F(NNBuildersTest, ReductionsDropOrKeepDims) {
  auto args = arguments({f32({2, 3, 4})});
  auto all = nn::ReduceSumOp::create(builder, builder.getUnknownLoc(), args[0],
                                     builder.getDenseI64ArrayAttr({0, 1, 2}),
                                     /*keepdim=*/false);
  EXPECT_EQ(all.getType(), f32({}));
  auto kept = nn::ReduceMeanOp::create(builder, builder.getUnknownLoc(),
                                       args[0],
                                       builder.getDenseI64ArrayAttr({-1}),
                                       /*keepdim=*/true);
  EXPECT_EQ(kept.getType(), f32({2, 3, 1}));
}

TEST_F(NNBuildersTest, SplitInfersEveryChunk) {
  auto args = arguments({f32({2, 16, 96})});
  auto op = nn::SplitOp::create(builder, builder.getUnknownLoc(), args[0],
                                /*dim=*/2,
                                builder.getDenseI64ArrayAttr({32, 32, 32}));
  ASSERT_EQ(op.getNumResults(), 3u);
  for (Value result : op.getResults())
    EXPECT_EQ(result.getType(), f32({2, 16, 32}));
}

TEST_F(NNBuildersTest, TransposeConcatEmbeddingAndLosses) {
  auto args = arguments({f32({2, 3, 4}), f32({2, 5, 4}), i64({2, 3}),
                         f32({10, 4}), f32({6, 10}), i64({6})});
  Location loc = builder.getUnknownLoc();
  auto transposed = nn::TransposeOp::create(
      builder, loc, args[0], builder.getDenseI64ArrayAttr({2, 0, 1}));
  EXPECT_EQ(transposed.getType(), f32({4, 2, 3}));
  auto concat = nn::ConcatOp::create(builder, loc,
                                     ValueRange{args[0], args[1]}, /*dim=*/1);
  EXPECT_EQ(concat.getType(), f32({2, 8, 4}));
  auto embedded = nn::EmbeddingOp::create(builder, loc, args[2], args[3],
                                          /*padding_idx=*/IntegerAttr());
  EXPECT_EQ(embedded.getType(), f32({2, 3, 4}));
  auto loss = nn::CrossEntropyOp::create(builder, loc, args[4], args[5]);
  EXPECT_EQ(loss.getType(), f32({}));
  EXPECT_EQ(loss.getReduction(), nn::Reduction::mean);
  EXPECT_EQ(static_cast<int64_t>(loss.getIgnoreIndex()), -100);
}

TEST_F(NNBuildersTest, UnaryOpsKeepTheOperandType) {
  auto args = arguments({f32({4, 16})});
  Location loc = builder.getUnknownLoc();
  EXPECT_EQ(nn::ReluOp::create(builder, loc, args[0]).getType(), f32({4, 16}));
  EXPECT_EQ(nn::ScaleOp::create(builder, loc, args[0], builder.getF64FloatAttr(0.5)).getType(),
            f32({4, 16}));
  EXPECT_EQ(nn::SoftmaxOp::create(builder, loc, args[0], -1).getType(),
            f32({4, 16}));
}

TEST_F(NNBuildersTest, AttentionSupportsGroupedQueryHeads) {
  auto args = arguments({f32({2, 16, 32}), f32({2, 8, 16})});
  nn::AttentionOp::Properties properties;
  properties.num_heads = builder.getI64IntegerAttr(4);
  properties.num_kv_heads = builder.getI64IntegerAttr(2);
  // The adaptor keeps a reference to its operands: keep them alive.
  SmallVector<Value> operands = {args[0], args[1], args[1]};
  nn::AttentionOp::Adaptor adaptor(operands, /*attrs=*/nullptr, properties);
  SmallVector<Type> types;
  ASSERT_TRUE(succeeded(nn::AttentionOp::inferReturnTypes(
      &context, builder.getUnknownLoc(), adaptor, types)));
  EXPECT_EQ(types.front(), f32({2, 16, 32}));
}

TEST_F(NNBuildersTest, BadShapesFailWithADiagnosticInsteadOfAborting) {
  auto args = arguments({f32({4, 7}), f32({16, 8})});
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  SmallVector<Value> operands = {args[0], args[1]};
  nn::LinearOp::Adaptor adaptor(operands);
  SmallVector<Type> types;
  EXPECT_TRUE(failed(nn::LinearOp::inferReturnTypes(
      &context, builder.getUnknownLoc(), adaptor, types)));
  EXPECT_EQ(message, "'nn.linear' op weight has 8 input features but the "
                     "input's last dimension is 7");
}

} // namespace
