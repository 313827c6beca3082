//===- ScratchReserveTest.cpp - per-call scratch, counted once per stream -===//
//
// The CUDA backend's ScratchReserve on the host emulation: a call's pieces
// are disjoint, aligned and stacked (a piece freed on top is reused); the
// next call starts over; a call beyond the reserve allocates its own pieces
// and regrows the reserve to its extent when it finishes (ended by an
// exception, the next call does); a call whose first piece does not fit
// regrows it at once; a reserve that
// may not move (a stream capturing, a step graph holding it) keeps its
// place; a piece released after its call does not disturb the next call.
//
//===----------------------------------------------------------------------===//
#include "Device.h" // runtime/cuda

#include <gtest/gtest.h>

#include <cstdint>

namespace fsdp {
namespace rt {
namespace cuda {
namespace {

char *at(const Scratch &s) { return s.as<char>(); }

class ScratchReserveTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
              cudaSuccess);
    reserve = std::make_unique<ScratchReserve>(stream);
  }
  void TearDown() override {
    reserve.reset();
    cudaStreamDestroy(stream);
  }
  cudaStream_t stream = nullptr;
  std::unique_ptr<ScratchReserve> reserve;
};

TEST_F(ScratchReserveTest, PiecesOfACallAreStackedAndFreedWhenItEnds) {
  {
    ScratchCall call(*reserve, true);
    Scratch a(stream, 1000); // the first piece sizes the reserve at once
  }
  EXPECT_EQ(reserve->bytes(), 1024);
  {
    ScratchCall call(*reserve, true);
    {
      Scratch a(stream, 1000), b(stream, 10), c(stream, 300); // b, c: own
      EXPECT_EQ(reserve->bytes(), 1024);
    }
    call.finish();
  }
  EXPECT_EQ(reserve->largestCall(), 1024 + 256 + 512);
  EXPECT_EQ(reserve->bytes(), 1024 + 256 + 512) << "regrown at its end";
  ScratchCall call(*reserve, true);
  Scratch a(stream, 1000), b(stream, 10), c(stream, 300);
  EXPECT_EQ(at(b) - at(a), 1024) << "aligned as cudaMallocAsync's";
  EXPECT_EQ(at(c) - at(b), 256);
  char *top = at(c);
  c = Scratch();
  Scratch d(stream, 200);
  EXPECT_EQ(at(d), top) << "the piece freed on top is reused";
}

// A call ended by an exception (no finish) leaves the regrowth to the next.
TEST_F(ScratchReserveTest, ACallEndedByAnExceptionRegrowsAtTheNextCall) {
  {
    ScratchCall call(*reserve, true);
    Scratch a(stream, 256), b(stream, 4096);
  }
  EXPECT_EQ(reserve->bytes(), 256);
  ScratchCall call(*reserve, true);
  EXPECT_EQ(reserve->bytes(), 256 + 4096);
}

TEST_F(ScratchReserveTest, AReserveThatMayNotMoveKeepsItsPlace) {
  {
    ScratchCall call(*reserve, true);
    Scratch a(stream, 512);
  }
  char *base = nullptr;
  {
    ScratchCall call(*reserve, false); // e.g. a step graph holds it
    {
      Scratch a(stream, 256), b(stream, 4096), big(stream, 1 << 20);
      base = at(a);
      EXPECT_NE(at(big), nullptr);
      EXPECT_TRUE(at(big) < base || at(big) >= base + 512) << "its own";
    }
    call.finish();
  }
  EXPECT_EQ(reserve->bytes(), 512);
  {
    ScratchCall call(*reserve, false);
    Scratch a(stream, 1 << 20); // first piece, larger: still not moved
    EXPECT_NE(at(a), base);
  }
  EXPECT_EQ(reserve->bytes(), 512);
  ScratchCall call(*reserve, true);
  EXPECT_EQ(reserve->bytes(), 256 + 4096 + (1 << 20));
}

// A piece must not be used after its call (its memory is the next call's);
// releasing it late leaves the next call's stack as it is.
TEST_F(ScratchReserveTest, APieceReleasedAfterItsCallLeavesTheNextCallAlone) {
  {
    ScratchCall call(*reserve, true);
    Scratch sizing(stream, 1024);
  }
  Scratch late;
  {
    ScratchCall call(*reserve, true);
    Scratch a(stream, 256);
    late = Scratch(stream, 256);
  }
  ScratchCall call(*reserve, true);
  Scratch a(stream, 256), b(stream, 256);
  late = Scratch(); // at b's offset, but the last call's
  Scratch c(stream, 256);
  EXPECT_EQ(at(c) - at(a), 512) << "b is still in use";
}

TEST_F(ScratchReserveTest, NestedCallsShareTheOutermostCallsStack) {
  {
    ScratchCall call(*reserve, true);
    Scratch sizing(stream, 1024);
  }
  ScratchCall outer(*reserve, true);
  Scratch a(stream, 256);
  {
    ScratchCall inner(*reserve, true);
    Scratch b(stream, 256);
    EXPECT_EQ(at(b) - at(a), 256);
  }
  Scratch c(stream, 256);
  EXPECT_EQ(at(c) - at(a), 256) << "the inner call's end kept a in use";
}

} // namespace
} // namespace cuda
} // namespace rt
} // namespace fsdp
