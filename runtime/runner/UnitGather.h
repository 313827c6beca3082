//===- UnitGather.h - A sharded unit's whole tensor on device ---*- C++ -*-===//
//
// What the checkpoint writer (CheckpointIO.h's FlatGatherer) and the
// evaluator (a training shard gathered into an eval program's whole unit)
// share: all-gather one unit's shard into reused arena scratch. A shard in
// the host buffer (CPU offload) is copied to the arena first: collectives
// read device memory.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNNER_UNITGATHER_H
#define FSDP_RUNNER_UNITGATHER_H

#include "runner/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

class UnitGatherer {
public:
  /// Scratch for the largest of `units` (sharded ones only) on `stream`;
  /// `what` starts the error messages ("checkpoint", "eval").
  UnitGatherer(const Program &program, int64_t ctx, int64_t stream,
               const StateBuffers &buffers, int64_t shardComm,
               const std::vector<const UnitInfo *> &units, std::string what);
  /// Waits for the stream and frees the scratch.
  ~UnitGatherer();
  UnitGatherer(const UnitGatherer &) = delete;
  UnitGatherer &operator=(const UnitGatherer &) = delete;

  /// Where the whole padded flat tensor of `unit` whose shard is at image
  /// `offset` is once the stream gets there: the scratch for a sharded
  /// unit (valid until the next gather), the tensor itself otherwise.
  BufferRef gather(const UnitInfo &unit, int64_t offset);

  /// Arena bytes the scratch takes for `units` (aligned as allocated).
  static int64_t scratchBytes(const Program &program,
                              const std::vector<const UnitInfo *> &units);

private:
  const Program &program_;
  int64_t ctx_, stream_;
  StateBuffers buffers_;
  int64_t comm_;
  std::string what_;
  int64_t scratch_ = 0, shardScratch_ = 0;
};

} // namespace driver
} // namespace fsdp

#endif // FSDP_RUNNER_UNITGATHER_H
