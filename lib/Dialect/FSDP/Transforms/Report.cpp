//===- Report.cpp - fsdp-report: what a step costs each rank -------------===//

#include "fsdp/Dialect/FSDP/Analysis/StepReport.h"
#include "fsdp/Dialect/FSDP/IR/TrainStep.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cmath>

namespace mlir::fsdp {
#define GEN_PASS_DEF_FSDPREPORTPASS
#include "fsdp/Dialect/FSDP/Transforms/Passes.h.inc"
} // namespace mlir::fsdp

using namespace mlir;
using namespace mlir::fsdp;

namespace {

struct ReportPass : public fsdp::impl::FSDPReportPassBase<ReportPass> {
  using FSDPReportPassBase::FSDPReportPassBase;

  void runOnOperation() override {
    FailureOr<MachineProfile> profile =
        namedMachineProfile(machine, getOperation().getLoc(), "fsdp-report");
    if (failed(profile))
      return signalPassFailure();
    // Each rate given (not -1) replaces the machine's.
    struct Override {
      const char *name;
      double value;
      double &field;
      bool zeroAllowed;
    } overrides[] = {
        {"gemm-gflops", gemmGflops, profile->gemmGflops, false},
        {"gemm-gflops-16bit", gemmGflops16, profile->gemmGflops16, true},
        {"memory-gbps", memoryGBps, profile->memoryGBps, false},
        {"link-gbps", linkGBps, profile->linkGBps, false},
        {"link-latency-us", linkLatencyUs, profile->linkLatencyUs, true},
        {"op-overhead-us", opOverheadUs, profile->opOverheadUs, true},
        {"host-link-gbps", hostLinkGBps, profile->hostLinkGBps, true}};
    for (Override &o : overrides) {
      if (o.value == -1.0)
        continue;
      bool valid = std::isfinite(o.value) &&
                   (o.zeroAllowed ? o.value >= 0 : o.value > 0);
      if (!valid) {
        emitError(getOperation().getLoc(), "fsdp-report: ")
            << o.name << " must be a "
            << (o.zeroAllowed ? "non-negative" : "positive")
            << " number (or -1: the machine's), got " << o.value;
        return signalPassFailure();
      }
      o.field = o.value;
    }
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file = openOutputFile(output, &error);
    if (!file) {
      emitError(getOperation().getLoc(), "fsdp-report: ") << error;
      return signalPassFailure();
    }
    llvm::json::Array steps;
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      func::FuncOp step = getTrainStep(model);
      if (!step || !step->hasAttr(kMeshAttr)) {
        model.emitOpError("has no sharded train step to report on; run "
                          "fsdp-shard first");
        return signalPassFailure();
      }
      FailureOr<StepReport> report = analyzeStep(step, *profile);
      if (failed(report))
        return signalPassFailure();
      if (json)
        steps.push_back(stepReportToJson(model, step, *report));
      else
        printStepReport(file->os(), model, step, *report);
    }
    if (json)
      file->os() << llvm::formatv("{0:2}", llvm::json::Value(llvm::json::Object{
                                               {"steps", std::move(steps)}}))
                 << "\n";
    file->keep();
    markAllAnalysesPreserved();
  }
};

} // namespace
