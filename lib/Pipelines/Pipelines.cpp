//===- Pipelines.cpp - the named fsdp pipeline -----------------------------===//

#include "fsdp/Pipelines/Pipelines.h"
#include "fsdp/Conversion/Passes.h"
#include "fsdp/Dialect/FSDP/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::fsdp;

static ConvertFSDPToRTPassOptions
loweringOptions(const FSDPPipelineOptions &options) {
  ConvertFSDPToRTPassOptions lowering;
  lowering.machine = options.machine;
  lowering.fusedOptimizer = options.fusedOptimizer;
  lowering.lrSchedule = options.lrSchedule;
  lowering.warmupSteps = options.warmupSteps;
  lowering.decaySteps = options.decaySteps;
  lowering.minLrRatio = options.minLrRatio;
  return lowering;
}

/// Activation checkpointing through CPU offload: from the unsharded train
/// step to the scheduled, sharded one whose peak the report prints.
static void addCheckpointingToSchedule(OpPassManager &pm,
                                       const FSDPPipelineOptions &options) {
  // Always: units may ask for checkpointing in the IR
  // (#fsdp.unit<activation_checkpointing = true | selective>).
  FSDPCheckpointActivationsPassOptions checkpointing;
  checkpointing.kinds.assign(options.activationCheckpointing.begin(),
                             options.activationCheckpointing.end());
  checkpointing.policy = options.activationCheckpointingPolicy;
  pm.addPass(createFSDPCheckpointActivationsPass(checkpointing));
  if (options.keepAttentionStats)
    pm.addNestedPass<func::FuncOp>(createFSDPKeepAttentionStatsPass());

  FSDPShardPassOptions shard;
  shard.worldSize = options.worldSize;
  shard.strategy = options.shardingStrategy;
  shard.shardGroupSize = options.shardGroupSize;
  pm.addPass(createFSDPShardPass(shard));

  FSDPInsertCollectivesPassOptions collectives;
  collectives.reshardRootAfterForward = options.reshardRootAfterForward;
  collectives.reshardAfterBackward = options.reshardAfterBackward;
  pm.addPass(createFSDPInsertCollectivesPass(collectives));

  FSDPPrefetchPassOptions prefetch;
  prefetch.forwardPrefetch = options.forwardPrefetch;
  prefetch.backwardPrefetch = options.backwardPrefetch;
  prefetch.limitAllGathers = options.limitAllGathers;
  pm.addPass(createFSDPPrefetchPass(prefetch));
  if (options.cpuOffload)
    pm.addPass(createFSDPCpuOffloadPass());
}

void fsdp::buildFSDPPipeline(OpPassManager &pm,
                             const FSDPPipelineOptions &options) {
  FSDPAutoWrapPassOptions wrap;
  wrap.policy = options.autoWrapPolicy;
  wrap.minParams = options.minParams;
  wrap.kinds.assign(options.wrapKinds.begin(), options.wrapKinds.end());
  pm.addPass(createFSDPAutoWrapPass(wrap));

  // As PyTorch's MixedPrecision, any one field asks for the policy; the
  // parameters stay f32 unless param-dtype says otherwise.
  if (!options.paramDtype.empty() || !options.reduceDtype.empty() ||
      !options.bufferDtype.empty() || options.keepLowPrecisionGrads) {
    FSDPMixedPrecisionPassOptions precision;
    precision.paramDtype =
        options.paramDtype.empty() ? "f32" : options.paramDtype.getValue();
    precision.reduceDtype = options.reduceDtype;
    precision.bufferDtype = options.bufferDtype;
    precision.keepLowPrecisionGrads = options.keepLowPrecisionGrads;
    pm.addPass(createFSDPMixedPrecisionPass(precision));
  }

  if (options.packAttention)
    pm.addPass(createFSDPPackAttentionPass());
  if (options.padVocab > 0) {
    FSDPPadVocabPassOptions vocab;
    vocab.multiple = options.padVocab;
    pm.addPass(createFSDPPadVocabPass(vocab));
  }

  FSDPBuildTrainStepPassOptions step;
  step.optimizer = options.optimizer;
  step.lr = options.lr;
  step.momentum = options.momentum;
  step.dampening = options.dampening;
  step.nesterov = options.nesterov;
  step.beta1 = options.beta1;
  step.beta2 = options.beta2;
  step.beta2Decay = options.beta2Decay;
  step.eps1 = options.eps1;
  step.eps2 = options.eps2;
  step.clipThreshold = options.clipThreshold;
  step.eps = options.eps;
  step.weightDecay = options.weightDecay;
  step.paramGroups.assign(options.paramGroups.begin(),
                          options.paramGroups.end());
  step.noDecay1d = options.noDecay1d;
  step.clipGradNorm = options.clipGradNorm;
  step.clipNormType = options.clipNormType;
  step.gradAccumSteps = options.gradAccumSteps;
  step.noSync = options.noSync;
  step.lossScale = options.lossScale;
  step.mode = options.mode;
  step.fuseAddLayerNorm = options.fuseAddLayerNorm;
  step.fuseBiasGelu = options.fuseBiasGelu;
  pm.addPass(createFSDPBuildTrainStepPass(step));

  // The passes from checkpointing to offload: what the memory budget's
  // search runs on each candidate, and then the pipeline itself.
  OpPassManager recomputeToSchedule(ModuleOp::getOperationName());
  addCheckpointingToSchedule(recomputeToSchedule, options);
  if (!options.memoryBudget.empty()) {
    FSDPFitMemoryBudgetPassOptions fit;
    fit.budget = options.memoryBudget;
    std::string evaluation;
    llvm::raw_string_ostream os(evaluation);
    recomputeToSchedule.printAsTextualPipeline(os);
    fit.evaluation = evaluation;
    // A lowered program's arena, which the runtime allocates, must fit.
    if (options.lower) {
      OpPassManager lowering(ModuleOp::getOperationName());
      lowering.addPass(createConvertFSDPToRTPass(loweringOptions(options)));
      std::string arenaEvaluation;
      llvm::raw_string_ostream arenaOs(arenaEvaluation);
      lowering.printAsTextualPipeline(arenaOs);
      fit.arenaEvaluation = arenaEvaluation;
    }
    // The budget chooses what to recompute; these would choose too.
    if (!options.activationCheckpointing.empty())
      fit.conflictingOptions.push_back("activation-checkpointing");
    if (options.activationCheckpointingPolicy.hasValue())
      fit.conflictingOptions.push_back("activation-checkpointing-policy");
    fit.report = options.report;
    fit.machine = options.machine;
    pm.addPass(createFSDPFitMemoryBudgetPass(fit));
  }
  addCheckpointingToSchedule(pm, options);

  if (options.report) {
    FSDPReportPassOptions report;
    report.machine = options.machine;
    pm.addPass(createFSDPReportPass(report));
  }
  if (options.lower)
    buildFSDPLowerPipeline(pm, loweringOptions(options));
}

void fsdp::buildFSDPLowerPipeline(OpPassManager &pm,
                                  const ConvertFSDPToRTPassOptions &options) {
  pm.addPass(createConvertFSDPToRTPass(options));
  pm.addPass(createConvertRTToLLVMPass());
}

void fsdp::registerFSDPPipelines() {
  PassPipelineRegistration<FSDPPipelineOptions>(
      "fsdp-pipeline",
      "Model to scheduled FSDP train step: auto-wrap, train step, shard, "
      "collectives, prefetch (options spelled like PyTorch FSDP's)",
      buildFSDPPipeline);
  PassPipelineRegistration<>(
      "fsdp-lower-pipeline",
      "Scheduled FSDP train step to LLVM for fsdp-run: convert-fsdp-to-rt, "
      "convert-rt-to-llvm",
      [](OpPassManager &pm) { buildFSDPLowerPipeline(pm); });
}
