//===- FSDPModelTest.cpp - the model tree API passes rely on ---------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

constexpr const char *kModel = R"mlir(
fsdp.model @net {
  fsdp.module @root kind "Net" unit {
    fsdp.module @blocks kind "ModuleList" {
      fsdp.module @"0" kind "Linear" unit<reshard_after_forward = false> {
        fsdp.param @weight : tensor<4x4xf32> init <normal(0.0, 0.02)>
        fsdp.forward (%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
          %w = fsdp.get_param @weight : tensor<4x4xf32>
          %y = nn.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
          fsdp.return %y : tensor<2x4xf32>
        }
      }
    }
    fsdp.forward (%x: tensor<2x4xf32>) -> tensor<f32> {
      %y = fsdp.call @blocks::@"0"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
      %l = nn.reduce_sum %y {dims = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
      fsdp.return %l : tensor<f32>
    }
  }
}
)mlir";

class FSDPModelTest : public ::testing::Test {
protected:
  FSDPModelTest() {
    context.loadDialect<fsdp::FSDPDialect, nn::NNDialect,
                        arith::ArithDialect>();
  }
  MLIRContext context;
};

TEST_F(FSDPModelTest, TreeNamesUnitsAndForwards) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModel, &context);
  ASSERT_TRUE(module);
  auto model = *module->getOps<fsdp::ModelOp>().begin();
  fsdp::NNModuleOp root = model.getRoot();
  ASSERT_TRUE(root);
  EXPECT_TRUE(root.isRoot());
  EXPECT_TRUE(root.isUnit());
  EXPECT_EQ(root.getQualifiedName(), "");
  EXPECT_TRUE(root.getForward());

  std::vector<std::string> names;
  model.walk([&](fsdp::NNModuleOp m) { names.push_back(m.getQualifiedName()); });
  EXPECT_EQ(names, (std::vector<std::string>{"blocks.0", "blocks", ""}));

  auto blocks = cast<fsdp::NNModuleOp>(
      SymbolTable::lookupSymbolIn(root, StringAttr::get(&context, "blocks")));
  EXPECT_FALSE(blocks.isUnit());
  EXPECT_FALSE(blocks.getForward()) << "containers have no forward";
  auto linear = cast<fsdp::NNModuleOp>(&blocks.getBody().front().front());
  ASSERT_TRUE(linear.isUnit());
  auto reshard =
      dyn_cast_or_null<BoolAttr>(linear.getUnitAttr().getReshardAfterForward());
  ASSERT_TRUE(reshard);
  EXPECT_FALSE(reshard.getValue());
}

TEST_F(FSDPModelTest, MeshGroupSizes) {
  auto flat = fsdp::MeshAttr::get(&context, /*replicate=*/0, /*shard=*/4);
  EXPECT_EQ(flat.getRank(), 1u);
  EXPECT_EQ(flat.getWorldSize(), 4);
  EXPECT_EQ(*flat.getGroupSize(fsdp::MeshGroup::shard), 4);
  EXPECT_TRUE(failed(flat.getGroupSize(fsdp::MeshGroup::replicate)));

  auto hybrid = fsdp::MeshAttr::get(&context, /*replicate=*/2, /*shard=*/4);
  EXPECT_EQ(hybrid.getRank(), 2u);
  EXPECT_EQ(*hybrid.getGroupSize(fsdp::MeshGroup::world), 8);
  EXPECT_EQ(*hybrid.getGroupSize(fsdp::MeshGroup::replicate), 2);
}

TEST_F(FSDPModelTest, InitializerArity) {
  EXPECT_EQ(fsdp::InitAttr::getArity(fsdp::InitKind::zeros), 0u);
  EXPECT_EQ(fsdp::InitAttr::getArity(fsdp::InitKind::normal), 2u);
  EXPECT_EQ(fsdp::InitAttr::getArity(fsdp::InitKind::trunc_normal), 4u);
  auto init = fsdp::InitAttr::get(
      &context, fsdp::InitKind::kaiming_uniform,
      DenseF64ArrayAttr::get(&context, {2.23606797749979}));
  EXPECT_TRUE(init.needsFans());
}

} // namespace
