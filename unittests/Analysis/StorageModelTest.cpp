//===- StorageModelTest.cpp - one storage model for report and plan -------===//
//
// The storage model of Analysis (StorageAliasOpInterface, StorageLiveness.h)
// is what the step report and the lowering's memory plan share: ops name the
// operand whose storage a result reuses, and one walk gives each storage
// root's first and last use. These tests check the interface's answers and
// that, on a step where the two consumers' own bookkeeping cannot differ
// (every tensor a multiple of the arena's alignment, no flat-gradient slots,
// no constants), the report's peak is the plan's live peak.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Conversion/FSDPToRT/MemoryPlan.h"
#include "../../lib/Conversion/FSDPToRT/StepLowering.h"

#include "fsdp/Dialect/FSDP/Analysis/StepReport.h"
#include "fsdp/Dialect/FSDP/Analysis/StorageAlias.h"
#include "fsdp/Dialect/FSDP/Analysis/StorageLiveness.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"
#include "fsdp/Interfaces/StorageAliasOpInterface.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

class StorageModelTest : public ::testing::Test {
protected:
  StorageModelTest() {
    context.loadDialect<FSDPDialect, nn::NNDialect, arith::ArithDialect,
                        func::FuncDialect>();
  }

  func::FuncOp parseStep(const char *text) {
    module = parseSourceString<ModuleOp>(text, &context);
    if (!module)
      return {};
    return *module->getOps<func::FuncOp>().begin();
  }

  /// The op at `index` in the step's block (0: the first op).
  static Operation *opAt(func::FuncOp step, unsigned index) {
    return &*std::next(step.getBody().front().begin(), index);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

// Renames, in-place updates and ops that own their storage, as the
// interface states them and storageAliasOf follows them.
TEST_F(StorageModelTest, InterfaceNamesTheReusedOperand) {
  func::FuncOp step = parseStep(R"mlir(
func.func @f(%x: tensor<16xf32>, %flat: tensor<32xf32>, %w: tensor<4xf32>,
             %b: tensor<4xf32>, %rm: tensor<4xf32>, %rv: tensor<4xf32>,
             %in: tensor<8x4xf32>) {
  %r = nn.reshape %x : tensor<16xf32> to tensor<4x4xf32>
  %v = fsdp.view %flat[16] : tensor<32xf32> -> tensor<4x4xf32>
  %y = nn.relu %x : tensor<16xf32>
  %o, %m, %s = nn.batch_norm %in, %w, %b, %rm, %rv {training} : (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}
)mlir");
  ASSERT_TRUE(step);
  Operation *reshape = opAt(step, 0), *view = opAt(step, 1),
            *relu = opAt(step, 2), *batchNorm = opAt(step, 3),
            *ret = opAt(step, 4);

  // A reshape: result 0 is operand 0's storage, and it runs nothing.
  auto alias = dyn_cast<StorageAliasOpInterface>(reshape);
  ASSERT_TRUE(alias) << "nn.reshape should declare StorageAliasOpInterface";
  EXPECT_EQ(alias.getReusedOperand(0), &reshape->getOpOperand(0));
  EXPECT_TRUE(alias.isStorageRename());
  EXPECT_FALSE(alias.reusesOnlyDeadOperand(0));
  EXPECT_EQ(storageAliasOf(reshape->getResult(0)), reshape->getOperand(0));

  // A view: its flat parameter's storage.
  auto viewAlias = dyn_cast<StorageAliasOpInterface>(view);
  ASSERT_TRUE(viewAlias) << "fsdp.view should declare StorageAliasOpInterface";
  EXPECT_EQ(viewAlias.getReusedOperand(0), &view->getOpOperand(0));
  EXPECT_TRUE(viewAlias.isStorageRename());

  // A relu owns its result: no interface, no alias.
  EXPECT_FALSE(isa<StorageAliasOpInterface>(relu));
  EXPECT_FALSE(storageAliasOf(relu->getResult(0)));

  // Batch norm: its output is its own; the running statistics are updated
  // in place, and the op is no rename.
  auto bn = dyn_cast<StorageAliasOpInterface>(batchNorm);
  ASSERT_TRUE(bn);
  EXPECT_EQ(bn.getReusedOperand(0), nullptr);
  EXPECT_EQ(bn.getReusedOperand(1), &batchNorm->getOpOperand(3));
  EXPECT_EQ(bn.getReusedOperand(2), &batchNorm->getOpOperand(4));
  EXPECT_FALSE(bn.isStorageRename());
  EXPECT_EQ(storageAliasOf(batchNorm->getResult(2)), batchNorm->getOperand(4));

  // The one "emits nothing" list: renames and the return, not kernels.
  EXPECT_TRUE(emitsNothing(reshape));
  EXPECT_TRUE(emitsNothing(view));
  EXPECT_TRUE(emitsNothing(ret));
  EXPECT_FALSE(emitsNothing(relu));
  EXPECT_FALSE(emitsNothing(batchNorm));
  EXPECT_TRUE(isStorageFree(reshape));
  EXPECT_FALSE(isStorageFree(ret));
}

// Every tensor is 64 bytes (the arena's alignment), the loss is computed
// first: the report (every op, arguments and the loss live from their
// definition) and the plan (persistent argument and loss, aligned
// transients) count the same bytes, so their peaks must be equal. %a lives
// until %d reads it through the reshape %r: both must follow the rename.
constexpr const char *kSmallStep = R"mlir(
func.func @step(%x: tensor<16xf32>) -> (tensor<16xf32> {fsdp.loss}) {
  %l = nn.relu %x : tensor<16xf32>
  %a = nn.relu %x : tensor<16xf32>
  %r = nn.reshape %a : tensor<16xf32> to tensor<4x4xf32>
  %b = nn.relu %a : tensor<16xf32>
  %c = nn.add %a, %b : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %d = nn.relu %r : tensor<4x4xf32>
  %f = nn.add %c, %b : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %dr = nn.reshape %d : tensor<4x4xf32> to tensor<16xf32>
  %e = nn.add %f, %dr : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  return %l : tensor<16xf32>
}
)mlir";

TEST_F(StorageModelTest, ReportPeakIsThePlansLivePeak) {
  func::FuncOp step = parseStep(kSmallStep);
  ASSERT_TRUE(step);
  ASSERT_EQ(kArenaAlignment, 64) << "the step's tensors are sized for it";
  Block &body = step.getBody().front();
  Value a = opAt(step, 1)->getResult(0);

  // The shared walk: %a from its definition (op 1) to %d's read of %r
  // (op 5), in both the report's and the lowering's uses.
  StorageSpans all = storageSpans(body, StorageUses::AllOps);
  StorageSpans runtime = storageSpans(body, StorageUses::Runtime);
  ASSERT_TRUE(all.count(a) && runtime.count(a));
  EXPECT_EQ(all.lookup(a).first, 1);
  EXPECT_EQ(all.lookup(a).last, 5);
  EXPECT_EQ(runtime.lookup(a).first, 1);
  EXPECT_EQ(runtime.lookup(a).last, 5);
  // The renames own nothing: they are not roots.
  EXPECT_FALSE(all.count(opAt(step, 2)->getResult(0)));

  FailureOr<StepReport> report = analyzeStep(step, MachineProfile());
  ASSERT_TRUE(succeeded(report));
  FailureOr<StepLayout> layout = layOutStep(step);
  ASSERT_TRUE(succeeded(layout));

  // %x and %l (persistent) and, at op 5, %a, %b, %c, %d: 6 x 64 bytes, as
  // at op 6 (%b, %c, %d, %f); the first maximum is op 5.
  EXPECT_EQ(report->peakBytes, layout->livePeakBytes)
      << "the report's peak and the memory plan's live peak come from the "
         "same walk";
  EXPECT_EQ(report->peakBytes, 6 * 64);
  EXPECT_EQ(report->peakIndex, 5);
  EXPECT_EQ(layout->persistentBytes, 2 * 64); // %x and the loss
}

} // namespace
