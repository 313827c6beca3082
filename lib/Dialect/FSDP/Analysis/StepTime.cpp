//===- StepTime.cpp - predicted step time of a scheduled step -------------===//
//
// The cost model of StepTime.h: named machine profiles, the seconds of one
// op on its stream, and the simulation of the step's streams.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/FSDP/Analysis/StepTime.h"

#include "fsdp/Dialect/FSDP/Analysis/StorageLiveness.h"
#include "fsdp/Dialect/FSDP/Analysis/Streams.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::fsdp;

std::string MachineProfile::describe() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%g GFLOP/s GEMM, %g GB/s memory, %g GB/s link, %g us "
                     "per ring step, %g us per call",
                     gemmGflops, memoryGBps, linkGBps, linkLatencyUs,
                     opOverheadUs);
  if (gemmGflops16 > 0)
    os << llvm::format(", %g GFLOP/s 16-bit GEMM", gemmGflops16);
  if (hostLinkGBps > 0)
    os << llvm::format(", %g GB/s host link", hostLinkGBps);
  return text;
}

namespace {
struct NamedMachine {
  const char *name;
  MachineProfile profile;
};

/// "h100": one H100 SXM per rank, ranks joined by NVLink 4 (NVSwitch).
/// GEMM rates and the bandwidth of our kernels as fsdprt_cuda_bench
/// measured them at GPT-2 124M's shapes (bf16 0.5-0.75 PFLOP/s, f32
/// without TF32 49-51 TFLOP/s; copies at 3.0 TB/s, our elementwise and
/// row kernels 1.3-3x slower); per-call cost: the gaps between kernels of
/// a replayed step; links: NCCL's published ring bus bandwidth on NVLink 4
/// and PCIe Gen5's host link (not measured: the H100 runs of 2026-11-26/27
/// had one GPU).
const NamedMachine kMachines[] = {
    {"ci-cpu", MachineProfile()},
    {"h100",
     {/*gemmGflops=*/50000, /*gemmGflops16=*/600000, /*memoryGBps=*/1800,
      /*linkGBps=*/360, /*linkLatencyUs=*/4, /*opOverheadUs=*/3,
      /*hostLinkGBps=*/50, /*gemmWorkspaceBytes=*/int64_t(32) << 20}},
};
} // namespace

FailureOr<MachineProfile> fsdp::namedMachineProfile(StringRef name,
                                                    Location loc,
                                                    StringRef pass) {
  std::string known;
  for (const NamedMachine &m : kMachines) {
    if (name == m.name)
      return m.profile;
    known += (known.empty() ? "" : ", ") + std::string(m.name);
  }
  return emitError(loc) << pass << ": unknown machine '" << name
                        << "' (known: " << known << ")";
}

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// FLOPs of a convolution with result (or result gradient) `output` and
/// weight [O, C/groups, k...].
double convFlops(Value output, Value weight) {
  auto numel = [](Value v) {
    return double(cast<RankedTensorType>(v.getType()).getNumElements());
  };
  return 2.0 * numel(output) * numel(weight) / shapeOf(weight)[0];
}

/// FLOPs of the GEMM-shaped ops; 0 for the others.
double gemmFlops(Operation *op) {
  auto attentionFlops = [](Value q, Value k, int64_t heads, double gemms) {
    ArrayRef<int64_t> qs = shapeOf(q), ks = shapeOf(k);
    double headDim = double(qs[2]) / heads;
    return gemms * 2.0 * qs[0] * heads * qs[1] * ks[1] * headDim;
  };
  // Self-attention on a packed qkv [B, T, (H + 2·Hkv)·D].
  auto packedFlops = [](auto op, double gemms) {
    ArrayRef<int64_t> s = shapeOf(op.getQkv());
    int64_t heads = op.getNumHeads();
    double headDim = double(s[2]) / (heads + 2 * op.getKeyValueHeads());
    return gemms * 2.0 * s[0] * heads * s[1] * s[1] * headDim;
  };
  return llvm::TypeSwitch<Operation *, double>(op)
      .Case<nn::LinearOp, nn::LinearGeluOp>([](auto o) {
        ArrayRef<int64_t> w = shapeOf(o.getWeight());
        double rows = double(cast<RankedTensorType>(o.getInput().getType())
                                 .getNumElements()) /
                      w[1];
        return 2.0 * rows * w[0] * w[1];
      })
      .Case<nn::LinearGradOp, nn::LinearGeluGradOp>(
          [](auto o) { // gradW and gradX, each 2 · rows · out · in
            ArrayRef<int64_t> w = shapeOf(o.getWeight());
            return 4.0 * double(shapeOf(o.getInput())[0]) * w[0] * w[1];
          })
      .Case([](nn::MatmulOp o) {
        ArrayRef<int64_t> a = shapeOf(o.getLhs());
        int64_t k = o.getTransposeLhs() ? a[a.size() - 2] : a.back();
        return 2.0 * double(cast<RankedTensorType>(o.getType())
                                .getNumElements()) *
               k;
      })
      // A grouped GEMM over all its rows (tokens × top-k: none dropped),
      // each row times one group's [K, N]; its weight gradient alike.
      .Case([](nn::GroupedMatmulOp o) {
        ArrayRef<int64_t> w = shapeOf(o.getWeight());
        return 2.0 * double(shapeOf(o.getInput())[0]) * w[1] * w[2];
      })
      .Case([](nn::GroupedMatmulGradWeightOp o) {
        ArrayRef<int64_t> dw = shapeOf(o.getResult());
        return 2.0 * double(shapeOf(o.getInput())[0]) * dw[1] * dw[2];
      })
      // A convolution and each of its gradients: 2 · outputs · (C/groups ·
      // kernel) multiply-adds, from the conv output and the weight.
      .Case(
          [](nn::ConvOp o) { return convFlops(o.getResult(), o.getWeight()); })
      .Case([](nn::ConvTransposeOp o) {
        return convFlops(o.getInput(), o.getWeight());
      })
      .Case([](nn::ConvGradWeightOp o) {
        return convFlops(o.getGrad(), o.getResult());
      })
      // Forward: Q Kᵀ and P V; backward: P recomputed, dV, dP, dQ, dK.
      .Case([&](nn::AttentionOp o) {
        return attentionFlops(o.getQuery(), o.getKey(), o.getNumHeads(), 2);
      })
      .Case([&](nn::AttentionGradOp o) {
        return attentionFlops(o.getQuery(), o.getKey(), o.getNumHeads(), 5);
      })
      .Case([&](nn::PackedAttentionOp o) { return packedFlops(o, 2); })
      .Case([&](nn::PackedAttentionGradOp o) { return packedFlops(o, 5); })
      .Default([](Operation *) { return 0.0; });
}

/// Seconds of a ring collective moving `bytes` (the full tensor) among
/// `ranks`; `passes` is 2 for an all-reduce (reduce-scatter + all-gather).
double ringSeconds(double bytes, int64_t ranks, int passes,
                   const MachineProfile &p) {
  if (ranks <= 1)
    return 0;
  double steps = double(ranks - 1);
  return passes * (steps / ranks * bytes / (p.linkGBps * 1e9) +
                   steps * p.linkLatencyUs * 1e-6);
}

/// Seconds of one op on its stream; negative for ops that emit nothing
/// (StorageLiveness.h: renames of storage, markers, the host's step
/// counter).
double secondsOf(Operation *op, const MachineProfile &p) {
  if (emitsNothing(op))
    return -1;
  double overhead = p.opOverheadUs * 1e-6;
  // A collective op: its ring collectives, an all-reduce being two passes
  // (reduce-scatter + all-gather).
  if (auto collective = dyn_cast<CollectiveOpInterface>(op)) {
    double t = overhead;
    for (const CollectiveStep &c : collective.getCollectiveSteps())
      t += ringSeconds(tensorBytes(c.dataType), c.groupSize,
                       c.kind == CollectiveKind::AllReduce ? 2 : 1, p);
    return t;
  }
  if (double flops = gemmFlops(op)) {
    Type element =
        cast<RankedTensorType>(op->getOperand(0).getType()).getElementType();
    bool halfWidth = element.isBF16() || element.isF16();
    double rate = halfWidth && p.gemmGflops16 > 0 ? p.gemmGflops16
                                                  : p.gemmGflops;
    return overhead + flops / (rate * 1e9);
  }
  if (isa<ToDeviceOp, ToHostOp>(op)) // CPU offload: one pass over the link
    return overhead + tensorBytes(op->getOperand(0)) /
                          ((p.hostLinkGBps > 0 ? p.hostLinkGBps
                                               : p.memoryGBps) * 1e9);
  double bytes = 0;
  for (Value v : op->getOperands())
    bytes += tensorBytes(v);
  for (Value v : op->getResults())
    bytes += tensorBytes(v);
  return overhead + bytes / (p.memoryGBps * 1e9);
}

} // namespace

StepTime fsdp::predictStepTime(func::FuncOp step,
                               const MachineProfile &profile) {
  StepTime time;
  double streamFree[kNumStreams] = {};
  llvm::DenseMap<Value, double> ready; // when a value has been produced
  for (Operation &op : step.getBody().front()) {
    double start = 0;
    for (Value operand : op.getOperands())
      start = std::max(start, ready.lookup(operand));
    double seconds = secondsOf(&op, profile);
    double finish = start;
    if (seconds >= 0) {
      int s = int(streamOf(&op));
      start = std::max(start, streamFree[s]);
      finish = start + seconds;
      streamFree[s] = finish;
      if (s == int(StreamKind::Compute))
        time.compute += seconds;
      else if (s == int(StreamKind::AllGather) ||
               s == int(StreamKind::ReduceScatter))
        time.communication += seconds;
    }
    for (Value result : op.getResults())
      ready[result] = finish;
  }
  time.total = *std::max_element(std::begin(streamFree), std::end(streamFree));
  return time;
}
