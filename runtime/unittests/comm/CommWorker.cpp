//===- CommWorker.cpp - One rank of a multi-process comm test -------------===//
//
// fsdprt_comm_worker <scenario>: joins the job described by the torchrun
// variables the test harness sets (RANK, WORLD_SIZE, MASTER_ADDR, ...),
// runs the scenario through the C ABI (collectives enqueued on streams, as
// generated code does) or the C++ API (synchronous), and checks every
// result against a float64 reference. See WorkerUtil.h for exit codes.
//
//===----------------------------------------------------------------------===//
#include "WorkerUtil.h"

#include "fsdp/rt/Comm.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <unistd.h>

using namespace worker;

namespace {

const int32_t kDtypes[] = {FSDPRT_F32, FSDPRT_BF16, FSDPRT_F16};

std::vector<int64_t> sizesFor(int32_t n) {
  // 0; fewer elements than ranks (ranks with empty chunks); not divisible;
  // divisible; a few thousand (several Gloo segments).
  return {0, 1, n + 1, 4 * n, 3 * n + 2, 4099};
}

struct Group {
  int64_t comm;
  std::vector<int32_t> ranks; // global ranks in group order
  int32_t me;                 // this rank's index in the group
  std::string name;
};

/// all_gather, reduce_scatter (sum, avg, pre/post factors), all_reduce (sum,
/// avg, max), broadcast from every root and barrier, on every dtype and
/// size, over `g`, through the C ABI on the default stream.
void checkCollectives(Rank &r, const Group &g, uint32_t salt) {
  const int32_t n = static_cast<int32_t>(g.ranks.size());
  const int32_t me = g.me;
  for (int32_t dt : kDtypes) {
    const int64_t es = dtypeBytes(dt);
    for (int64_t numel : sizesFor(n)) {
      std::string where = g.name + " " + dtypeLabel(dt) + " numel " +
                          std::to_string(numel) + ": ";
      int64_t begin, count;
      RT(fsdprt_comm_shard_range(numel, n, me, &begin, &count));

      // all_gather: rank q contributes inputOf(q, i) for i in its chunk.
      {
        std::vector<double> mine, want(numel);
        for (int64_t i = 0; i < count; ++i)
          mine.push_back(inputOf(g.ranks[me], begin + i, salt));
        for (int32_t q = 0; q < n; ++q) {
          int64_t b, c;
          RT(fsdprt_comm_shard_range(numel, n, q, &b, &c));
          for (int64_t i = 0; i < c; ++i)
            want[b + i] = inputOf(g.ranks[q], b + i, salt);
        }
        int64_t in = r.upload(encode(dt, mine));
        int64_t out = r.alloc(numel * es);
        RT(fsdprt_all_gather(r.ctx, r.stream, g.comm, dt, in, 0, out, 0,
                             numel));
        expectNear(decode(dt, r.download(out, numel * es)), want, 0,
                   where + "all_gather");
        // In place: the input is the output's own chunk.
        RT(fsdprt_fill(r.ctx, r.stream, dt, out, 0, numel, -99.0));
        RT(fsdprt_copy(r.ctx, r.stream, out, begin * es, in, 0, count * es));
        RT(fsdprt_all_gather(r.ctx, r.stream, g.comm, dt, out, begin * es, out,
                             0, numel));
        expectNear(decode(dt, r.download(out, numel * es)), want, 0,
                   where + "all_gather in place");
        RT(fsdprt_buffer_free(r.ctx, r.stream, in));
        RT(fsdprt_buffer_free(r.ctx, r.stream, out));
      }

      // Every rank's full input, and the float64 sum and max over ranks.
      std::vector<double> mine(numel), sum(numel, 0.0), max(numel, -1e300);
      for (int64_t i = 0; i < numel; ++i) {
        mine[i] = inputOf(g.ranks[me], i, salt + 1);
        for (int32_t q = 0; q < n; ++q) {
          double v = inputOf(g.ranks[q], i, salt + 1);
          sum[i] += v;
          max[i] = std::max(max[i], v);
        }
      }
      int64_t in = r.upload(encode(dt, mine));

      // reduce_scatter: (sum / pre / post) [/ n].
      struct RsCase {
        int32_t op;
        double pre, post;
      };
      for (RsCase c :
           {RsCase{FSDPRT_COMM_SUM, 1, 1}, RsCase{FSDPRT_COMM_AVG, 1, 1},
            RsCase{FSDPRT_COMM_SUM, 2, 0.5 * n},
            RsCase{FSDPRT_COMM_AVG, 4, 0.25}}) {
        double div = c.pre * c.post * (c.op == FSDPRT_COMM_AVG ? n : 1);
        std::vector<double> want;
        for (int64_t i = 0; i < count; ++i)
          want.push_back(sum[begin + i] / div);
        int64_t out = r.alloc(count * es);
        RT(fsdprt_reduce_scatter(r.ctx, r.stream, g.comm, dt, c.op, in, 0, out,
                                 0, numel, c.pre, c.post));
        // Exact inputs and f32 accumulation: one rounding of the quotient.
        expectNear(decode(dt, r.download(out, count * es)), want, tolerance(dt),
                   where + "reduce_scatter op " + std::to_string(c.op) +
                       " pre " + std::to_string(c.pre) + " post " +
                       std::to_string(c.post));
        RT(fsdprt_buffer_free(r.ctx, r.stream, out));
      }

      // all_reduce: sum, avg, max; in place for the last.
      for (int32_t op : {FSDPRT_COMM_SUM, FSDPRT_COMM_AVG, FSDPRT_COMM_MAX}) {
        std::vector<double> want(numel);
        for (int64_t i = 0; i < numel; ++i)
          want[i] = op == FSDPRT_COMM_MAX   ? max[i]
                    : op == FSDPRT_COMM_SUM ? sum[i]
                                            : sum[i] / n;
        int64_t out = op == FSDPRT_COMM_MAX ? in : r.alloc(numel * es);
        RT(fsdprt_all_reduce(r.ctx, r.stream, g.comm, dt, op, in, 0, out, 0,
                             numel));
        expectNear(decode(dt, r.download(out, numel * es)), want,
                   op == FSDPRT_COMM_AVG ? tolerance(dt) : 0,
                   where + "all_reduce op " + std::to_string(op));
        if (out != in)
          RT(fsdprt_buffer_free(r.ctx, r.stream, out));
      }
      RT(fsdprt_buffer_free(r.ctx, r.stream, in));

      // broadcast from every root.
      for (int32_t root = 0; root < n; ++root) {
        std::vector<double> own(numel), want(numel);
        for (int64_t i = 0; i < numel; ++i) {
          own[i] = inputOf(g.ranks[me], i, salt + 2);
          want[i] = inputOf(g.ranks[root], i, salt + 2);
        }
        int64_t buf = r.upload(encode(dt, own));
        RT(fsdprt_broadcast(r.ctx, r.stream, g.comm, dt, buf, 0, numel, root));
        expectNear(decode(dt, r.download(buf, numel * es)), want, 0,
                   where + "broadcast root " + std::to_string(root));
        RT(fsdprt_buffer_free(r.ctx, r.stream, buf));
      }
      RT(fsdprt_barrier(r.ctx, r.stream, g.comm));
      r.sync();
    }
  }
}

Group worldGroup(Rank &r) {
  Group g{0, {}, r.rank, "world"};
  RT(fsdprt_comm_init_env(r.ctx, "gloo", &g.comm));
  for (int32_t q = 0; q < r.worldSize; ++q)
    g.ranks.push_back(q);
  return g;
}

int scenarioCollectives(Rank &r) {
  Group g = worldGroup(r);
  checkCollectives(r, g, 1);
  return 0;
}

/// The groups of a 2x2 mesh: shard groups {0,1},{2,3}; replicate groups
/// {0,2},{1,3}; each checked like the world, with its own members' inputs.
int scenarioMesh(Rank &r) {
  if (r.worldSize != 4)
    failCheck("the mesh scenario needs 4 ranks");
  Group world = worldGroup(r);
  Group shard{0, {}, 0, "shard"}, replicate{0, {}, 0, "replicate"};
  RT(fsdprt_comm_split_mesh(r.ctx, world.comm, 2, 2, &shard.comm,
                            &replicate.comm));
  int32_t row = r.rank / 2, col = r.rank % 2;
  shard.ranks = {row * 2, row * 2 + 1};
  shard.me = col;
  replicate.ranks = {col, 2 + col};
  replicate.me = row;
  for (const Group *g : {&shard, &replicate}) {
    int32_t gotRank, gotSize;
    RT(fsdprt_comm_rank(r.ctx, g->comm, &gotRank));
    RT(fsdprt_comm_size(r.ctx, g->comm, &gotSize));
    if (gotRank != g->me || gotSize != 2)
      failCheck(g->name + ": rank/size " + std::to_string(gotRank) + "/" +
                std::to_string(gotSize) + ", expected " +
                std::to_string(g->me) + "/2");
  }
  checkCollectives(r, shard, 11);
  checkCollectives(r, replicate, 21);
  // Hybrid sharding's gradient path: reduce-scatter inside the shard group,
  // then all-reduce of the shard across replicas, equals the world sum.
  const int64_t numel = 10;
  std::vector<double> mine(numel), want;
  for (int64_t i = 0; i < numel; ++i)
    mine[i] = inputOf(r.rank, i, 31);
  int64_t begin, count;
  RT(fsdprt_comm_shard_range(numel, 2, col, &begin, &count));
  for (int64_t i = 0; i < count; ++i) {
    double s = 0;
    for (int32_t q = 0; q < 4; ++q)
      s += inputOf(q, begin + i, 31);
    want.push_back(s);
  }
  int64_t in = r.upload(encode(FSDPRT_F32, mine));
  int64_t out = r.alloc(count * 4);
  RT(fsdprt_reduce_scatter(r.ctx, r.stream, shard.comm, FSDPRT_F32,
                           FSDPRT_COMM_SUM, in, 0, out, 0, numel, 1, 1));
  RT(fsdprt_all_reduce(r.ctx, r.stream, replicate.comm, FSDPRT_F32,
                       FSDPRT_COMM_SUM, out, 0, out, 0, count));
  expectNear(decode(FSDPRT_F32, r.download(out, count * 4)), want, 0,
             "hybrid reduce_scatter + all_reduce");
  return 0;
}

/// reduce_scatter(avg) == pre-divide -> all_reduce(sum) -> post-divide, then
/// this rank's slice (PyTorch FSDP2's check), with random non-integer data,
/// through the synchronous C++ API.
int scenarioAvgIdentity(Rank &) {
  using namespace fsdp::rt;
  LaunchInfo launch = LaunchInfo::fromEnvironment();
  std::unique_ptr<Communicator> comm =
      createCommunicator("gloo", launch, CommOptions::fromEnvironment());
  const int32_t n = comm->size();
  // FSDP's default factor: the power of two near sqrt(n) (1 for n < 4).
  double factor = 1;
  while (n % static_cast<int>(factor * 2) == 0 && factor * factor * 2 < n)
    factor *= 2;
  const DType dtypes[] = {DType::F32, DType::BF16, DType::F16};
  for (DType dt : dtypes) {
    int32_t code = static_cast<int32_t>(dt);
    for (int64_t numel : sizesFor(n)) {
      std::vector<double> x(numel);
      for (int64_t i = 0; i < numel; ++i)
        x[i] = inputOf(launch.rank, i, 41) / 7.0 + 0.013 * launch.rank;
      std::vector<uint8_t> in = encode(code, x);
      ShardRange own = shardRange(numel, n, comm->rank());
      std::vector<uint8_t> rs(own.count * dtypeBytes(code));
      comm->reduceScatter(dt, in.data(), rs.data(), numel, CommReduceOp::Avg);

      // Manual path in the storage dtype, as FSDP does it.
      std::vector<double> pre(numel);
      for (int64_t i = 0; i < numel; ++i)
        pre[i] = decode(code, encode(code, {x[i] / factor}))[0];
      std::vector<uint8_t> ar = encode(code, pre);
      comm->allReduce(dt, ar.data(), ar.data(), numel, CommReduceOp::Sum);
      std::vector<double> summed = decode(code, ar), manual;
      for (int64_t i = 0; i < own.count; ++i)
        manual.push_back(summed[own.begin + i] / (n / factor));
      manual = decode(code, encode(code, manual));
      // Both sides round the pre-divided inputs, the sum and the quotient
      // differently (the manual path in 16 bits): a few ulps of the type.
      expectNear(decode(code, rs), manual, 4 * tolerance(code) * n,
                 std::string("reduce_scatter(avg) vs manual, ") +
                     dtypeLabel(code) + " numel " + std::to_string(numel));
      // And the explicit factor form of the same reduction.
      std::vector<uint8_t> rs2(own.count * dtypeBytes(code));
      comm->reduceScatter(dt, in.data(), rs2.data(), numel, CommReduceOp::Sum,
                          factor, n / factor);
      expectNear(decode(code, rs2), decode(code, rs), 2 * tolerance(code),
                 "reduce_scatter(sum, pre, post) vs reduce_scatter(avg)");
    }
  }
  comm->barrier();
  return 0;
}

/// Collectives on two streams at once, ordered by events, with the
/// all-gather and reduce-scatter delay hooks slowing the collective stream:
/// the consumer must still see the gathered data.
int scenarioStreams(Rank &r) {
  Group g = worldGroup(r);
  const int32_t n = r.worldSize;
  const int64_t numel = 1000;
  int64_t agStream, rsStream, ready;
  RT(fsdprt_stream_create(r.ctx, &agStream));
  RT(fsdprt_stream_create(r.ctx, &rsStream));
  RT(fsdprt_event_create(r.ctx, &ready));
  int64_t begin, count;
  RT(fsdprt_comm_shard_range(numel, n, r.rank, &begin, &count));
  std::vector<double> shard, full(numel), grad(numel), want(count);
  for (int64_t i = 0; i < numel; ++i)
    grad[i] = inputOf(r.rank, i, 52);
  for (int64_t i = 0; i < count; ++i) {
    shard.push_back(inputOf(r.rank, begin + i, 51));
    for (int32_t q = 0; q < n; ++q)
      want[i] += inputOf(q, begin + i, 52);
  }
  for (int64_t i = 0; i < numel; ++i) {
    int64_t b, c;
    for (int32_t q = 0; q < n; ++q) {
      RT(fsdprt_comm_shard_range(numel, n, q, &b, &c));
      if (i >= b && i < b + c)
        full[i] = inputOf(q, i, 51);
    }
  }
  int64_t shardBuf = r.upload(encode(FSDPRT_F32, shard));
  int64_t gradBuf = r.upload(encode(FSDPRT_F32, grad));
  int64_t fullBuf = r.alloc(numel * 4), copyBuf = r.alloc(numel * 4);
  int64_t rsOut = r.alloc(count * 4);
  // Two collectives in flight on two streams of one communicator.
  RT(fsdprt_all_gather(r.ctx, agStream, g.comm, FSDPRT_F32, shardBuf, 0,
                       fullBuf, 0, numel));
  RT(fsdprt_event_record(r.ctx, ready, agStream));
  RT(fsdprt_reduce_scatter(r.ctx, rsStream, g.comm, FSDPRT_F32, FSDPRT_COMM_SUM,
                           gradBuf, 0, rsOut, 0, numel, 1, 1));
  RT(fsdprt_stream_wait_event(r.ctx, r.stream, ready));
  RT(fsdprt_copy(r.ctx, r.stream, copyBuf, 0, fullBuf, 0, numel * 4));
  expectNear(decode(FSDPRT_F32, r.download(copyBuf, numel * 4)), full, 0,
             "all_gather consumed on another stream after its event");
  RT(fsdprt_stream_synchronize(r.ctx, rsStream));
  expectNear(decode(FSDPRT_F32, r.download(rsOut, count * 4)), want, 0,
             "reduce_scatter on a third stream");
  RT(fsdprt_stream_synchronize(r.ctx, agStream));

  // Two all_gathers issued in the same order everywhere but executed in
  // opposite orders: rank 1's first stream is busy with a long kernel, so
  // its second gather runs first. Only the issue-order tags keep the two
  // gathers' messages apart.
  int64_t slow = r.alloc(int64_t(4) << 20);
  int64_t fullA = r.alloc(numel * 4), fullB = r.alloc(numel * 4);
  std::vector<double> shardB, fullBWant(numel);
  for (int64_t i = 0; i < count; ++i)
    shardB.push_back(-inputOf(r.rank, begin + i, 51));
  for (int64_t i = 0; i < numel; ++i)
    fullBWant[i] = -full[i];
  int64_t shardBBuf = r.upload(encode(FSDPRT_F32, shardB));
  if (r.rank == 1)
    for (int k = 0; k < 8; ++k)
      RT(fsdprt_rng_fill(r.ctx, agStream, FSDPRT_F32, FSDPRT_RNG_NORMAL, slow,
                         0, int64_t(1) << 20, 0.0, 1.0, 7, k, 0));
  RT(fsdprt_all_gather(r.ctx, agStream, g.comm, FSDPRT_F32, shardBuf, 0, fullA,
                       0, numel));
  RT(fsdprt_all_gather(r.ctx, rsStream, g.comm, FSDPRT_F32, shardBBuf, 0, fullB,
                       0, numel));
  RT(fsdprt_stream_synchronize(r.ctx, agStream));
  RT(fsdprt_stream_synchronize(r.ctx, rsStream));
  expectNear(decode(FSDPRT_F32, r.download(fullA, numel * 4)), full, 0,
             "first of two concurrent all_gathers");
  expectNear(decode(FSDPRT_F32, r.download(fullB, numel * 4)), fullBWant, 0,
             "second of two concurrent all_gathers");
  return 0;
}

/// Large all_reduces in a loop; FSDPRT_TEST_VICTIM kills itself (SIGKILL)
/// after FSDPRT_TEST_KILL_AFTER_MS, in the middle of one. Survivors must
/// report the error (exit 3), never hang.
int scenarioKill(Rank &r) {
  Group g = worldGroup(r);
  if (r.rank == envInt("FSDPRT_TEST_VICTIM", -1)) {
    int ms = envInt("FSDPRT_TEST_KILL_AFTER_MS", 300);
    std::thread([ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      std::raise(SIGKILL);
    }).detach();
  }
  const int64_t numel = 1 << 20;
  int64_t buf = r.alloc(numel * 4);
  RT(fsdprt_fill(r.ctx, r.stream, FSDPRT_F32, buf, 0, numel, 1.0));
  for (int iter = 0; iter < 100000; ++iter) {
    RT(fsdprt_all_reduce(r.ctx, r.stream, g.comm, FSDPRT_F32, FSDPRT_COMM_MAX,
                         buf, 0, buf, 0, numel));
    r.sync();
  }
  failCheck("100000 all_reduces completed although a rank was killed");
}

/// FSDPRT_TEST_VICTIM joins but never calls the collective (it sleeps until
/// the harness kills it): the others must time out, naming the collective.
int scenarioStall(Rank &r) {
  Group g = worldGroup(r);
  if (r.rank == envInt("FSDPRT_TEST_VICTIM", -1)) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 0;
  }
  const int64_t numel = 64;
  int64_t begin, count;
  RT(fsdprt_comm_shard_range(numel, r.worldSize, r.rank, &begin, &count));
  int64_t in = r.alloc(count * 4), out = r.alloc(numel * 4);
  RT(fsdprt_all_gather(r.ctx, r.stream, g.comm, FSDPRT_F32, in, 0, out, 0,
                       numel));
  r.sync();
  failCheck("all_gather completed without the stalled rank");
}

/// Only joins: used with fewer processes than WORLD_SIZE.
int scenarioJoin(Rank &r) {
  Group g = worldGroup(r);
  RT(fsdprt_barrier(r.ctx, r.stream, g.comm));
  r.sync();
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <scenario>\n", argv[0]);
    return 2;
  }
  std::string scenario = argv[1];
  fsdp::rt::LaunchInfo launch;
  try {
    launch = fsdp::rt::LaunchInfo::fromEnvironment();
  } catch (const std::exception &e) {
    failCheck(e.what());
  }
  Rank r(launch.rank, launch.worldSize);
  if (scenario == "collectives")
    return scenarioCollectives(r);
  if (scenario == "mesh")
    return scenarioMesh(r);
  if (scenario == "avg-identity")
    return scenarioAvgIdentity(r);
  if (scenario == "streams")
    return scenarioStreams(r);
  if (scenario == "kill")
    return scenarioKill(r);
  if (scenario == "stall")
    return scenarioStall(r);
  if (scenario == "join")
    return scenarioJoin(r);
  std::fprintf(stderr, "unknown scenario '%s'\n", scenario.c_str());
  return 2;
}
