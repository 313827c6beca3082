//===- IssueOrderTest.cpp - Collectives issue in tag order ----------------===//
//
// A backend that matches collectives across ranks by launch order (NCCL)
// must see them issued one at a time, in the order their tags were taken,
// whatever stream thread runs them. The fake backend here records the order
// in which its run* bodies start and how many are issuing at once, so the
// sequencing of the Communicator base is checked without a GPU or a peer.
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/Comm.h"
#include "fsdp/rt/Error.h"
#include "src/Stream.h"
#include "fsdp/rt/fsdprt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace fsdp {
namespace rt {
namespace {

using std::chrono::milliseconds;

CommSetup fakeSetup(const CommOptions &options = CommOptions()) {
  CommSetup setup;
  setup.group = GroupSpec{"fake", {0}};
  setup.globalRank = 0;
  setup.options = options;
  return setup; // no store: the fake never rendezvouses
}

/// Records the tags in the order run* starts, and the largest number of
/// run* bodies that were issuing (between entry and issued()) at once.
class FakeCommunicator : public Communicator {
public:
  explicit FakeCommunicator(const CommSetup &setup, bool ordered = true)
      : Communicator(setup), ordered_(ordered) {}

  const char *backendName() const override { return "fake"; }
  bool usesHostMemory() const override { return true; }
  bool requiresIssueOrder() const override { return ordered_; }

  std::vector<uint32_t> order() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return order_;
  }
  int maxIssuing() const { return maxIssuing_; }

  /// Runs inside run* while the collective is issuing (may block or throw).
  std::function<void(uint32_t tag)> whileIssuing;
  /// Runs after issued(), for the tags that call it (see callsIssued).
  std::function<void(uint32_t tag)> afterIssued;
  /// Which tags call issued(); the others hold the turn until run* returns.
  std::function<bool(uint32_t tag)> callsIssued = [](uint32_t) {
    return false;
  };

protected:
  void runAllGather(DType, const void *, void *, int64_t, uint32_t tag,
                    void *) override {
    body(tag);
  }
  void runReduceScatter(DType, const void *, void *, int64_t, CommReduceOp,
                        double, double, uint32_t tag, void *) override {
    body(tag);
  }
  void runAllReduce(DType, const void *, void *, int64_t, CommReduceOp,
                    uint32_t tag, void *) override {
    body(tag);
  }
  void runBroadcast(void *, int64_t, int32_t, uint32_t tag, void *) override {
    body(tag);
  }
  void runBarrier(uint32_t tag, void *) override { body(tag); }
  std::unique_ptr<Communicator> makeGroup(const CommSetup &) override {
    fail(Status::Unsupported, "fake communicator: no groups");
  }

private:
  void body(uint32_t tag) {
    int now = ++issuing_;
    int seen = maxIssuing_.load();
    while (now > seen && !maxIssuing_.compare_exchange_weak(seen, now)) {
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      order_.push_back(tag);
    }
    struct Leave {
      std::atomic<int> &n;
      ~Leave() { --n; }
    };
    {
      Leave leave{issuing_};
      if (whileIssuing)
        whileIssuing(tag);
    }
    if (callsIssued(tag)) {
      issued();
      if (afterIssued)
        afterIssued(tag);
    }
  }

  bool ordered_;
  mutable std::mutex mutex_;
  std::vector<uint32_t> order_;
  std::atomic<int> issuing_{0};
  std::atomic<int> maxIssuing_{0};
};

std::vector<uint32_t> iota(uint32_t n) {
  std::vector<uint32_t> v(n);
  for (uint32_t i = 0; i < n; ++i)
    v[i] = i;
  return v;
}

/// Runs `f` and returns the Error it throws (fails the test if none).
template <typename F> Error errorOf(F &&f) {
  try {
    f();
  } catch (const Error &e) {
    return e;
  }
  ADD_FAILURE() << "expected an fsdp::rt::Error, got none";
  return Error(Status::Internal, "");
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

// Like the all-gather and reduce-scatter streams of an FSDP step: tags are
// taken in program order on one thread, each collective goes to a randomly
// chosen stream, and every stream sleeps a random while before it; half the
// tags pass their turn on through issued(), half when run* returns.
TEST(IssueOrder, ConcurrentStreamsIssueInTagOrder) {
  FakeCommunicator comm(fakeSetup());
  comm.callsIssued = [](uint32_t tag) { return tag % 2 == 0; };
  comm.whileIssuing = [&](uint32_t tag) {
    std::this_thread::sleep_for(std::chrono::microseconds(tag * 37 % 200));
  };
  constexpr int kStreams = 4;
  constexpr uint32_t kCollectives = 200;
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.push_back(std::make_unique<Stream>());
  std::mt19937 rng(1234);
  float buf[4] = {};
  for (uint32_t i = 0; i < kCollectives; ++i) {
    uint32_t tag = comm.nextTag();
    Stream &s = *streams[rng() % kStreams];
    int sleepUs = static_cast<int>(rng() % 500);
    s.enqueue("random_delay", [sleepUs] {
      std::this_thread::sleep_for(std::chrono::microseconds(sleepUs));
    });
    switch (i % 5) {
    case 0:
      s.enqueue("all_gather",
                [&, tag] { comm.allGather(DType::F32, buf, buf, 4, tag); });
      break;
    case 1:
      s.enqueue("reduce_scatter", [&, tag] {
        comm.reduceScatter(DType::F32, buf, buf, 4, CommReduceOp::Avg, 1.0, 1.0,
                           tag);
      });
      break;
    case 2:
      s.enqueue("all_reduce", [&, tag] {
        comm.allReduce(DType::F32, buf, buf, 4, CommReduceOp::Sum, tag);
      });
      break;
    case 3:
      s.enqueue("broadcast",
                [&, tag] { comm.broadcast(buf, sizeof(buf), 0, tag); });
      break;
    default:
      s.enqueue("barrier", [&, tag] { comm.barrier(tag); });
    }
  }
  for (auto &s : streams)
    EXPECT_NO_THROW(s->synchronize());
  EXPECT_EQ(comm.order(), iota(kCollectives))
      << "collectives must issue in the order their tags were taken";
  EXPECT_EQ(comm.maxIssuing(), 1) << "two collectives were issuing at once";
}

// issued() lets the next tag issue while this one is still completing:
// tag 0 completes only once tag 1 has started, which would time out if the
// turn were held until run* returned.
TEST(IssueOrder, IssuedLetsTheNextTagIssueWhileThisOneCompletes) {
  FakeCommunicator comm(fakeSetup());
  comm.setTimeout(milliseconds(30000));
  comm.callsIssued = [](uint32_t) { return true; };
  std::mutex m;
  std::condition_variable cv;
  bool secondStarted = false;
  comm.whileIssuing = [&](uint32_t tag) {
    if (tag == 1) {
      std::lock_guard<std::mutex> lock(m);
      secondStarted = true;
      cv.notify_all();
    }
  };
  comm.afterIssued = [&](uint32_t tag) {
    if (tag == 0) {
      std::unique_lock<std::mutex> lock(m);
      ASSERT_TRUE(cv.wait_for(lock, milliseconds(20000), [&] {
        return secondStarted;
      })) << "tag 1 did not issue while tag 0 was completing";
    }
  };
  uint32_t t0 = comm.nextTag(), t1 = comm.nextTag();
  std::thread first([&] { comm.barrier(t0); });
  std::thread second([&] { comm.barrier(t1); });
  first.join();
  second.join();
  EXPECT_EQ(comm.order(), iota(2));
}

// A tag taken but never used blocks later tags; they fail after timeout()
// with a message naming the waiting collective, its tag and the missing tag,
// and the communicator is unusable from then on.
TEST(IssueOrder, NeverIssuedTagFailsNextCollectiveAtTimeout) {
  FakeCommunicator comm(fakeSetup());
  comm.setTimeout(milliseconds(200));
  uint32_t lost = comm.nextTag();
  float buf[4] = {};
  Error e = errorOf([&] { comm.allGather(DType::F32, buf, buf, 4); });
  EXPECT_EQ(e.status(), Status::IO);
  std::string msg = e.what();
  EXPECT_TRUE(contains(msg, "all_gather on group 'fake'")) << msg;
  EXPECT_TRUE(contains(msg, "waited 200 ms for its turn to issue (tag 1)"))
      << msg;
  EXPECT_TRUE(contains(msg, "tag " + std::to_string(lost) +
                                " has not been issued on this rank"))
      << msg;
  Error later = errorOf([&] { comm.barrier(); });
  EXPECT_EQ(later.status(), Status::IO);
  EXPECT_TRUE(contains(later.what(), "unusable after an earlier failure"))
      << later.what();
  EXPECT_TRUE(comm.order().empty());
}

// When an issuing collective fails, those waiting for their turn fail at
// once with the first error, not after their (long) timeout, and never
// reach the backend.
TEST(IssueOrder, FailureWakesWaitingCollectives) {
  FakeCommunicator comm(fakeSetup());
  comm.setTimeout(milliseconds(30000));
  std::mutex m;
  std::condition_variable cv;
  bool release = false;
  comm.whileIssuing = [&](uint32_t) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return release; });
    fail(Status::IO, "fake transport: peer reset");
  };
  std::vector<uint32_t> tags;
  for (int i = 0; i < 4; ++i)
    tags.push_back(comm.nextTag());
  std::vector<std::string> errors(tags.size());
  std::vector<std::thread> threads;
  // Later tags start first, so that they are waiting when tag 0 fails.
  for (int i = static_cast<int>(tags.size()) - 1; i >= 0; --i)
    threads.emplace_back(
        [&, i] { errors[i] = errorOf([&] { comm.barrier(tags[i]); }).what(); });
  std::this_thread::sleep_for(milliseconds(50)); // coverage, not correctness
  {
    std::lock_guard<std::mutex> lock(m);
    release = true;
  }
  cv.notify_all();
  for (auto &t : threads)
    t.join();
  EXPECT_TRUE(contains(errors[0], "barrier on group 'fake' (1 ranks) failed"))
      << errors[0];
  EXPECT_TRUE(contains(errors[0], "peer reset")) << errors[0];
  for (size_t i = 1; i < errors.size(); ++i) {
    EXPECT_TRUE(contains(errors[i], "unusable after an earlier failure"))
        << "tag " << i << ": " << errors[i];
    EXPECT_TRUE(contains(errors[i], "peer reset")) << errors[i];
  }
  EXPECT_EQ(comm.order(), iota(1));
}

// Argument errors, and non-IO errors from the backend, pass the turn on
// and leave the communicator usable, even when the failing collective is
// not yet at the front of the order.
TEST(IssueOrder, ArgumentErrorsPassTheTurnOn) {
  FakeCommunicator comm(fakeSetup());
  comm.setTimeout(milliseconds(30000));
  comm.whileIssuing = [](uint32_t tag) {
    if (tag == 3)
      fail(Status::InvalidArgument, "fake: rejected");
  };
  float buf[4] = {};
  uint32_t t0 = comm.nextTag(), t1 = comm.nextTag(), t2 = comm.nextTag(),
           t3 = comm.nextTag(), t4 = comm.nextTag();
  std::thread later([&] { comm.allGather(DType::F32, buf, buf, 4, t2); });
  // t1 fails its checks before t0 has issued: given up early.
  EXPECT_EQ(
      errorOf([&] { comm.allGather(DType::I32, buf, buf, 4, t1); }).status(),
      Status::InvalidArgument);
  comm.allGather(DType::F32, buf, buf, 4, t0);
  later.join();
  EXPECT_EQ(errorOf([&] { comm.barrier(t3); }).status(),
            Status::InvalidArgument);
  comm.barrier(t4);
  EXPECT_EQ(comm.order(), (std::vector<uint32_t>{t0, t2, t3, t4}));
  // A tag used twice is a program error, not a hang.
  EXPECT_EQ(errorOf([&] { comm.barrier(t4); }).status(),
            Status::InvalidArgument);
}

// A backend that keeps collectives apart by tag (Gloo) does not wait for
// earlier tags.
TEST(IssueOrder, UnorderedBackendDoesNotWait) {
  FakeCommunicator comm(fakeSetup(), /*ordered=*/false);
  comm.setTimeout(milliseconds(30000));
  comm.nextTag();
  comm.nextTag();
  comm.barrier(comm.nextTag());
  comm.barrier(1);
  EXPECT_EQ(comm.order(), (std::vector<uint32_t>{2, 1}));
}

// A dropped tag (skipTag) fails the collectives waiting behind it at once:
// issuing them would pair them with the other ranks' dropped collective.
TEST(IssueOrder, SkippedTagFailsWaitingCollectivesAtOnce) {
  FakeCommunicator comm(fakeSetup());
  comm.setTimeout(milliseconds(30000));
  uint32_t dropped = comm.nextTag();
  std::string waiting;
  std::thread t([&] { waiting = errorOf([&] { comm.barrier(); }).what(); });
  std::this_thread::sleep_for(milliseconds(50)); // coverage, not correctness
  comm.skipTag(dropped, "all_gather", "its stream skipped it");
  t.join();
  EXPECT_TRUE(contains(waiting, "unusable after an earlier failure"))
      << waiting;
  EXPECT_TRUE(contains(waiting, "all_gather (issue tag 0) on group 'fake' was "
                                "never issued on rank 0"))
      << waiting;
  EXPECT_TRUE(comm.order().empty());
}

// Through the C API: a collective queued behind a failed kernel on one
// stream is dropped by that stream; the collective after it, on another
// stream, fails at once naming the dropped one instead of waiting out the
// 30 s collective timeout.
FakeCommunicator *lastFake = nullptr;

TEST(IssueOrderCApi, CollectiveDroppedByFailedStreamGivesItsTagUp) {
  static bool registered =
      registerCommBackend("fake-ordered", [](const CommSetup &setup) {
        auto comm = std::make_unique<FakeCommunicator>(setup);
        lastFake = comm.get();
        return std::unique_ptr<Communicator>(std::move(comm));
      });
  ASSERT_TRUE(registered);
  int64_t ctx = 0, comm = 0, failing = 0, other = 0;
  ASSERT_EQ(fsdprt_context_create("cpu", 0, 1, 1 << 20, 1, &ctx), FSDPRT_OK)
      << fsdprt_last_error();
  ASSERT_EQ(fsdprt_comm_init(ctx, "fake-ordered", 0, 1, "127.0.0.1", 29500,
                             "issue-order", 2000, 30000, &comm),
            FSDPRT_OK)
      << fsdprt_last_error();
  ASSERT_NE(lastFake, nullptr);
  ASSERT_EQ(fsdprt_stream_create(ctx, &failing), FSDPRT_OK);
  ASSERT_EQ(fsdprt_stream_create(ctx, &other), FSDPRT_OK);
  int64_t ids, table, out, data;
  ASSERT_EQ(fsdprt_buffer_alloc(ctx, 8, &ids), FSDPRT_OK);
  ASSERT_EQ(fsdprt_buffer_alloc(ctx, 16, &table), FSDPRT_OK);
  ASSERT_EQ(fsdprt_buffer_alloc(ctx, 16, &out), FSDPRT_OK);
  ASSERT_EQ(fsdprt_buffer_alloc(ctx, 16, &data), FSDPRT_OK);
  const int32_t badIds[2] = {0, 5}; // vocab 2: id 5 fails on the stream
  ASSERT_EQ(fsdprt_copy_from_host(ctx, failing, ids, 0, badIds, 8), FSDPRT_OK);
  ASSERT_EQ(fsdprt_embedding_forward(ctx, failing, FSDPRT_F32, FSDPRT_I32, ids,
                                     0, table, 0, out, 0, 2, 2, 2),
            FSDPRT_OK);
  ASSERT_EQ(
      fsdprt_all_gather(ctx, failing, comm, FSDPRT_F32, data, 0, data, 0, 4),
      FSDPRT_OK); // tag 0: dropped by the failed stream
  ASSERT_EQ(fsdprt_all_reduce(ctx, other, comm, FSDPRT_F32, FSDPRT_COMM_SUM,
                              data, 0, data, 0, 4),
            FSDPRT_OK); // tag 1: waits for tag 0
  EXPECT_EQ(fsdprt_stream_synchronize(ctx, other), FSDPRT_ERR_IO);
  std::string msg = fsdprt_last_error();
  EXPECT_TRUE(contains(msg, "op 'all_reduce'")) << msg;
  EXPECT_TRUE(contains(msg, "all_gather (issue tag 0) on group 'world' was "
                            "never issued on rank 0"))
      << msg;
  EXPECT_TRUE(contains(msg, "its stream skipped it after an earlier failure"))
      << msg;
  EXPECT_FALSE(contains(msg, "waited")) << msg;
  EXPECT_EQ(fsdprt_stream_synchronize(ctx, failing), FSDPRT_ERR_OUT_OF_RANGE);
  EXPECT_TRUE(lastFake->order().empty());
  EXPECT_EQ(fsdprt_comm_destroy(ctx, comm), FSDPRT_OK);
  EXPECT_EQ(fsdprt_context_destroy(ctx), FSDPRT_OK);
}

} // namespace
} // namespace rt
} // namespace fsdp
