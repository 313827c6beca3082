//===- RankRuntime.cpp - One rank's runtime for a compiled program --------===//

#include "driver/RankRuntime.h"

#include "driver/Init.h"
#include "fsdp/rt/fsdprt.h"

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fsdp {
namespace driver {
namespace {

int defaultThreads(const rt::LaunchInfo &launch) {
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, launch.localWorldSize));
}

} // namespace

void check(int32_t status, const char *what) {
  if (status != FSDPRT_OK)
    throw std::runtime_error(std::string(what) + ": " + fsdprt_last_error());
}

RankRuntime::~RankRuntime() {
  if (ctx)
    fsdprt_context_destroy(ctx);
}

void RankRuntime::setUp(const RunOptions &o, const Program &p,
                        const rt::LaunchInfo &launch, int64_t minArenaBytes) {
  // Room beyond the plan for checkpoint gathers and metric reductions
  // between steps, when the planned transients are free anyway.
  int64_t slack = 4096;
  for (const auto &unit : p.units)
    slack = std::max(slack, unit.paddedNumel * 4 + 4096);
  int64_t capacity =
      std::max({p.arenaBytes, p.persistentBytes + slack, minArenaBytes});
  check(fsdprt_context_create(
            o.backend.c_str(), launch.rank, launch.worldSize, capacity,
            o.threads ? o.threads : defaultThreads(launch), &ctx),
        "creating the runtime context");
  check(
      fsdprt_comm_init_env(ctx, o.backend == "cuda" ? "nccl" : "gloo", &world),
      "joining the job");
  shard = world;
  if (p.replicate > 1 && p.shard > 1)
    check(fsdprt_comm_split_mesh(ctx, world, p.replicate, p.shard, &shard,
                                 &replicate),
          "creating the mesh's communicators");
  else if (p.replicate > 1)
    replicate = world;
  static const char *names[] = {"compute", "all-gather", "reduce-scatter"};
  for (int s = 0; s < 3; ++s) {
    check(fsdprt_stream_create(ctx, &streams[s]), "creating a stream");
    check(fsdprt_stream_set_name(ctx, streams[s], names[s]), "naming a stream");
  }
  check(fsdprt_buffer_alloc_at(ctx, 0, p.persistentBytes, &persistent),
        "allocating the persistent buffer");
}

LoadResult RankRuntime::initWeights(const RunOptions &o, const Program &p,
                                    int rank) {
  std::vector<uint8_t> image(p.persistentBytes, 0);
  LoadResult loaded;
  if (!o.load.empty()) {
    loaded = load(o.load, p, rank, image);
    if (rank == 0 && !o.quiet)
      std::cout << "loaded " << o.load << " (step " << loaded.stepCount << ")"
                << std::endl;
  } else {
    initializeRank(p, o.seed, rank, image);
  }
  check(fsdprt_copy_from_host(ctx, streams[0], persistent, 0, image.data(),
                              int64_t(image.size())),
        "initialising the weights");
  check(fsdprt_stream_synchronize(ctx, streams[0]), "initialising the weights");
  return loaded;
}

void RankRuntime::runStep(StepFn step, int64_t persistentBuf, int64_t stepCount,
                          uint64_t seed, int rank) {
  check(step(ctx, persistentBuf, streams[0], streams[1], streams[2], shard,
             replicate, stepCount, int64_t(seed), rank),
        "step");
  check(fsdprt_context_synchronize(ctx), "step");
}

} // namespace driver
} // namespace fsdp
