//===- fsdprt_comm_bench.cpp - Collective bus bandwidth (nccl-tests style) ===//
//
// Forks --nproc ranks on loopback, each creating a Gloo world communicator
// through the ordinary bootstrap, and times all_gather and reduce_scatter
// (sum, f32) from 1 KiB to --max-bytes. Columns follow nccl-tests: `size`
// is the whole tensor (all_gather output, reduce_scatter input), algbw =
// size / time, busbw = algbw * (n-1)/n, the bytes each rank's link must
// carry per unit time, comparable across rank counts. The ceiling is a
// single-threaded memcpy of `size` bytes: every collective on one host
// copies at least that much through memory (loopback TCP = kernel copies).
// Not a test: prints numbers and ratios.
//
// Usage: fsdprt_comm_bench [--nproc N] [--max-bytes B] [--port P]
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/Comm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace fsdp::rt;
using Clock = std::chrono::steady_clock;

namespace {

/// Iterations: enough for ~0.2 s of data per size, at least 3.
int itersFor(int64_t bytes) {
  return static_cast<int>(std::max<int64_t>(
      3, std::min<int64_t>(200, (int64_t(400) << 20) / bytes)));
}

double memcpySeconds(int64_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  int iters = itersFor(bytes);
  std::memcpy(b.data(), a.data(), bytes);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) {
      std::memcpy(b.data(), a.data(), bytes);
      a[i % bytes] = b[(i * 7) % bytes]; // keep the copies observable
    }
    best = std::min(
        best, std::chrono::duration<double>(Clock::now() - t0).count() / iters);
  }
  return best;
}

/// Mean time per call over `iters` calls, after a warm-up and a barrier;
/// the slowest rank's time is what a collective costs (max all_reduce).
double timeCollective(Communicator &comm, int iters,
                      const std::function<void()> &call) {
  call();
  comm.barrier();
  auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i)
    call();
  float seconds = static_cast<float>(
      std::chrono::duration<double>(Clock::now() - t0).count() / iters);
  comm.allReduce(DType::F32, &seconds, &seconds, 1, CommReduceOp::Max);
  return seconds;
}

int runRank(int rank, int nproc, int port, int64_t maxBytes) {
  LaunchInfo launch;
  launch.rank = rank;
  launch.worldSize = nproc;
  launch.masterPort = port;
  launch.jobId = "comm-bench-" + std::to_string(port);
  CommOptions options = CommOptions::fromEnvironment();
  std::unique_ptr<Communicator> comm =
      createCommunicator("gloo", launch, options);
  if (rank == 0) {
    std::printf("# all_gather / reduce_scatter(sum), f32, gloo over loopback "
                "TCP, %d ranks\n",
                nproc);
    std::printf("# %12s %12s | %10s %9s %9s | %10s %9s %9s | %9s %7s %7s\n",
                "size(B)", "count", "ag us", "algbw", "busbw", "rs us", "algbw",
                "busbw", "memcpy", "ag/cpy", "rs/cpy");
    std::printf("# %12s %12s | %10s %9s %9s | %10s %9s %9s | %9s %7s %7s\n", "",
                "(elements)", "", "GB/s", "GB/s", "", "GB/s", "GB/s", "GB/s",
                "busbw", "busbw");
  }
  for (int64_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
    int64_t numel = bytes / 4;
    ShardRange own = shardRange(numel, nproc, rank);
    std::vector<float> full(numel, 1.0f),
        shard(std::max<int64_t>(1, own.count), 1.0f);
    int iters = itersFor(bytes);
    double ag = timeCollective(*comm, iters, [&] {
      comm->allGather(DType::F32, shard.data(), full.data(), numel);
    });
    double rs = timeCollective(*comm, iters, [&] {
      comm->reduceScatter(DType::F32, full.data(), shard.data(), numel,
                          CommReduceOp::Sum);
    });
    if (rank == 0) {
      double factor = double(nproc - 1) / nproc;
      double agAlg = bytes / ag / 1e9, rsAlg = bytes / rs / 1e9;
      double cpy = bytes / memcpySeconds(bytes) / 1e9;
      std::printf("  %12lld %12lld | %10.1f %9.3f %9.3f | %10.1f %9.3f %9.3f | "
                  "%9.2f %7.3f %7.3f\n",
                  static_cast<long long>(bytes), static_cast<long long>(numel),
                  ag * 1e6, agAlg, agAlg * factor, rs * 1e6, rsAlg,
                  rsAlg * factor, cpy, agAlg * factor / cpy,
                  rsAlg * factor / cpy);
      std::fflush(stdout);
    }
  }
  comm->barrier();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int nproc = 2, port = 0;
  int64_t maxBytes = int64_t(256) << 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--nproc")
      nproc = std::atoi(argv[i + 1]);
    else if (flag == "--max-bytes")
      maxBytes = std::atoll(argv[i + 1]);
    else if (flag == "--port")
      port = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--nproc N] [--max-bytes B] [--port P]\n",
                   argv[0]);
      return 2;
    }
  }
  if (port == 0)
    port = 20000 + getpid() % 20000;
  std::vector<pid_t> children;
  for (int r = 0; r < nproc; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      try {
        std::_Exit(runRank(r, nproc, port, maxBytes));
      } catch (const std::exception &e) {
        std::fprintf(stderr, "rank %d: %s\n", r, e.what());
        std::_Exit(1);
      }
    }
    children.push_back(pid);
  }
  int failures = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failures ? 1 : 0;
}
