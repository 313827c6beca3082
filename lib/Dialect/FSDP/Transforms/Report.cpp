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
    MachineProfile profile{gemmGflops,    memoryGBps,  linkGBps,
                           linkLatencyUs, opOverheadUs, hostLinkGBps};
    std::pair<const char *, double> rates[] = {{"gemm-gflops", gemmGflops},
                                               {"memory-gbps", memoryGBps},
                                               {"link-gbps", linkGBps}};
    std::pair<const char *, double> costs[] = {
        {"link-latency-us", linkLatencyUs},
        {"op-overhead-us", opOverheadUs},
        {"host-link-gbps", hostLinkGBps}};
    for (auto [name, value] : rates)
      if (!(value > 0) || !std::isfinite(value)) {
        emitError(getOperation().getLoc(), "fsdp-report: ")
            << name << " must be a positive number, got " << value;
        return signalPassFailure();
      }
    for (auto [name, value] : costs)
      if (!(value >= 0) || !std::isfinite(value)) {
        emitError(getOperation().getLoc(), "fsdp-report: ")
            << name << " must be a non-negative number, got " << value;
        return signalPassFailure();
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
      FailureOr<StepReport> report = analyzeStep(step, profile);
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
