//===- Pipelines.h - the named fsdp pipeline ---------------------*- C++ -*-===//
//
// fsdp-pipeline: the passes of every stage, from auto-wrapping to the
// runtime calls, with PyTorch FSDP's arguments as options. It spans the
// fsdp passes and the conversions, so it sits above both (lib/Pipelines).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_PIPELINES_PIPELINES_H
#define FSDP_PIPELINES_PIPELINES_H

#include "fsdp/Conversion/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::fsdp {

/// Options of `fsdp-pipeline`, spelled like PyTorch FSDP's arguments.
struct FSDPPipelineOptions : public PassPipelineOptions<FSDPPipelineOptions> {
  Option<int64_t> worldSize{*this, "world-size", llvm::cl::desc("Number of ranks"),
                            llvm::cl::init(1)};
  Option<std::string> shardingStrategy{
      *this, "sharding-strategy",
      llvm::cl::desc("full-shard | shard-grad-op | no-shard | hybrid-shard "
                     "| hybrid-shard-zero2"),
      llvm::cl::init("full-shard")};
  Option<int64_t> shardGroupSize{
      *this, "shard-group-size",
      llvm::cl::desc("hybrid-shard(-zero2): ranks per shard group"),
      llvm::cl::init(0)};
  Option<std::string> autoWrapPolicy{
      *this, "auto-wrap-policy",
      llvm::cl::desc("size | module-kind | always | none"),
      llvm::cl::init("none")};
  Option<int64_t> minParams{*this, "min-params",
                            llvm::cl::desc("size policy threshold"),
                            llvm::cl::init(100000000)};
  ListOption<std::string> wrapKinds{
      *this, "wrap-kinds", llvm::cl::desc("module-kind policy: kinds to wrap")};
  ListOption<std::string> activationCheckpointing{
      *this, "activation-checkpointing",
      llvm::cl::desc("Kinds of the units whose forward the backward "
                     "recomputes (checkpoint_wrapper), or all")};
  Option<std::string> activationCheckpointingPolicy{
      *this, "activation-checkpointing-policy",
      llvm::cl::desc("What those units recompute: unit (the whole forward) "
                     "| selective (all but matmuls and attention)"),
      llvm::cl::init("unit")};
  Option<std::string> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Device memory per rank the planned peak must fit "
                     "(bytes, or with a KiB / MiB / GiB suffix): the "
                     "compiler chooses which units recompute what, or "
                     "for mode=eval whether the weights stay whole "
                     "across steps (fsdp-fit-memory-budget)"),
      llvm::cl::init("")};
  Option<bool> forwardPrefetch{*this, "forward-prefetch",
                               llvm::cl::desc("Prefetch in the forward"),
                               llvm::cl::init(false)};
  Option<std::string> backwardPrefetch{
      *this, "backward-prefetch", llvm::cl::desc("none | pre | post"),
      llvm::cl::init("pre")};
  Option<int64_t> limitAllGathers{
      *this, "limit-all-gathers",
      llvm::cl::desc("Gathered units awaiting their free (0: no limit)"),
      llvm::cl::init(2)};
  Option<bool> reshardRootAfterForward{
      *this, "reshard-root-after-forward",
      llvm::cl::desc("Free the root unit after the forward too"),
      llvm::cl::init(false)};
  Option<bool> reshardAfterBackward{
      *this, "reshard-after-backward",
      llvm::cl::desc("Free each unit after a micro-batch's backward (false: "
                     "keep it gathered for the next micro-batch)"),
      llvm::cl::init(true)};
  Option<bool> cpuOffload{
      *this, "cpu-offload",
      llvm::cl::desc("CPUOffload(offload_params=True): sharded parameters, "
                     "gradients and optimizer state in host memory, the "
                     "optimizer on the CPU"),
      llvm::cl::init(false)};
  Option<bool> packAttention{
      *this, "pack-attention",
      llvm::cl::desc("Attention on a split q / k / v projection reads it in "
                     "place (fsdp-pack-attention)"),
      llvm::cl::init(true)};
  Option<bool> fuseAddLayerNorm{
      *this, "fuse-add-layer-norm",
      llvm::cl::desc("A residual add and the layer_norm of its sum as one "
                     "nn.add_layer_norm, and the norm's input gradient plus "
                     "the residual gradient as one nn.add_layer_norm_grad "
                     "(fsdp-build-train-step's fuse-add-layer-norm; off "
                     "until measured on a GPU)"),
      llvm::cl::init(false)};
  Option<bool> fuseBiasGelu{
      *this, "fuse-bias-gelu",
      llvm::cl::desc("A linear layer and the tanh GELU of its result, and "
                     "their gradients, as nn.linear_gelu / "
                     "nn.linear_gelu_grad (fsdp-build-train-step's "
                     "fuse-bias-gelu; off until measured on a GPU)"),
      llvm::cl::init(false)};
  Option<bool> fusedOptimizer{
      *this, "fused-optimizer",
      llvm::cl::desc("The SGD / AdamW / Lion updates of every unit as one "
                     "multi-tensor call per set of equal hyperparameters "
                     "(torch.optim's fused=True; convert-fsdp-to-rt's "
                     "fused-optimizer; off until measured on a GPU)"),
      llvm::cl::init(false)};
  Option<bool> keepAttentionStats{
      *this, "keep-attention-stats",
      llvm::cl::desc("Attention's backward reads the forward's softmax "
                     "statistics (fsdp-keep-attention-stats)"),
      llvm::cl::init(true)};
  Option<int64_t> padVocab{
      *this, "pad-vocab",
      llvm::cl::desc("Pad a language model head of at least 4096 classes to "
                     "a multiple of this many (fsdp-pad-vocab; 0: off)"),
      llvm::cl::init(64)};
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("sgd | adam | adamw | lion | adafactor"),
      llvm::cl::init("sgd")};
  Option<double> lr{
      *this, "lr",
      llvm::cl::desc("Learning rate (default: 1e-3; 1e-4 for lion, 1e-2 for "
                     "adafactor)"),
      llvm::cl::init(-1.0)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<double> dampening{*this, "dampening",
                           llvm::cl::desc("SGD dampening"),
                           llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> beta1{*this, "beta1",
                       llvm::cl::desc("Adam / AdamW / Lion beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{
      *this, "beta2",
      llvm::cl::desc("Adam / AdamW / Lion beta2 (default: 0.999; 0.99 for "
                     "lion)"),
      llvm::cl::init(-1.0)};
  Option<double> eps{*this, "eps", llvm::cl::desc("Adam / AdamW eps"),
                     llvm::cl::init(1e-8)};
  Option<double> beta2Decay{
      *this, "beta2-decay",
      llvm::cl::desc("Adafactor beta2_decay: beta2 of step t is 1 - "
                     "t^beta2_decay"),
      llvm::cl::init(-0.8)};
  Option<double> eps1{*this, "eps1",
                      llvm::cl::desc("Adafactor eps[0] (default: f32 machine "
                                     "epsilon, as torch's None)"),
                      llvm::cl::init(-1.0)};
  Option<double> eps2{*this, "eps2",
                      llvm::cl::desc("Adafactor eps[1], the smallest "
                                     "parameter RMS"),
                      llvm::cl::init(1e-3)};
  Option<double> clipThreshold{
      *this, "clip-threshold",
      llvm::cl::desc("Adafactor d: updates are scaled down to this RMS"),
      llvm::cl::init(1.0)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (default: the optimizer's)"),
      llvm::cl::init(-1.0)};
  ListOption<std::string> paramGroups{
      *this, "param-groups",
      llvm::cl::desc("Parameter groups (fsdp-build-train-step's option)")};
  Option<bool> noDecay1d{
      *this, "no-decay-1d",
      llvm::cl::desc("No weight decay for biases and norm weights (ndim < 2)"),
      llvm::cl::init(false)};
  Option<double> clipGradNorm{*this, "clip-grad-norm",
                              llvm::cl::desc("Global norm clip (0: off)"),
                              llvm::cl::init(0.0)};
  Option<double> clipNormType{
      *this, "clip-norm-type",
      llvm::cl::desc("The clipped norm's type: p > 0, or inf"),
      llvm::cl::init(2.0)};
  Option<int64_t> gradAccumSteps{*this, "grad-accum-steps",
                                 llvm::cl::desc("Micro-batches per step"),
                                 llvm::cl::init(1)};
  Option<std::string> mode{
      *this, "mode",
      llvm::cl::desc("train | eval: eval compiles the sharded forward alone "
                     "(dropout off, BatchNorm on running statistics; no "
                     "backward, optimizer or gradient memory)"),
      llvm::cl::init("train")};
  Option<std::string> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("none | dynamic: GradScaler's dynamic loss scaling "
                     "(for f16)"),
      llvm::cl::init("none")};
  Option<bool> noSync{*this, "no-sync",
                      llvm::cl::desc("Reduce gradients only after the last "
                                     "micro-batch (no_sync())"),
                      llvm::cl::init(false)};
  Option<bool> report{*this, "report",
                      llvm::cl::desc("Print the pre-launch report at the end"),
                      llvm::cl::init(false)};
  Option<std::string> machine{
      *this, "machine",
      llvm::cl::desc("The machine whose rates the report's predicted step "
                     "time uses: ci-cpu | h100"),
      llvm::cl::init("ci-cpu")};
  Option<std::string> paramDtype{
      *this, "param-dtype",
      llvm::cl::desc("Mixed precision: dtype of all-gathers and compute "
                     "(bf16, f16; empty: no mixed precision)"),
      llvm::cl::init("")};
  Option<std::string> reduceDtype{
      *this, "reduce-dtype",
      llvm::cl::desc("Mixed precision: dtype of gradient reduction (default: "
                     "param-dtype)"),
      llvm::cl::init("")};
  Option<std::string> bufferDtype{
      *this, "buffer-dtype",
      llvm::cl::desc("Mixed precision: dtype buffers are held in (default: "
                     "their own)"),
      llvm::cl::init("")};
  Option<bool> keepLowPrecisionGrads{
      *this, "keep-low-precision-grads",
      llvm::cl::desc("Mixed precision: give the optimizer gradients in the "
                     "reduce dtype"),
      llvm::cl::init(false)};
  Option<std::string> lrSchedule{
      *this, "lr-schedule",
      llvm::cl::desc("constant | cosine | linear (fsdp-run evaluates it)"),
      llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps",
                              llvm::cl::desc("Linear lr warmup, in steps"),
                              llvm::cl::init(0)};
  Option<int64_t> decaySteps{
      *this, "decay-steps",
      llvm::cl::desc("Steps of the lr decay after the warmup (0: to the end)"),
      llvm::cl::init(0)};
  Option<double> minLrRatio{
      *this, "min-lr-ratio",
      llvm::cl::desc("The lr decay's floor, a fraction of the peak"),
      llvm::cl::init(0.0)};
  Option<bool> lower{*this, "lower",
                     llvm::cl::desc("Lower to LLVM for fsdp-run "
                                    "(convert-fsdp-to-rt, convert-rt-to-llvm)"),
                     llvm::cl::init(false)};
};

/// convert-fsdp-to-rt then convert-rt-to-llvm: a scheduled step to what
/// fsdp-run JIT-compiles.
void buildFSDPLowerPipeline(OpPassManager &pm,
                            const ConvertFSDPToRTPassOptions &options = {});

/// auto-wrap, train step, shard, collectives, prefetch (and the report).
void buildFSDPPipeline(OpPassManager &pm, const FSDPPipelineOptions &options);

/// Registers `fsdp-pipeline`.
void registerFSDPPipelines();

} // namespace mlir::fsdp

#endif // FSDP_PIPELINES_PIPELINES_H
