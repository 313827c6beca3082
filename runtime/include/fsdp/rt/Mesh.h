//===- Mesh.h - Where a rank sits in the [replicate, shard] mesh -*- C++ -*-===//
//
// The one definition of the mesh layout the compiler's #fsdp.mesh describes
// (FSDPAttrs.td): shard groups are contiguous ranks, so global rank
// rank = r * shard + s holds shard s of replica r. The communicators' mesh
// split, the runner's initialisation and its checkpoints all ask this; the
// compiled step asks its shard communicator for s (fsdprt_comm_rank).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_MESH_H
#define FSDP_RT_MESH_H

#include <cstdint>

namespace fsdp {
namespace rt {

struct Mesh {
  int32_t replicate = 1;
  int32_t shard = 1;

  int32_t worldSize() const { return replicate * shard; }
  /// Which shard `rank` holds (its rank in its shard group).
  int32_t shardIndex(int32_t rank) const { return rank % shard; }
  /// Which replica `rank` is in (its rank in its replicate group).
  int32_t replicaIndex(int32_t rank) const { return rank / shard; }
  /// The global rank holding shard `s` of replica `r`.
  int32_t rankOf(int32_t r, int32_t s) const { return r * shard + s; }
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_MESH_H
