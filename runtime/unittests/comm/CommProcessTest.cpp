//===- CommProcessTest.cpp - Collectives across real processes ------------===//
//
// Every test starts a job of fsdprt_comm_worker processes over loopback TCP
// (the checks against the float64 reference run inside the workers) and
// asserts on exit codes and on the error messages of surviving ranks.
// Timeouts are short (1-2 s) so that the fault tests finish quickly.
//
//===----------------------------------------------------------------------===//
#include "Launcher.h"

#include <gtest/gtest.h>

namespace fsdp {
namespace rt {
namespace test {
namespace {

void expectAllPass(const JobResult &job) {
  ASSERT_FALSE(job.hung) << job.describe();
  for (const RankResult &r : job.ranks)
    EXPECT_EQ(r.exitCode, 0) << job.describe();
}

class CollectivesOnWorld : public ::testing::TestWithParam<int> {};

// Every op and dtype, sizes 0, < world size, not divisible, divisible and
// multi-segment, on 1-4 processes, against the float64 reference.
TEST_P(CollectivesOnWorld, MatchReference) {
  JobSpec spec;
  spec.scenario = "collectives";
  spec.worldSize = GetParam();
  expectAllPass(runJob(spec));
}

INSTANTIATE_TEST_SUITE_P(Processes, CollectivesOnWorld,
                         ::testing::Values(1, 2, 3, 4),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Shard and replicate groups of a 2x2 mesh, and the hybrid-sharding
// gradient path (reduce_scatter in shard, all_reduce across replicas).
TEST(CommProcess, MeshSubgroups2x2MatchReference) {
  JobSpec spec;
  spec.scenario = "mesh";
  spec.worldSize = 4;
  expectAllPass(runJob(spec));
}

class AvgIdentity : public ::testing::TestWithParam<int> {};

// reduce_scatter(avg) == pre-divide -> all_reduce -> post-divide -> slice.
TEST_P(AvgIdentity, ReduceScatterAvgEqualsManualPath) {
  JobSpec spec;
  spec.scenario = "avg-identity";
  spec.worldSize = GetParam();
  expectAllPass(runJob(spec));
}

INSTANTIATE_TEST_SUITE_P(Processes, AvgIdentity, ::testing::Values(3, 4),
                         [](const ::testing::TestParamInfo<int> &info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Collectives on two streams of one communicator at once, consumed through
// an event, with the all-gather / reduce-scatter delay hooks on.
TEST(CommProcess, StreamsAndEventsOrderDelayedCollectives) {
  JobSpec spec;
  spec.scenario = "streams";
  spec.worldSize = 2;
  spec.env["FSDPRT_DELAY_ALLGATHER_MS"] = "150";
  spec.env["FSDPRT_DELAY_REDUCE_SCATTER_MS"] = "50";
  // A different delay per rank makes the streams interleave differently.
  spec.rankEnv[1]["FSDPRT_DELAY_ALLGATHER_MS"] = "20";
  spec.rankEnv[1]["FSDPRT_DELAY_REDUCE_SCATTER_MS"] = "200";
  expectAllPass(runJob(spec));
}

// A rank killed in the middle of all_reduces: every survivor fails with an
// error naming the collective, the group and its rank, within the timeout.
TEST(CommProcess, KilledRankMakesSurvivorsFail) {
  JobSpec spec;
  spec.scenario = "kill";
  spec.worldSize = 3;
  spec.env["FSDPRT_COLLECTIVE_TIMEOUT_MS"] = "2000";
  spec.env["FSDPRT_TEST_VICTIM"] = "1";
  spec.env["FSDPRT_TEST_KILL_AFTER_MS"] = "400";
  spec.deadline = std::chrono::milliseconds(20000);
  JobResult job = runJob(spec);
  ASSERT_FALSE(job.hung) << job.describe();
  EXPECT_EQ(job.ranks[1].exitCode, -SIGKILL) << job.describe();
  for (int r : {0, 2}) {
    const std::string &err = job.ranks[r].stderrText;
    EXPECT_EQ(job.ranks[r].exitCode, 3) << job.describe();
    EXPECT_NE(err.find("all_reduce on group 'world' (3 ranks) failed on rank " +
                       std::to_string(r)),
              std::string::npos)
        << job.describe();
  }
}

// A rank that is alive but never enters the collective: the others time out
// (1 s) with an error naming all_gather, the group and their rank.
TEST(CommProcess, StalledRankMakesOthersTimeOut) {
  JobSpec spec;
  spec.scenario = "stall";
  spec.worldSize = 3;
  spec.env["FSDPRT_COLLECTIVE_TIMEOUT_MS"] = "1000";
  spec.env["FSDPRT_TEST_VICTIM"] = "2";
  spec.killWhenOthersDone = {2};
  spec.deadline = std::chrono::milliseconds(20000);
  JobResult job = runJob(spec);
  ASSERT_FALSE(job.hung) << job.describe();
  for (int r : {0, 1}) {
    const std::string &err = job.ranks[r].stderrText;
    EXPECT_EQ(job.ranks[r].exitCode, 3) << job.describe();
    EXPECT_NE(err.find("all_gather on group 'world' (3 ranks) failed on rank " +
                       std::to_string(r)),
              std::string::npos)
        << job.describe();
    EXPECT_NE(err.find("imed out"), std::string::npos) << job.describe();
  }
}

// WORLD_SIZE=3 with only two processes: the join times out (1 s) on both,
// naming the rank that never came.
TEST(CommProcess, MissingRankFailsRendezvous) {
  JobSpec spec;
  spec.scenario = "join";
  spec.worldSize = 3;
  spec.startRanks = {0, 1};
  spec.env["FSDPRT_RENDEZVOUS_TIMEOUT_MS"] = "1000";
  JobResult job = runJob(spec);
  ASSERT_FALSE(job.hung) << job.describe();
  for (int r : {0, 1}) {
    EXPECT_EQ(job.ranks[r].exitCode, 3) << job.describe();
    EXPECT_NE(job.ranks[r].stderrText.find("rank(s) 2 of 3 never joined"),
              std::string::npos)
        << job.describe();
  }
}

// Two processes claiming rank 1 (and none rank 2): the second claim is
// rejected at the join.
TEST(CommProcess, DuplicateRankIsRejected) {
  JobSpec spec;
  spec.scenario = "join";
  spec.worldSize = 3;
  spec.rankEnv[2]["RANK"] = "1";
  spec.env["FSDPRT_RENDEZVOUS_TIMEOUT_MS"] = "1000";
  JobResult job = runJob(spec);
  ASSERT_FALSE(job.hung) << job.describe();
  std::string all = job.ranks[0].stderrText + job.ranks[1].stderrText +
                    job.ranks[2].stderrText;
  EXPECT_NE(all.find("was claimed by another process"), std::string::npos)
      << job.describe();
}

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
