//===- UnitGather.cpp - A sharded unit's whole flat tensor on device ------===//

#include "runner/UnitGather.h"

#include "runner/RankRuntime.h"

#include "fsdp/rt/fsdprt.h"

#include <algorithm>

namespace fsdp {
namespace driver {
namespace {

bool sharded(const UnitInfo &u) { return u.shardNumel < u.paddedNumel; }

/// Bytes of the largest whole flat tensor and of the largest shard.
std::pair<int64_t, int64_t>
largest(const std::vector<const UnitInfo *> &units) {
  int64_t whole = 0, shard = 0;
  for (const UnitInfo *u : units)
    if (sharded(*u)) {
      int64_t bytes = dtypeBytes(u->dtype);
      whole = std::max(whole, u->paddedNumel * bytes);
      shard = std::max(shard, u->shardNumel * bytes);
    }
  return {whole, shard};
}

} // namespace

int64_t UnitGatherer::scratchBytes(const Program &program,
                                   const std::vector<const UnitInfo *> &units) {
  auto [whole, shard] = largest(units);
  return arenaAligned(whole) + (program.cpuOffload ? arenaAligned(shard) : 0);
}

UnitGatherer::UnitGatherer(const Program &program, int64_t ctx, int64_t stream,
                           const StateBuffers &buffers, int64_t shardComm,
                           const std::vector<const UnitInfo *> &units,
                           std::string what)
    : program_(program), ctx_(ctx), stream_(stream), buffers_(buffers),
      comm_(shardComm), what_(std::move(what)) {
  auto [whole, shard] = largest(units);
  if (whole > 0)
    check(fsdprt_buffer_alloc(ctx, whole, &scratch_),
          what_ + ": cannot allocate " + std::to_string(whole) +
              " bytes of arena to gather the largest unit");
  if (shard > 0 && buffers.host)
    check(fsdprt_buffer_alloc(ctx, shard, &shardScratch_),
          what_ + ": cannot allocate " + std::to_string(shard) +
              " bytes of arena for the largest offloaded shard");
}

UnitGatherer::~UnitGatherer() {
  fsdprt_stream_synchronize(ctx_, stream_);
  for (int64_t scratch : {scratch_, shardScratch_})
    if (scratch)
      fsdprt_buffer_free(ctx_, stream_, scratch);
}

BufferRef UnitGatherer::gather(const UnitInfo &unit, int64_t offset) {
  BufferRef src = locate(program_, buffers_, offset);
  if (!sharded(unit))
    return src;
  int64_t bytes = dtypeBytes(unit.dtype);
  if (src.buffer == buffers_.host) {
    check(fsdprt_copy(ctx_, stream_, shardScratch_, 0, src.buffer, src.offset,
                      unit.shardNumel * bytes),
          what_ + ": copy of the offloaded shard of unit '" + unit.name + "'");
    src = {shardScratch_, 0};
  }
  check(fsdprt_all_gather(ctx_, stream_, comm_, int32_t(dtypeOf(unit.dtype)),
                          src.buffer, src.offset, scratch_, 0,
                          unit.paddedNumel),
        what_ + ": all-gather of unit '" + unit.name + "'");
  return {scratch_, 0};
}

} // namespace driver
} // namespace fsdp
