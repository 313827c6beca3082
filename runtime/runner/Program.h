//===- Program.h - What fsdp-run needs to know about a lowered step --------===//
//
// convert-fsdp-to-rt attaches a JSON description of the lowered training
// step to the module (string attribute `fsdp.program`). fsdp-run reads it to
// lay out the persistent part of the arena, initialise or load parameters,
// feed inputs and read the loss; the compiled step does everything else
// (JIT-compiled by fsdp-run, or a step library from fsdp-compile).
// Byte offsets are into the persistent buffer, which the runner allocates at
// arena offset 0 with `persistent_bytes` bytes.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_PROGRAM_H
#define FSDP_DRIVER_PROGRAM_H

#include "fsdp/rt/DType.h"
#include "fsdp/rt/LrSchedule.h"
#include "fsdp/rt/Mesh.h"
#include "fsdp/rt/StepAbi.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

/// torch.nn.init-style initializer as written in `#fsdp.init<kind(args)>`:
/// zeros, ones, constant, normal, uniform, trunc_normal, xavier_uniform,
/// xavier_normal, kaiming_uniform, kaiming_normal.
struct InitSpec {
  std::string kind;
  std::vector<double> args;
};

/// One original parameter inside a unit's flat parameter.
struct ParamInfo {
  std::string name;            // fully-qualified, e.g. "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;
  int64_t flatOffset = 0;      // element offset in the (unpadded) flat parameter
  InitSpec init;
};

/// A flat tensor of a unit that persists across steps: optimizer state
/// (exp_avg, exp_avg_sq, momentum_buffer), f32, elementwise over the shard;
/// or whole, the same on every rank (Adafactor's factored second moment,
/// AdafactorLayout.h).
struct StateInfo {
  std::string name;
  int64_t offset = 0;          // bytes, persistent buffer
  int64_t numel = 0;           // the shard's, unless whole
  bool whole = false;
};

/// One FSDP unit: its flat parameter, sharded over the shard group.
struct UnitInfo {
  std::string name;            // "" for the root
  std::string dtype;           // "f32": storage of the master shard
  int64_t offset = 0;          // bytes: this rank's shard in the persistent buffer
  int64_t flatNumel = 0;       // sum of the params' numels
  int64_t paddedNumel = 0;     // flatNumel rounded up to a multiple of the shard size
  int64_t shardNumel = 0;      // paddedNumel / shard (no-shard: == paddedNumel)
  bool rankLocal = false;      // own-rank process group: whole, differs per rank
  bool frozen = false;         // the unit's frozen params: gathered, never updated
  bool ignored = false;        // FSDP's ignored params: rank-local, same init
  std::vector<ParamInfo> params;
  std::vector<StateInfo> state;
};

/// A model buffer (e.g. BatchNorm running statistics), replicated.
struct BufferInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
  int64_t offset = 0;
  InitSpec init;
};

/// One input of the step for one micro-batch (leading dim = batch per rank).
struct InputInfo {
  int64_t index = 0;           // position in the model's forward signature
  int64_t microBatch = 0;
  std::vector<int64_t> shape;
  std::string dtype;           // "f32", "bf16", "i32", "i64", ...
  int64_t offset = 0;
  int64_t maxId = -1;          // integer inputs: ids are < maxId (vocab / classes); -1 if unknown
  std::optional<int64_t> ignoreId; // a cross-entropy target's ignore_index, also allowed
};

/// One micro-batch's value of a named output of the model's forward (an
/// eval program's, e.g. "logits"): this rank's rows, leading dim the batch.
struct OutputInfo {
  std::string name;
  int64_t microBatch = 0;
  std::vector<int64_t> shape;
  std::string dtype;
  int64_t offset = 0;          // bytes, persistent buffer
};

struct Program {
  std::string model;           // fsdp.model symbol
  std::string entry;           // symbol of the step (StepAbi.h)
  int worldSize = 1;
  int replicate = 1;           // mesh: world = replicate * shard
  int shard = 1;
  rt::Mesh mesh() const { return {replicate, shard}; }
  int microBatches = 1;
  /// reshard_after_forward = N's groups of N consecutive ranks (0: none).
  int postForwardGroup = 0;
  std::string mode = "train";  // train, or eval: the forward alone
  std::string optimizer;       // sgd, adamw; none for eval
  double lr = 0;               // the optimizer's base learning rate
  rt::LrSchedule lrSchedule;   // compiled in; fsdp-run's options override it
  int64_t persistentBytes = 0; // runner-allocated buffer at arena offset 0
  /// CPU offload: the units' shards and state live in a host buffer of
  /// hostBytes (fsdprt_buffer_alloc_host). The runner keeps one image of
  /// both, the host buffer's bytes after the persistent ones: unit and
  /// state offsets are image offsets (the description's host offsets plus
  /// persistentBytes); locate() says which buffer holds them.
  bool cpuOffload = false;
  int64_t hostBytes = 0;
  int64_t arenaBytes = 0;      // whole arena: persistent + planned transients
  int64_t estimateBytes = 0;   // the memory plan's live peak (bytes per rank)
  std::string report;          // the pre-launch report text
  std::vector<UnitInfo> units;
  std::vector<BufferInfo> buffers;
  std::vector<InputInfo> inputs;
  std::vector<OutputInfo> outputs; // eval programs only
  int64_t lossOffset = 0;      // one f32: this rank's loss (mean over its micro-batches)
  std::string lossDtype = "f32";
  int64_t gradNormOffset = -1; // one f32 when the step clips gradients, else -1
  /// Dynamic loss scaling: the found-inf flag (one f32, the same on every
  /// rank); -1 without loss scaling.
  int64_t foundInfOffset = -1;

  /// Batch per rank per micro-batch (leading dim of the inputs).
  int64_t batchPerRank() const;
  /// Bytes of the runner's image of the persistent and host buffers.
  int64_t imageBytes() const { return persistentBytes + hostBytes; }
  /// The output `name` of micro-batch `microBatch`, or null.
  const OutputInfo *output(const std::string &name,
                           int64_t microBatch = 0) const;
};

/// A program's buffers on one rank: the persistent one and, with CPU
/// offload, the host one (0 without).
struct StateBuffers {
  int64_t persistent = 0, host = 0;
};
/// Bytes at an image offset: a buffer and the offset in it.
struct BufferRef {
  int64_t buffer, offset;
};
BufferRef locate(const Program &p, const StateBuffers &buffers,
                 int64_t imageOffset);

/// The runtime's element type of a program dtype ("f32", "bf16", "i64",
/// ...); throws std::runtime_error for an unknown one.
rt::DType dtypeOf(const std::string &dtype);
/// Bytes per element of a program dtype; throws as dtypeOf.
int64_t dtypeBytes(const std::string &dtype);
/// Bytes of a tensor of `shape` in `dtype`.
int64_t tensorBytes(const std::vector<int64_t> &shape,
                    const std::string &dtype);
/// `bytes` as the arena lays a buffer out (FSDPRT_ARENA_ALIGNMENT).
int64_t arenaAligned(int64_t bytes);

/// Parses and validates the JSON text; throws std::runtime_error with a
/// message naming the offending field.
Program parseProgram(const std::string &json);

/// The step's C ABI: fsdprt_step_fn in fsdp/rt/StepAbi.h.
using StepFn = fsdprt_step_fn;

} // namespace driver
} // namespace fsdp

#endif
