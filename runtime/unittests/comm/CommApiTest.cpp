//===- CommApiTest.cpp - Communicator C ABI in one process ----------------===//
#include "fsdp/rt/Comm.h"
#include "fsdp/rt/fsdprt.h"

#include "Launcher.h"

#include <gtest/gtest.h>

#include <string>

namespace fsdp {
namespace rt {
namespace {

TEST(ShardRange, FollowsTorchChunk) {
  // torch.arange(5).chunk(4) -> [0,1], [2,3], [4] and nothing for rank 3.
  int64_t begin, count;
  const int64_t want[4][2] = {{0, 2}, {2, 2}, {4, 1}, {5, 0}};
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(fsdprt_comm_shard_range(5, 4, i, &begin, &count), FSDPRT_OK);
    EXPECT_EQ(begin, want[i][0]) << "chunk " << i;
    EXPECT_EQ(count, want[i][1]) << "chunk " << i;
  }
  ShardRange r = shardRange(10, 3, 2); // chunks of 4, 4, 2
  EXPECT_EQ(r.begin, 8);
  EXPECT_EQ(r.count, 2);
  EXPECT_EQ(shardRange(0, 3, 1).count, 0);
  EXPECT_EQ(fsdprt_comm_shard_range(5, 4, 4, &begin, &count),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

class CommApi : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(fsdprt_context_create("cpu", 0, 1, 1 << 20, 1, &ctx), FSDPRT_OK)
        << fsdprt_last_error();
  }
  void TearDown() override { fsdprt_context_destroy(ctx); }
  int64_t initGloo() {
    int64_t comm = 0;
    int port = test::freePort();
    EXPECT_EQ(fsdprt_comm_init(ctx, "gloo", 0, 1, "127.0.0.1", port, "comm-api",
                               2000, 2000, &comm),
              FSDPRT_OK)
        << fsdprt_last_error();
    return comm;
  }
  int64_t ctx = 0;
};

TEST_F(CommApi, BadArgumentsAreRejectedBeforeEnqueue) {
  int64_t comm = initGloo();
  int64_t buf;
  ASSERT_EQ(fsdprt_buffer_alloc(ctx, 64, &buf), FSDPRT_OK);
  EXPECT_EQ(fsdprt_all_gather(ctx, 1, comm + 1, FSDPRT_F32, buf, 0, buf, 0, 4),
            FSDPRT_ERR_INVALID_HANDLE);
  EXPECT_EQ(fsdprt_all_gather(ctx, 1, comm, FSDPRT_I32, buf, 0, buf, 0, 4),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_all_reduce(ctx, 1, comm, FSDPRT_F32, 7, buf, 0, buf, 0, 4),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_reduce_scatter(ctx, 1, comm, FSDPRT_F32, FSDPRT_COMM_MAX,
                                  buf, 0, buf, 0, 4, 1, 1),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_reduce_scatter(ctx, 1, comm, FSDPRT_F32, FSDPRT_COMM_SUM,
                                  buf, 0, buf, 0, 4, 0.0, 1),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_all_reduce(ctx, 1, comm, FSDPRT_F32, FSDPRT_COMM_SUM, buf, 0,
                              buf, 0, 17),
            FSDPRT_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(fsdprt_last_error()).find("out"), std::string::npos)
      << fsdprt_last_error();
  EXPECT_EQ(fsdprt_broadcast(ctx, 1, comm, FSDPRT_I64, buf, 0, 2, 1),
            FSDPRT_ERR_INVALID_ARGUMENT);
  int64_t s, r;
  EXPECT_EQ(fsdprt_comm_split_mesh(ctx, comm, 2, 2, &s, &r),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_comm_set_timeout(ctx, comm, 0), FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_stream_synchronize(ctx, 1), FSDPRT_OK);
  EXPECT_EQ(fsdprt_comm_destroy(ctx, comm), FSDPRT_OK);
  EXPECT_EQ(fsdprt_comm_destroy(ctx, comm), FSDPRT_ERR_INVALID_HANDLE);
}

TEST_F(CommApi, UnknownBackendAndRankMismatchAreErrors) {
  int64_t comm;
  EXPECT_EQ(fsdprt_comm_init(ctx, "carrier-pigeon", 0, 1, "127.0.0.1",
                             test::freePort(), nullptr, 1000, 1000, &comm),
            FSDPRT_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(fsdprt_last_error()).find("gloo"), std::string::npos)
      << fsdprt_last_error();
  EXPECT_EQ(fsdprt_comm_init(ctx, "gloo", 1, 2, "127.0.0.1", test::freePort(),
                             nullptr, 1000, 1000, &comm),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsdprt_last_error()).find("context is rank 0 of 1"),
            std::string::npos)
      << fsdprt_last_error();
}

// Built whenever CUDA and NCCL are found: on the CPU backend's context its
// creation fails cleanly with a message (never a crash): without a GPU
// for want of one, with one because NCCL runs on the context's device and
// a CPU context has none.
TEST_F(CommApi, NcclOnACpuContextFailsCleanly) {
  bool built = false;
  for (const std::string &name : commBackendNames())
    built |= name == "nccl";
  if (!built)
    GTEST_SKIP() << "runtime built without NCCL";
  int64_t comm = 0;
  int32_t status =
      fsdprt_comm_init(ctx, "nccl", 0, 1, "127.0.0.1", test::freePort(),
                       nullptr, 2000, 2000, &comm);
  EXPECT_EQ(status, FSDPRT_ERR_UNSUPPORTED) << fsdprt_last_error();
  std::string message = fsdprt_last_error();
  EXPECT_TRUE(message.find("no usable CUDA device") != std::string::npos ||
              message.find("NCCL needs a context on the cuda backend") !=
                  std::string::npos)
      << message;
}

// A world of one serves no store: two such jobs on one MASTER_PORT (the
// default when nothing is set) do not collide.
TEST_F(CommApi, OneRankJobsShareAPortWithoutColliding) {
  int64_t ctx2 = 0, a = 0, b = 0;
  ASSERT_EQ(fsdprt_context_create("cpu", 0, 1, 1 << 20, 1, &ctx2), FSDPRT_OK);
  int port = test::freePort();
  EXPECT_EQ(fsdprt_comm_init(ctx, "gloo", 0, 1, "127.0.0.1", port, nullptr,
                             1000, 1000, &a),
            FSDPRT_OK)
      << fsdprt_last_error();
  EXPECT_EQ(fsdprt_comm_init(ctx2, "gloo", 0, 1, "127.0.0.1", port, nullptr,
                             1000, 1000, &b),
            FSDPRT_OK)
      << fsdprt_last_error();
  EXPECT_EQ(fsdprt_context_destroy(ctx2), FSDPRT_OK);
}

TEST_F(CommApi, SingleRankCollectivesAreCopies) {
  int64_t comm = initGloo();
  float host[5] = {1, -2, 3, 0.5f, 8}, out[5] = {};
  int64_t in, res;
  ASSERT_EQ(fsdprt_buffer_alloc(ctx, 20, &in), FSDPRT_OK);
  ASSERT_EQ(fsdprt_buffer_alloc(ctx, 20, &res), FSDPRT_OK);
  ASSERT_EQ(fsdprt_copy_from_host(ctx, 1, in, 0, host, 20), FSDPRT_OK);
  ASSERT_EQ(fsdprt_reduce_scatter(ctx, 1, comm, FSDPRT_F32, FSDPRT_COMM_AVG, in,
                                  0, res, 0, 5, 2.0, 1.0),
            FSDPRT_OK);
  ASSERT_EQ(fsdprt_copy_to_host(ctx, 1, out, res, 0, 20), FSDPRT_OK);
  ASSERT_EQ(fsdprt_stream_synchronize(ctx, 1), FSDPRT_OK)
      << fsdprt_last_error();
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(out[i], host[i] / 2) << i;
}

} // namespace
} // namespace rt
} // namespace fsdp
