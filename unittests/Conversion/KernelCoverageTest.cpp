//===- KernelCoverageTest.cpp - every nn op lowers to something -----------===//
//
// The completeness check of adding an op (docs/Extending.md): every
// operation the nn dialect registers either has a kernel emitter in
// convert-fsdp-to-rt (hasKernelEmitter, read from the table emitKernel
// dispatches through) or is one of the ops that emit nothing at run time
// (emitsNothing, StorageLiveness.h: the list the lowering, the report and
// the step-time model share). A new nn op with neither fails here, naming
// it, instead of at the first program that uses it.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Conversion/FSDPToRT/CallBuilder.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageLiveness.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Dialect/NN/IR/NNDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace mlir::fsdp;

namespace {

class KernelCoverageTest : public ::testing::Test {
protected:
  KernelCoverageTest() {
    context.loadDialect<nn::NNDialect, FSDPDialect, func::FuncDialect,
                        arith::ArithDialect>();
  }

  /// emitsNothing asks an op, not a name: a bare op of that name (no
  /// operands, results or attributes) answers for its kind.
  bool emitsNothingByName(RegisteredOperationName name) {
    OperationState state(UnknownLoc::get(&context), name);
    Operation *op = Operation::create(state);
    bool nothing = emitsNothing(op);
    op->destroy();
    return nothing;
  }

  MLIRContext context;
};

TEST_F(KernelCoverageTest, EveryNNOpHasAKernelEmitterOrEmitsNothing) {
  int checked = 0, emitting = 0;
  std::string missing;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "nn")
      continue;
    ++checked;
    if (hasKernelEmitter(name))
      ++emitting;
    else if (!emitsNothingByName(name))
      missing += " " + name.getStringRef().str();
  }
  EXPECT_TRUE(missing.empty())
      << "nn ops with neither a kernel emitter (KernelCalls<Family>.cpp) nor "
         "a place in emitsNothing (StorageLiveness.h):"
      << missing;
  // Not vacuous: the nn dialect was iterated, and nearly all of it lowers.
  EXPECT_GT(checked, 40) << "nn ops checked";
  EXPECT_GT(emitting, 40) << "nn ops with a kernel emitter";
}

// Each predicate answers both ways: a rename emits nothing and has no
// kernel, a kernel op is no rename, and ops without a lowering have none.
TEST_F(KernelCoverageTest, ThePredicatesDistinguishOps) {
  auto name = [&](StringRef op) {
    std::optional<RegisteredOperationName> found =
        RegisteredOperationName::lookup(op, &context);
    EXPECT_TRUE(found.has_value()) << op.str() << " is not registered";
    return *found;
  };
  EXPECT_FALSE(hasKernelEmitter(name("nn.reshape")));
  EXPECT_TRUE(emitsNothingByName(name("nn.reshape")));
  EXPECT_TRUE(hasKernelEmitter(name("nn.linear")));
  EXPECT_FALSE(emitsNothingByName(name("nn.linear")));
  EXPECT_FALSE(hasKernelEmitter(name("func.func")));
  EXPECT_FALSE(hasKernelEmitter(name("fsdp.model")));
}

} // namespace
