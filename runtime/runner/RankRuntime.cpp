//===- RankRuntime.cpp - One rank's runtime for a compiled program --------===//

#include "runner/RankRuntime.h"

#include "fsdp/rt/fsdprt.h"
#include "runner/ErrorFile.h"
#include "runner/Init.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fsdp {
namespace driver {
namespace {

/// The step's streams (StepAbi.def's STREAM rows): each one's trace label
/// and where it is made.
struct StreamRow {
  const char *label;
  enum Placement { DEVICE, OFFLOAD_DEVICE, OFFLOAD_HOST } placement;
};
constexpr StreamRow kStreamRows[] = {
#define FSDPRT_STEP_STREAM(name, label, placement)                             \
  {label, StreamRow::placement},
#include "fsdp/rt/StepAbi.def"
};
static_assert(std::size(kStreamRows) == RankRuntime::kNumStreams);
static_assert(kStreamRows[0].placement == StreamRow::DEVICE,
              "streams[0] is the compute stream");

void makeStreams(int64_t ctx, int64_t *streams, bool offload) {
  for (size_t s = 0; s < std::size(kStreamRows); ++s) {
    StreamRow::Placement where = kStreamRows[s].placement;
    if ((where != StreamRow::DEVICE) != offload)
      continue;
    check(where == StreamRow::OFFLOAD_HOST
              ? fsdprt_stream_create_host(ctx, &streams[s])
              : fsdprt_stream_create(ctx, &streams[s]),
          "creating a stream");
    check(fsdprt_stream_set_name(ctx, streams[s], kStreamRows[s].label),
          "naming a stream");
  }
}

template <size_t... I>
int32_t callWith(StepFn step, const int64_t *args, std::index_sequence<I...>) {
  return step(args[I]...);
}

/// Calls `step` with `a` in StepAbi.def's order (this compiles only if
/// the .def has as many rows as fsdprt_step_fn has parameters).
int32_t callStep(StepFn step, const fsdprt_step_args &a) {
  const int64_t args[] = {
#define FSDPRT_STEP_ARG(name, kind) a.name,
#include "fsdp/rt/StepAbi.def"
  };
  return callWith(step, args, std::make_index_sequence<std::size(args)>{});
}

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
  if (o.allowTf32) // read by the cuda backend when the context is made
    setenv("FSDPRT_CUDA_TF32", "1", 1);
  check(fsdprt_context_create(
            o.backend.c_str(), launch.rank, launch.worldSize, capacity,
            o.threads ? o.threads : defaultThreads(launch), &ctx),
        "creating the runtime context");
  // The backend's own communicator: NCCL for the GPUs (the tests' NCCL
  // emulation for their emulated GPUs), Gloo for the CPU.
  check(fsdprt_comm_init_env(ctx, "default", &world), "joining the job");
  shard = world;
  if (p.replicate > 1 && p.shard > 1)
    check(fsdprt_comm_split_mesh(ctx, world, p.replicate, p.shard, &shard,
                                 &replicate),
          "creating the mesh's communicators");
  else if (p.replicate > 1)
    replicate = world;
  if (p.postForwardGroup > 1) {
    // Groups of N consecutive ranks: the shard groups of a
    // [world / N, N] mesh (FSDP2's mesh.view(-1, N)). Its replicate groups
    // are not used; they go with the context (destroying one at once could
    // close it while a peer is still connecting).
    int64_t unused = 0;
    check(fsdprt_comm_split_mesh(ctx, world,
                                 p.worldSize / p.postForwardGroup,
                                 p.postForwardGroup, &postForward, &unused),
          "creating the post-forward groups (reshard_after_forward)");
  }
  makeStreams(ctx, streams, /*offload=*/false);
  check(fsdprt_buffer_alloc_at(ctx, 0, p.persistentBytes, &persistent),
        "allocating the persistent buffer");
  if (p.cpuOffload)
    check(fsdprt_buffer_alloc_host(ctx, p.hostBytes, &host),
          "allocating the host buffer (CPU offload)");
  // Where the step cannot be one graph, rank 0 says why in one line. The
  // reasons are the job's options, the same on every rank; the ranks still
  // agree on the outcome, before any collective of the step is issued.
  int32_t graphsSupported = 0;
  check(fsdprt_graph_supported(ctx, &graphsSupported), "querying the backend");
  const char *eagerBecause = !o.trace.empty() ? "--trace shows each operation"
                             : p.cpuOffload
                                 ? "CPU offload's optimizer runs on the host"
                                 : nullptr;
  bool asked = graphsSupported && o.cudaGraphs;
  bool want = asked && !eagerBecause;
  worldSize_ = launch.worldSize;
  if (asked && onAnyRank(!want))
    want = false;
  if (want)
    graphs_ = Graphs::Warmup;
  else if (asked && launch.rank == 0 && !o.quiet)
    std::cout << "the training step runs eagerly, not as one CUDA graph: "
              << (eagerBecause ? eagerBecause : "another rank cannot")
              << std::endl;
  quiet_ = o.quiet;
}

LoadResult RankRuntime::initWeights(const RunOptions &o, const Program &p,
                                    int rank) {
  std::vector<uint8_t> image(p.imageBytes(), 0);
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
                              p.persistentBytes),
        "initialising the weights");
  if (host)
    check(fsdprt_copy_from_host(ctx, streams[0], host, 0,
                                image.data() + p.persistentBytes, p.hostBytes),
          "initialising the offloaded weights");
  check(fsdprt_stream_synchronize(ctx, streams[0]), "initialising the weights");
  return loaded;
}

int32_t RankRuntime::issueStep(StepFn step, const StateBuffers &buffers,
                               int64_t stepCount, uint64_t seed, int rank) {
  if (buffers.host && !madeOffloadStreams_) {
    makeStreams(ctx, streams, /*offload=*/true);
    madeOffloadStreams_ = true;
  }
  fsdprt_step_args a{};
  a.ctx = ctx;
  a.persistent = buffers.persistent;
  a.shard = shard;
  a.replicate = replicate;
  a.post_forward = postForward;
  a.step_count = stepCount;
  a.seed = int64_t(seed);
  a.rank = rank;
  a.host = buffers.host;
  int s = 0;
#define FSDPRT_STEP_STREAM(name, label, placement) a.name = streams[s++];
#include "fsdp/rt/StepAbi.def"
  return callStep(step, a);
}

void RankRuntime::runStep(StepFn step, const StateBuffers &buffers,
                          int64_t stepCount, uint64_t seed, int rank) {
  check(issueStep(step, buffers, stepCount, seed, rank), "step");
  check(fsdprt_context_synchronize(ctx), "step");
}

void RankRuntime::runTrainingStep(StepFn step, int64_t stepCount, uint64_t seed,
                                  int rank) {
  if (graphs_ == Graphs::Off || graphs_ == Graphs::Warmup) {
    runStep(step, buffers(), stepCount, seed, rank);
    if (graphs_ == Graphs::Warmup)
      graphs_ = Graphs::Capture;
    return;
  }
  if (graphs_ == Graphs::Capture) {
    std::string why = capture(step, stepCount, seed, rank);
    if (!why.empty())
      printLine("fsdprt: rank " + std::to_string(rank) +
                ": the step cannot be captured as a CUDA graph (" + why +
                ")\n");
    // A graph on some ranks only would run the ranks' collectives apart:
    // all or none.
    if (onAnyRank(!why.empty())) {
      if (graph_)
        check(fsdprt_graph_destroy(ctx, graph_), "dropping the step graph");
      graph_ = 0;
      graphs_ = Graphs::Off;
      if (rank == 0)
        std::cerr << "fsdprt: the training step runs eagerly on every rank "
                     "from here on (--cuda-graphs off hides this)"
                  << std::endl;
      return runStep(step, buffers(), stepCount, seed, rank);
    }
    graphs_ = Graphs::Ready;
    if (rank == 0 && !quiet_)
      std::cout << "the training step runs as one CUDA graph from here on "
                   "(captured at step "
                << stepCount + 1 << "; --cuda-graphs off runs it eagerly)"
                << std::endl;
  }
  check(fsdprt_graph_launch(ctx, streams[0], graph_, stepCount),
        "launching the step's CUDA graph");
  check(fsdprt_context_synchronize(ctx), "step");
}

std::string RankRuntime::capture(StepFn step, int64_t stepCount, uint64_t seed,
                                 int rank) {
  if (fsdprt_graph_begin(ctx, stepCount) != FSDPRT_OK)
    return fsdprt_last_error();
  std::string why;
  if (issueStep(step, buffers(), stepCount, seed, rank) != FSDPRT_OK)
    why = fsdprt_last_error();
  if (fsdprt_graph_end(ctx, &graph_) != FSDPRT_OK) {
    if (why.empty())
      why = fsdprt_last_error();
    graph_ = 0;
  }
  return why;
}

bool RankRuntime::onAnyRank(bool flag) {
  if (worldSize_ == 1)
    return flag;
  int64_t buf = 0, s = streams[0];
  check(fsdprt_buffer_alloc(ctx, 4, &buf), "allocating a flag");
  float value = flag ? 1.0f : 0.0f;
  check(fsdprt_copy_from_host(ctx, s, buf, 0, &value, 4), "staging a flag");
  check(fsdprt_all_reduce(ctx, s, world, FSDPRT_F32, FSDPRT_COMM_MAX, buf, 0,
                          buf, 0, 1),
        "agreeing with the other ranks");
  check(fsdprt_copy_to_host(ctx, s, &value, buf, 0, 4), "reading a flag");
  check(fsdprt_stream_synchronize(ctx, s), "agreeing with the other ranks");
  check(fsdprt_buffer_free(ctx, s, buf), "freeing a flag");
  return value != 0.0f;
}

} // namespace driver
} // namespace fsdp
