//===- Checkpoint.h - Saving and loading training state ---------*- C++ -*-===//
//
// Two safetensors formats (loadable with the Python `safetensors` package):
//
//  - full ("fsdp-mlir-full"): one file, written by rank 0 after the shard
//    group all-gathers every unit. Parameters under their fully-qualified
//    names and shapes (f32), optimizer state as "optim.<state>.<param>"
//    (same shape), buffers by name in their dtype. Metadata: format, model,
//    step_count, optimizer, plus the caller's key/values.
//  - sharded ("fsdp-mlir-sharded"): a directory of rank-<r>-of-<W>.safetensors
//    files, each rank's flat shards as "<unit>/flat_param" and
//    "<unit>/<state>" ("_root" for the unnamed root unit) and the buffers by
//    name, no communication. Metadata adds world_size, replicate, shard, rank
//    and "units", a JSON list of each unit's flat layout, which is what lets
//    any world size (or unit wrapping) load it.
//
// Loading fills the host image of one rank's persistent buffer, the same
// layout initializeRank produces, from either format saved at any world
// size: parameters are matched by name, so only names and shapes must agree.
// Files are written atomically (temporary file + rename) by the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_CHECKPOINT_H
#define FSDP_DRIVER_CHECKPOINT_H

#include "runner/Program.h"
#include "runner/RunOptions.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

using Metadata = std::map<std::string, std::string>;

/// Writes the full checkpoint `path` (parent directories are created).
/// Collective over the shard group: every rank calls it; ranks of replica 0
/// all-gather each sharded unit over `shardComm` (0 is fine when nothing is
/// sharded) through a temporary arena buffer on `stream`, and rank 0 writes.
/// `persistentBuf` is the buffer holding the persistent bytes. Throws
/// std::runtime_error.
void saveFull(const std::string &path, const Program &program, int64_t ctx,
              int64_t stream, const StateBuffers &buffers, int64_t shardComm,
              int rank, int64_t stepCount, const Metadata &meta = {});

/// Writes `dir`/rank-<rank>-of-<W>.safetensors (creating `dir`). Every rank
/// calls it; no collectives (the copies synchronise the context).
void saveSharded(const std::string &dir, const Program &program, int64_t ctx,
                 const StateBuffers &buffers, int rank, int64_t stepCount,
                 const Metadata &meta = {});

/// File name of one rank's part of a sharded checkpoint.
std::string shardFileName(int rank, int worldSize);

struct LoadResult {
  std::string format;    // "fsdp-mlir-full" or "fsdp-mlir-sharded"
  int64_t stepCount = 0; // optimizer steps taken when it was saved
  /// False when the checkpoint was saved with another optimizer and holds
  /// none of this program's state: the state is then zero.
  bool optimizerStateLoaded = true;
  Metadata metadata;     // every key of the (rank-0) file
};

/// The newest complete checkpoint --save wrote into `dir`: the
/// step-<N>.safetensors file (written whole or not at all) or step-<N>
/// directory holding rank-<r>-of-<W>.safetensors for every r with the
/// largest N; "" when there is none (or no `dir`). For --resume latest.
std::string latestCheckpoint(const std::string &dir);

/// The checkpoint a run starts from: --load's, or with --resume latest the
/// newest in --save's directory; "" for none.
std::string startingCheckpoint(const RunOptions &o);

/// Resizes `persistentImage` to the persistent buffer's size and fills it
/// for rank `rank` from the checkpoint at `path` (a file: full; a directory:
/// sharded). Throws std::runtime_error naming the path and, for a model
/// mismatch, the parameter.
LoadResult load(const std::string &path, const Program &program, int rank,
                std::vector<uint8_t> &persistentImage);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_CHECKPOINT_H
