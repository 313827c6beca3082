//===- LaunchEnvTest.cpp - Launcher environment conventions ---------------===//
#include "fsdp/rt/Comm.h"
#include "fsdp/rt/Error.h"

#include <gtest/gtest.h>

#include <map>

namespace fsdp {
namespace rt {
namespace {

LaunchInfo parse(const std::map<std::string, std::string> &env) {
  return LaunchInfo::fromEnvironment([&](const char *name) -> const char * {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnv, TorchrunVariables) {
  LaunchInfo i = parse({{"RANK", "5"},
                        {"WORLD_SIZE", "8"},
                        {"LOCAL_RANK", "1"},
                        {"LOCAL_WORLD_SIZE", "4"},
                        {"MASTER_ADDR", "10.0.0.7"},
                        {"MASTER_PORT", "12345"},
                        {"TORCHELASTIC_RUN_ID", "run42"}});
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.rank, 5);
  EXPECT_EQ(i.worldSize, 8);
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localWorldSize, 4);
  EXPECT_EQ(i.masterAddr, "10.0.0.7");
  EXPECT_EQ(i.masterPort, 12345);
  EXPECT_EQ(i.jobId, "run42");
  EXPECT_EQ(i.storeFd, -1);
  EXPECT_EQ(parse({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"FSDPRT_STORE_FD", "7"}})
                .storeFd,
            7);
}

TEST(LaunchEnv, TorchrunAgentStoreAndRestartCount) {
  LaunchInfo plain = parse({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  EXPECT_FALSE(plain.agentStore);
  EXPECT_EQ(plain.restartCount, 0);
  LaunchInfo agent = parse({{"RANK", "1"},
                            {"WORLD_SIZE", "2"},
                            {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                            {"TORCHELASTIC_RESTART_COUNT", "3"}});
  EXPECT_TRUE(agent.agentStore);
  EXPECT_EQ(agent.restartCount, 3);
  // torchrun writes str(bool): anything but "True" is no agent store.
  EXPECT_FALSE(parse({{"RANK", "0"},
                      {"WORLD_SIZE", "2"},
                      {"TORCHELASTIC_USE_AGENT_STORE", "False"}})
                   .agentStore);
}

TEST(LaunchEnv, MpirunVariables) {
  LaunchInfo i = parse({{"OMPI_COMM_WORLD_RANK", "3"},
                        {"OMPI_COMM_WORLD_SIZE", "4"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(i.launcher, "mpirun");
  EXPECT_EQ(i.rank, 3);
  EXPECT_EQ(i.worldSize, 4);
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.localWorldSize, 2);
  EXPECT_EQ(i.masterAddr, "127.0.0.1");
  EXPECT_EQ(i.masterPort, 29500);
}

TEST(LaunchEnv, SrunVariablesAndSlurmJobId) {
  LaunchInfo i = parse({{"SLURM_PROCID", "2"},
                        {"SLURM_NTASKS", "3"},
                        {"SLURM_LOCALID", "0"},
                        {"SLURM_JOB_ID", "777"},
                        {"MASTER_ADDR", "node01"}});
  EXPECT_EQ(i.launcher, "srun");
  EXPECT_EQ(i.rank, 2);
  EXPECT_EQ(i.worldSize, 3);
  EXPECT_EQ(i.localRank, 0);
  EXPECT_EQ(i.jobId, "777");
  EXPECT_EQ(i.masterAddr, "node01");
}

TEST(LaunchEnv, TorchrunTakesPrecedenceAndJobIdOverride) {
  LaunchInfo i = parse({{"RANK", "1"},
                        {"WORLD_SIZE", "2"},
                        {"SLURM_PROCID", "7"},
                        {"SLURM_NTASKS", "16"},
                        {"SLURM_JOB_ID", "777"},
                        {"FSDPRT_JOB_ID", "mine"}});
  EXPECT_EQ(i.launcher, "torchrun");
  EXPECT_EQ(i.rank, 1);
  EXPECT_EQ(i.localRank, 1);
  EXPECT_EQ(i.jobId, "mine");
}

TEST(LaunchEnv, NothingSetIsOneProcess) {
  LaunchInfo i = parse({});
  EXPECT_EQ(i.launcher, "single-process");
  EXPECT_EQ(i.rank, 0);
  EXPECT_EQ(i.worldSize, 1);
}

TEST(LaunchEnv, MalformedOrIncompleteValuesAreErrorsNamingTheVariable) {
  struct Case {
    std::map<std::string, std::string> env;
    const char *mentions;
  };
  for (const Case &c :
       {Case{{{"RANK", "1"}, {"WORLD_SIZE", "two"}}, "WORLD_SIZE='two'"},
        Case{{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "RANK='2'"},
        Case{{{"RANK", "0"}}, "WORLD_SIZE is not set"},
        Case{{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_PORT", "99999"}},
             "MASTER_PORT"},
        Case{{{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}},
             "OMPI_COMM_WORLD_RANK"},
        Case{{{"RANK", "0"},
              {"WORLD_SIZE", "2"},
              {"TORCHELASTIC_RESTART_COUNT", "once"}},
             "TORCHELASTIC_RESTART_COUNT='once'"}}) {
    try {
      parse(c.env);
      ADD_FAILURE() << "accepted an environment that mentions " << c.mentions;
    } catch (const Error &e) {
      EXPECT_EQ(e.status(), Status::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find(c.mentions), std::string::npos)
          << e.what();
    }
  }
}

} // namespace
} // namespace rt
} // namespace fsdp
