//===- Launcher.h - Runs N worker processes as one job ----------*- C++ -*-===//
//
// What torchrun does, reduced to tests: pick a free port, start one
// fsdprt_comm_worker per rank with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT
// and a fresh job id, collect exit codes and stderr. A job that outlives
// its deadline is killed and reported as hung, so a broken timeout fails
// the test instead of stalling CI.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_UNITTESTS_COMM_LAUNCHER_H
#define FSDP_RT_UNITTESTS_COMM_LAUNCHER_H

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {
namespace test {

struct RankResult {
  int exitCode = -1; // -signal if killed by a signal
  std::string stderrText;
};

struct JobResult {
  std::vector<RankResult> ranks;
  bool hung = false;
  double seconds = 0;
  /// "rank 0: exit 0\n<stderr>..." for failure messages.
  std::string describe() const;
};

struct JobSpec {
  std::string scenario;
  int worldSize = 2;
  /// Ranks to start (default: all); a missing rank tests the join timeout.
  std::vector<int> startRanks;
  std::map<std::string, std::string> env;
  /// Per-rank command prefix (e.g. {"ip", "netns", "exec", "ns0"}).
  std::map<int, std::vector<std::string>> prefix;
  std::map<int, std::map<std::string, std::string>> rankEnv;
  std::chrono::milliseconds deadline{30000};
  /// Ranks still running when all others have exited are killed (a stalled
  /// victim), not reported as hung.
  std::vector<int> killWhenOthersDone;
};

/// A TCP port that was free a moment ago on 127.0.0.1.
int freePort();
JobResult runJob(const JobSpec &spec);

} // namespace test
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_UNITTESTS_COMM_LAUNCHER_H
