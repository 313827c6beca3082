//===- CheckpointTest.cpp - Full and sharded checkpoints ------------------===//
//
// Ranks are threads of this process, each with its own CPU context and a
// Gloo communicator over loopback (as the comm tests' 1-process cases, with
// N contexts): enough for the all-gathers of a full save.
//
//===----------------------------------------------------------------------===//
#include "runner/Checkpoint.h"
#include "runner/Init.h"

#include "TestProgram.h"

#include "fsdp/rt/Safetensors.h"
#include "fsdp/rt/fsdprt.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

namespace fsdp {
namespace driver {
namespace {

namespace fs = std::filesystem;
using Image = std::vector<uint8_t>;

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

void check(int32_t status, const char *what) {
  if (status != FSDPRT_OK)
    throw std::runtime_error(std::string(what) + ": " + fsdprt_last_error());
}

/// What rank `rank` holds after some training: initialised parameters,
/// optimizer state that is a function of the flat index (zero in the
/// padding), non-default buffers. Independent of the world size.
Image trainedImage(const Program &p, int rank) {
  Image image;
  initializeRank(p, 42, rank, image);
  for (size_t u = 0; u < p.units.size(); ++u) {
    const UnitInfo &unit = p.units[u];
    int64_t begin = shardBegin(p, unit, rank);
    for (size_t s = 0; s < unit.state.size(); ++s)
      for (int64_t i = 0; i < unit.shardNumel; ++i) {
        int64_t flat = begin + i;
        float v = flat < unit.flatNumel ? (s + 1) * 1000.0f + u * 100 + flat
                                        : 0.0f;
        std::memcpy(image.data() + unit.state[s].offset + 4 * i, &v, 4);
      }
  }
  float mean[3] = {0.5f, -1.0f, 2.0f};
  std::memcpy(image.data() + p.buffers[0].offset, mean, sizeof mean);
  int64_t tracked = 7;
  std::memcpy(image.data() + p.buffers[2].offset, &tracked, 8);
  return image;
}

/// One rank's context and communicators.
struct RankComm {
  int64_t ctx = 0, world = 0, shard = 0, replicate = 0;
  std::string error;
};

/// Joins every rank of `p`'s mesh (one thread each) over loopback, as one
/// job. The port is picked free and closed before rank 0's store binds it,
/// so a test process running beside this one can take it first: the job id
/// is unique to this process and call (a rank reaching another job's store
/// is refused there, never joined to it), and a failed rendezvous is tried
/// again on a new port, as PyTorch's tests do on EADDRINUSE.
std::vector<RankComm> joinRanks(const Program &p) {
  static int calls = 0;
  std::string job =
      "ckpt-test-" + std::to_string(getpid()) + "-" + std::to_string(++calls);
  for (int attempt = 1;; ++attempt) {
    std::vector<RankComm> ranks(p.worldSize);
    int port = freePort();
    std::vector<std::thread> threads;
    for (int rank = 0; rank < p.worldSize; ++rank)
      threads.emplace_back([&, rank] {
        RankComm &r = ranks[rank];
        try {
          check(fsdprt_context_create("cpu", rank, p.worldSize, p.arenaBytes,
                                      1, &r.ctx),
                "context");
          check(fsdprt_comm_init(r.ctx, "gloo", rank, p.worldSize,
                                 "127.0.0.1", port, job.c_str(), 20000, 20000,
                                 &r.world),
                "comm");
          r.shard = r.world;
          if (p.replicate > 1)
            check(fsdprt_comm_split_mesh(r.ctx, r.world, p.replicate, p.shard,
                                         &r.shard, &r.replicate),
                  "split");
        } catch (const std::exception &e) {
          r.error = e.what();
        }
      });
    for (std::thread &t : threads)
      t.join();
    std::string errors;
    for (int rank = 0; rank < p.worldSize; ++rank)
      if (!ranks[rank].error.empty())
        errors += "rank " + std::to_string(rank) + ": " + ranks[rank].error +
                  " (port " + std::to_string(port) + ")\n";
    if (errors.empty())
      return ranks;
    for (RankComm &r : ranks)
      if (r.ctx)
        fsdprt_context_destroy(r.ctx);
    if (attempt == 3)
      throw std::runtime_error("rendezvous failed 3 times:\n" + errors);
  }
}

/// Runs `body(rank, ctx, persistentBuf, shardComm)` on every rank of `p`'s
/// mesh, each rank a thread holding trainedImage(p, rank) in its buffer.
void runRanks(const Program &p,
              const std::function<void(int, int64_t, int64_t, int64_t)> &body) {
  std::vector<RankComm> ranks;
  try {
    ranks = joinRanks(p);
  } catch (const std::exception &e) {
    FAIL() << e.what();
  }
  std::mutex mutex;
  std::string errors;
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p.worldSize; ++rank)
    threads.emplace_back([&, rank] {
      const RankComm &r = ranks[rank];
      try {
        int64_t buf = 0;
        check(fsdprt_buffer_alloc_at(r.ctx, 0, p.persistentBytes, &buf),
              "alloc");
        Image image = trainedImage(p, rank);
        check(fsdprt_copy_from_host(r.ctx, FSDPRT_DEFAULT_STREAM, buf, 0,
                                    image.data(), p.persistentBytes),
              "copy");
        check(fsdprt_context_synchronize(r.ctx), "sync");
        body(rank, r.ctx, buf, r.shard);
      } catch (const std::exception &e) {
        std::lock_guard<std::mutex> lock(mutex);
        errors += "rank " + std::to_string(rank) + ": " + e.what() + "\n";
      }
      fsdprt_context_destroy(r.ctx);
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(errors, "");
}

class Checkpoint : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("fsdp-ckpt-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Loading at every rank of `p` gives what those ranks held when saved.
  void expectLoadsInto(const std::string &path, const Program &p) {
    for (int rank = 0; rank < p.worldSize; ++rank) {
      Image image;
      LoadResult res = load(path, p, rank, image);
      EXPECT_EQ(res.stepCount, 7);
      EXPECT_TRUE(res.optimizerStateLoaded);
      EXPECT_TRUE(image == trainedImage(p, rank))
          << "rank " << rank << " of " << p.replicate << " x " << p.shard;
    }
  }

  std::string errorOf(const std::string &path, const Program &p) {
    Image image;
    try {
      load(path, p, 0, image);
    } catch (const std::runtime_error &e) {
      return e.what();
    }
    return "(no error)";
  }

  std::string saveFullAt(const Program &p) {
    std::string path = (dir_ / "sub" / "full.safetensors").string();
    runRanks(p, [&](int rank, int64_t ctx, int64_t buf, int64_t comm) {
      saveFull(path, p, ctx, FSDPRT_DEFAULT_STREAM, {buf, 0}, comm, rank, 7,
               {{"lr", "0.001"}, {"format", "ignored"}});
    });
    return path;
  }

  std::string saveShardedAt(const Program &p) {
    std::string path = (dir_ / "sharded").string();
    runRanks(p, [&](int rank, int64_t ctx, int64_t buf, int64_t) {
      saveSharded(path, p, ctx, {buf, 0}, rank, 7, {{"note", "x"}});
    });
    return path;
  }

  fs::path dir_;
};

TEST_F(Checkpoint, FullFileHoldsWholeTensorsByName) {
  std::string path = saveFullAt(test::testProgram(1, 2));
  rt::SafetensorsReader r(path);
  EXPECT_EQ(r.metadata().at("format"), "fsdp-mlir-full");
  EXPECT_EQ(r.metadata().at("model"), "tiny");
  EXPECT_EQ(r.metadata().at("step_count"), "7");
  EXPECT_EQ(r.metadata().at("optimizer"), "adamw");
  EXPECT_EQ(r.metadata().at("lr"), "0.001");
  // 6 params, 12 optimizer states, 3 buffers.
  EXPECT_EQ(r.names().size(), 21u);
  const ParamInfo w = test::testProgram(1, 1).units[1].params[2];
  const rt::TensorInfo &info = r.info(w.name);
  EXPECT_EQ(std::vector<int64_t>(info.shape.begin(), info.shape.end()),
            w.shape);
  std::vector<float> got(24);
  r.read(w.name, got.data(), 96);
  EXPECT_EQ(got, initTensor(w.init, w.shape, 42, w.name));
  r.read("optim.exp_avg_sq." + w.name, got.data(), 96);
  EXPECT_EQ(got[0], 2000.0f + 100 + w.flatOffset);
  EXPECT_EQ(r.info("bn.num_batches_tracked").dtype, rt::DType::I64);
}

TEST_F(Checkpoint, FullRoundTripsAcrossWorldSizes) {
  std::string path = saveFullAt(test::testProgram(1, 2));
  for (int world : {1, 2, 3})
    expectLoadsInto(path, test::testProgram(1, world));
  expectLoadsInto(path, test::testProgram(2, 2));
  LoadResult res;
  Image image;
  res = load(path, test::testProgram(1, 1), 0, image);
  EXPECT_EQ(res.format, "fsdp-mlir-full");
  EXPECT_EQ(res.metadata.at("lr"), "0.001");
}

TEST_F(Checkpoint, HybridMeshSavesFromReplicaZero) {
  std::string path = saveFullAt(test::testProgram(2, 2));
  expectLoadsInto(path, test::testProgram(1, 3));
}

TEST_F(Checkpoint, ShardedSavedAtTwoLoadsAtOneAndThree) {
  std::string dir = saveShardedAt(test::testProgram(1, 2));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "rank-0-of-2.safetensors"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / "rank-1-of-2.safetensors"));
  rt::SafetensorsReader r((fs::path(dir) / "rank-1-of-2.safetensors").string());
  EXPECT_EQ(r.metadata().at("format"), "fsdp-mlir-sharded");
  EXPECT_EQ(r.metadata().at("rank"), "1");
  EXPECT_EQ(r.info("h.0/flat_param").shape[0], 30);
  EXPECT_EQ(r.info("_root/exp_avg").shape[0], 39);
  for (int world : {1, 3})
    expectLoadsInto(dir, test::testProgram(1, world));
  expectLoadsInto(dir, test::testProgram(2, 2));
}

TEST_F(Checkpoint, RankLocalUnitReturnsToItsRank) {
  Program p = test::testProgram(1, 2, "adamw", "tiny", /*rankLocalBlock=*/true);
  const UnitInfo &local = p.units[1];
  ASSERT_NE(trainedImage(p, 0), trainedImage(p, 1));
  // Sharded: every rank gets its own expert back, and the file says which
  // unit is rank-local; a larger world has no expert for its new ranks.
  std::string sharded = saveShardedAt(p);
  expectLoadsInto(sharded, p);
  rt::SafetensorsReader r((fs::path(sharded) / "rank-1-of-2.safetensors").string());
  nlohmann::json units = nlohmann::json::parse(r.metadata().at("units"));
  EXPECT_FALSE(units[0].at("rank_local").get<bool>());
  EXPECT_TRUE(units[1].at("rank_local").get<bool>());
  Program four = test::testProgram(1, 4, "adamw", "tiny", true);
  Image image;
  EXPECT_NO_THROW(load(sharded, four, 1, image));
  try {
    load(sharded, four, 2, image);
    ADD_FAILURE() << "rank 2 loaded an expert it never had";
  } catch (const std::runtime_error &e) {
    EXPECT_EQ(std::string(e.what()),
              "checkpoint '" + sharded +
                  "': was saved by 2 ranks: rank-local unit 'h.0' has no "
                  "copy for rank 2");
  }
  // Full: rank 0's expert (PyTorch's rank-0 full state dict), on every rank.
  std::string full = saveFullAt(p);
  Image rank0 = trainedImage(p, 0);
  for (int rank = 0; rank < 2; ++rank) {
    Image image;
    load(full, p, rank, image);
    EXPECT_EQ(0, std::memcmp(image.data() + local.offset,
                             rank0.data() + local.offset,
                             local.shardNumel * 4))
        << "rank " << rank;
  }
}

TEST_F(Checkpoint, RankLocalUnitAndShardedUnitConvert) {
  // Saved with h.0 sharded, loaded where it is rank-local: every rank gets
  // the whole unit assembled from the shards (not its own shard at offset 0).
  Program sharded = test::testProgram(1, 2);
  Program local = test::testProgram(1, 2, "adamw", "tiny", true);
  std::string dir = saveShardedAt(sharded);
  Program whole = test::testProgram(1, 1);
  Image want = trainedImage(whole, 0);
  for (int rank = 0; rank < 2; ++rank) {
    Image image;
    load(dir, local, rank, image);
    const UnitInfo &u = local.units[1];
    EXPECT_EQ(0, std::memcmp(image.data() + u.offset,
                             want.data() + whole.units[1].offset,
                             u.flatNumel * 4))
        << "rank " << rank;
  }
  // Saved rank-local, loaded where h.0 is sharded: rank 0's copy, sharded.
  std::string localDir = (dir_ / "local").string();
  runRanks(local, [&](int rank, int64_t ctx, int64_t buf, int64_t) {
    saveSharded(localDir, local, ctx, {buf, 0}, rank, 7, {});
  });
  Image rank0 = trainedImage(local, 0);
  std::vector<float> expert(local.units[1].flatNumel);
  std::memcpy(expert.data(), rank0.data() + local.units[1].offset,
              expert.size() * 4);
  for (int rank = 0; rank < 2; ++rank) {
    Image image;
    load(localDir, sharded, rank, image);
    const UnitInfo &u = sharded.units[1];
    int64_t begin = shardBegin(sharded, u, rank);
    int64_t n = std::min(u.shardNumel, u.flatNumel - begin);
    EXPECT_EQ(0, std::memcmp(image.data() + u.offset, expert.data() + begin,
                             n * 4))
        << "rank " << rank;
  }
}

TEST_F(Checkpoint, ShardedHybridLoadsAtOne) {
  std::string dir = saveShardedAt(test::testProgram(2, 2));
  expectLoadsInto(dir, test::testProgram(1, 1));
  // Replica 1's files stand in for replica 0's.
  fs::remove(fs::path(dir) / "rank-1-of-4.safetensors");
  expectLoadsInto(dir, test::testProgram(1, 1));
  fs::remove(fs::path(dir) / "rank-3-of-4.safetensors");
  EXPECT_EQ(errorOf(dir, test::testProgram(1, 1)),
            "checkpoint '" + dir +
                "': is incomplete: rank-1-of-4.safetensors is missing");
}

TEST_F(Checkpoint, AnotherOptimizerLoadsParametersOnly) {
  std::string path = saveFullAt(test::testProgram(1, 2));
  Program sgd = test::testProgram(1, 2, "sgd");
  Image image;
  LoadResult res = load(path, sgd, 1, image);
  EXPECT_FALSE(res.optimizerStateLoaded);
  Image want;
  initializeRank(sgd, 42, 1, want);
  const UnitInfo &u = sgd.units[1];
  EXPECT_EQ(0, std::memcmp(image.data() + u.offset, want.data() + u.offset,
                           u.shardNumel * 4));
  for (int64_t i = 0; i < u.shardNumel * 4; ++i)
    ASSERT_EQ(image[u.state[0].offset + i], 0) << "momentum starts at zero";
}

TEST_F(Checkpoint, WrongModelIsNamed) {
  std::string path = saveFullAt(test::testProgram(1, 2));
  EXPECT_EQ(errorOf(path, test::testProgram(1, 1, "adamw", "other")),
            "checkpoint '" + path + "': holds model 'tiny', not 'other'");
  Program renamed = test::testProgram(1, 1);
  renamed.units[1].params[1].name = "h.0.fc.bias2";
  EXPECT_EQ(errorOf(path, renamed),
            "checkpoint '" + path +
                "': has no parameter 'h.0.fc.bias2' of model 'tiny'");
  Program reshaped = test::testProgram(1, 1);
  reshaped.units[0].params[0].shape = {6, 11};
  EXPECT_EQ(errorOf(path, reshaped),
            "checkpoint '" + path +
                "': parameter 'wte.weight' has shape [11, 6], the model "
                "expects [6, 11]");
  std::string dir = saveShardedAt(test::testProgram(1, 2));
  EXPECT_EQ(errorOf(dir, reshaped),
            "checkpoint '" + dir +
                "': parameter 'wte.weight' has shape [11, 6], the model "
                "expects [6, 11]");
}

TEST_F(Checkpoint, MissingAndCorruptedFilesAreClearErrors) {
  Program p = test::testProgram(1, 1);
  std::string missing = (dir_ / "nope.safetensors").string();
  EXPECT_EQ(errorOf(missing, p), "checkpoint '" + missing + "' does not exist");

  std::string path = saveFullAt(test::testProgram(1, 2));
  fs::resize_file(path, fs::file_size(path) - 10);
  std::string msg = errorOf(path, p);
  EXPECT_EQ(msg.rfind("checkpoint '" + path + "': ", 0), 0u) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;

  std::ofstream(path, std::ios::binary | std::ios::trunc) << "not a checkpoint";
  msg = errorOf(path, p);
  EXPECT_EQ(msg.rfind("checkpoint '" + path + "': ", 0), 0u) << msg;

  fs::create_directories(dir_ / "empty");
  EXPECT_NE(errorOf((dir_ / "empty").string(), p)
                .find("without rank-<r>-of-<W>.safetensors files"),
            std::string::npos);
  std::string dir = saveShardedAt(test::testProgram(1, 2));
  fs::remove(fs::path(dir) / "rank-1-of-2.safetensors");
  EXPECT_EQ(errorOf(dir, p),
            "checkpoint '" + dir +
                "': is incomplete: rank-1-of-2.safetensors is missing");
}

TEST(LatestCheckpoint, TheLargestCompleteStepOfEitherFormat) {
  fs::path dir = fs::path(::testing::TempDir()) /
                 ("fsdp-latest-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  EXPECT_EQ(latestCheckpoint(dir.string()), ""); // no directory yet
  fs::create_directories(dir);
  EXPECT_EQ(latestCheckpoint(dir.string()), "");
  auto touch = [](const fs::path &p) { std::ofstream(p) << "x"; };
  touch(dir / "step-2.safetensors");
  touch(dir / "step-10.safetensors.tmp.123.0"); // an interrupted write
  touch(dir / "notes.txt");
  EXPECT_EQ(latestCheckpoint(dir.string()), (dir / "step-2.safetensors").string());
  // Sharded, complete: every rank-<r>-of-<W> file.
  fs::create_directories(dir / "step-4");
  touch(dir / "step-4" / "rank-0-of-2.safetensors");
  touch(dir / "step-4" / "rank-1-of-2.safetensors");
  EXPECT_EQ(latestCheckpoint(dir.string()), (dir / "step-4").string());
  // Sharded, rank 1's file missing (killed while saving): not a candidate.
  fs::create_directories(dir / "step-6");
  touch(dir / "step-6" / "rank-0-of-2.safetensors");
  EXPECT_EQ(latestCheckpoint(dir.string()), (dir / "step-4").string());
  fs::remove_all(dir);
}

} // namespace
} // namespace driver
} // namespace fsdp
