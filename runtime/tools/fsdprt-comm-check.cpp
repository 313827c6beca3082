//===- fsdprt-comm-check.cpp - Do the collectives work here? --------------===//
//
//   fsdprt-comm-check [--backend cpu|cuda] [--numel N]
//
// One rank of the job its environment describes (a single process when
// none: how a GPU lease checks NCCL on its one device): joins through the
// ordinary bootstrap (Gloo on cpu, NCCL on cuda), then runs all_reduce,
// all_gather and reduce_scatter through the C API on two streams at once,
// as a training step does, and checks every value against what
// torch.distributed would give. Prints one line per collective; exit 0 when
// all are right.
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/fsdprt.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

void check(int32_t status, const char *what) {
  if (status != FSDPRT_OK) {
    std::fprintf(stderr, "fsdprt-comm-check: error: %s: %s\n", what,
                 fsdprt_last_error());
    std::exit(1);
  }
}

/// Rank r's element i: distinct per rank and position, exact in f32.
float value(int rank, int64_t i) { return float(rank * 1000 + i % 997); }

int report(const char *name, const std::vector<float> &got,
           const std::vector<float> &want) {
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    bad += std::fabs(got[i] - want[i]) > 1e-6f * std::fabs(want[i]);
  std::printf("%-15s %8zu elements: %s\n", name, want.size(),
              bad ? "WRONG" : "ok");
  if (bad)
    std::printf("  %lld wrong, e.g. [0] = %g, expected %g\n", (long long)bad,
                got[0], want[0]);
  return bad != 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string backend = "cpu";
  int64_t numel = 1 << 20;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc)
      backend = argv[++i];
    else if (a == "--numel" && i + 1 < argc)
      numel = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "usage: fsdprt-comm-check [--backend cpu|cuda] "
                           "[--numel N]\n");
      return 2;
    }
  }
  const char *rankEnv = std::getenv("RANK");
  const char *worldEnv = std::getenv("WORLD_SIZE");
  int rank = rankEnv ? std::atoi(rankEnv) : 0;
  int world = worldEnv ? std::atoi(worldEnv) : 1;
  int64_t ctx = 0, comm = 0, gather = 0, reduce = 0;
  int64_t bytes = numel * 4;
  check(fsdprt_context_create(backend.c_str(), rank, world, 8 * bytes + 4096,
                              0, &ctx),
        "creating the context");
  check(fsdprt_comm_init_env(ctx, backend == "cuda" ? "nccl" : "gloo", &comm),
        "joining the job");
  check(fsdprt_stream_create(ctx, &gather), "creating a stream");
  check(fsdprt_stream_create(ctx, &reduce), "creating a stream");

  int64_t chunk = (numel + world - 1) / world;
  int64_t ownBegin = std::min(numel, chunk * rank);
  int64_t own = std::min(numel, ownBegin + chunk) - ownBegin;
  std::vector<float> mine(numel);
  for (int64_t i = 0; i < numel; ++i)
    mine[i] = value(rank, i);
  int64_t full = 0, shard = 0, summed = 0, scattered = 0;
  check(fsdprt_buffer_alloc(ctx, bytes, &full), "alloc");
  check(fsdprt_buffer_alloc(ctx, bytes, &summed), "alloc");
  check(fsdprt_buffer_alloc(ctx, std::max<int64_t>(own, 1) * 4, &shard),
        "alloc");
  check(fsdprt_buffer_alloc(ctx, std::max<int64_t>(own, 1) * 4, &scattered),
        "alloc");
  check(fsdprt_copy_from_host(ctx, reduce, summed, 0, mine.data(), bytes),
        "copy");
  check(fsdprt_copy_from_host(ctx, gather, shard, 0, mine.data() + ownBegin,
                              own * 4),
        "copy");
  check(fsdprt_stream_synchronize(ctx, reduce), "copy");
  check(fsdprt_stream_synchronize(ctx, gather), "copy");
  // Issued in this order on every rank; they run on two streams at once.
  check(fsdprt_all_gather(ctx, gather, comm, FSDPRT_F32, shard, 0, full, 0,
                          numel),
        "all_gather");
  check(fsdprt_reduce_scatter(ctx, reduce, comm, FSDPRT_F32, FSDPRT_COMM_AVG,
                              summed, 0, scattered, 0, numel, 1.0, 1.0),
        "reduce_scatter");
  check(fsdprt_all_reduce(ctx, reduce, comm, FSDPRT_F32, FSDPRT_COMM_SUM,
                          summed, 0, summed, 0, numel),
        "all_reduce");
  check(fsdprt_context_synchronize(ctx), "the collectives");

  std::vector<float> gathered(numel), sums(numel), shardAvg(own);
  check(fsdprt_copy_to_host(ctx, gather, gathered.data(), full, 0, bytes),
        "copy");
  check(fsdprt_copy_to_host(ctx, reduce, sums.data(), summed, 0, bytes),
        "copy");
  check(fsdprt_copy_to_host(ctx, reduce, shardAvg.data(), scattered, 0,
                            own * 4),
        "copy");
  check(fsdprt_context_synchronize(ctx), "copy");

  std::vector<float> wantGather(numel), wantSum(numel), wantAvg(own);
  for (int64_t i = 0; i < numel; ++i) {
    wantGather[i] = value(int(i / chunk), i);
    double sum = 0;
    for (int r = 0; r < world; ++r)
      sum += value(r, i);
    wantSum[i] = float(sum);
    if (i >= ownBegin && i < ownBegin + own)
      wantAvg[i - ownBegin] = float(sum / world);
  }
  int failures = report("all_gather", gathered, wantGather) +
                 report("reduce_scatter", shardAvg, wantAvg) +
                 report("all_reduce", sums, wantSum);
  check(fsdprt_context_destroy(ctx), "destroying the context");
  return failures ? 1 : 0;
}
