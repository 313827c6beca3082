//===- StagingTest.cpp - The shared f32 staging of 16-bit operands --------===//
//
// Staging (fsdp/rt/backend/Staging.h) over a memory that records what it is asked
// to do: f32 and absent operands are used in place, 16-bit inputs widened
// once, results narrowed only on commit and only where written.
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/backend/HostConvert.h"
#include "fsdp/rt/backend/Staging.h"
#include "fsdp/rt/math/Half.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace {

using namespace fsdp::rt;

struct Log {
  int allocations = 0, widened = 0, narrowed = 0;
};

struct RecordingMemory {
  struct Buffer {
    std::unique_ptr<std::vector<float>> floats;
    float *data() { return floats->data(); }
  };
  Buffer allocate(int64_t n) {
    ++log->allocations;
    return Buffer{std::make_unique<std::vector<float>>(n, -1.0f)};
  }
  void convert(DType src, const void *from, DType dst, void *to, int64_t n) {
    ++(dst == DType::F32 ? log->widened : log->narrowed);
    convertOnHost(src, from, dst, to, n);
  }
  Log *log;
};

std::vector<uint16_t> bf16(std::vector<float> values) {
  std::vector<uint16_t> out;
  for (float v : values)
    out.push_back(floatToBf16(v));
  return out;
}

TEST(Staging, F32AndAbsentOperandsAreUsedInPlace) {
  Log log;
  Staging<RecordingMemory> st({&log});
  float x[2] = {1, 2}, y[2] = {0, 0};
  EXPECT_EQ(st.in(DType::F32, x, 2), x);
  EXPECT_EQ(st.out(DType::F32, y, 2), y);
  EXPECT_EQ(st.in(DType::BF16, nullptr, 2), nullptr);
  EXPECT_EQ(st.out(DType::F16, nullptr, 2), nullptr);
  st.commit();
  EXPECT_EQ(log.allocations + log.widened + log.narrowed, 0);
}

TEST(Staging, WidensInputsAndNarrowsResultsOnCommit) {
  Log log;
  std::vector<uint16_t> x = bf16({1.5f, -2.0f}), y = bf16({7, 7});
  {
    Staging<RecordingMemory> st({&log});
    const float *fx = st.in(DType::BF16, x.data(), 2);
    EXPECT_EQ(fx[0], 1.5f);
    EXPECT_EQ(fx[1], -2.0f);
    float *fy = st.out(DType::BF16, y.data(), 2); // not loaded
    EXPECT_EQ(fy[0], -1.0f);
    fy[0] = fx[0] * 2;
    fy[1] = 1.0f / 3.0f; // rounds to nearest even on commit
    EXPECT_EQ(y, bf16({7, 7})) << "results reach storage on commit only";
    st.commit();
  }
  EXPECT_EQ(y, bf16({3.0f, 1.0f / 3.0f}));
  EXPECT_EQ(log.allocations, 2);
  EXPECT_EQ(log.widened, 1);
  EXPECT_EQ(log.narrowed, 1);
}

TEST(Staging, InoutWritesBackOnlyWhenUpdated) {
  Log log;
  std::vector<uint16_t> mean = bf16({0.25f}), var = bf16({4.0f});
  Staging<RecordingMemory> st({&log});
  float *fm = st.inout(DType::BF16, mean.data(), 1);
  float *fv = st.inout(DType::BF16, var.data(), 1, /*update=*/false);
  EXPECT_EQ(fm[0], 0.25f);
  EXPECT_EQ(fv[0], 4.0f);
  fm[0] = 0.5f;
  st.commit();
  EXPECT_EQ(mean, bf16({0.5f}));
  EXPECT_EQ(var, bf16({4.0f}));
  EXPECT_EQ(log.widened, 2);
  EXPECT_EQ(log.narrowed, 1);
}

} // namespace
