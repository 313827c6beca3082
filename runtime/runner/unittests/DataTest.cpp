//===- DataTest.cpp - Step inputs: sampling, files, synthetic data --------===//
#include "runner/Data.h"
#include "fsdp/rt/fsdprt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>
#include <unistd.h>

namespace fsdp {
namespace driver {
namespace {

using Bytes = std::vector<uint8_t>;

InputInfo input(int64_t index, int64_t microBatch, std::vector<int64_t> shape,
                const std::string &dtype, int64_t maxId) {
  InputInfo in;
  in.index = index;
  in.microBatch = microBatch;
  in.shape = std::move(shape);
  in.dtype = dtype;
  in.maxId = maxId;
  return in;
}

/// A language model: tokens and targets [batch, seq] per micro-batch.
Program lmProgram(int world, int64_t batch, int64_t seq, int microBatches,
                  int64_t vocab, const std::string &dtype = "i64") {
  Program p;
  p.worldSize = world;
  p.shard = world;
  p.microBatches = microBatches;
  for (int mb = 0; mb < microBatches; ++mb)
    for (int64_t index = 0; index < 2; ++index)
      p.inputs.push_back(input(index, mb, {batch, seq}, dtype, vocab));
  return p;
}

/// A classifier: f32 features [batch, 3] and i64 labels [batch] < 10.
Program mlpProgram(int world, int64_t batch, int microBatches) {
  Program p;
  p.worldSize = world;
  p.shard = world;
  p.microBatches = microBatches;
  for (int mb = 0; mb < microBatches; ++mb) {
    p.inputs.push_back(input(0, mb, {batch, 3}, "f32", -1));
    p.inputs.push_back(input(1, mb, {batch}, "i64", 10));
  }
  return p;
}

/// A path in the test's temporary directory, removed when the test binary
/// exits (each process its own names: ctest runs the suites in parallel).
std::string tempPath(const std::string &name) {
  static struct Removed {
    std::vector<std::string> paths;
    ~Removed() {
      for (const std::string &p : paths)
        std::remove(p.c_str());
    }
  } created;
  created.paths.push_back(::testing::TempDir() + "fsdp-data-" +
                          std::to_string(getpid()) + "-" + name);
  return created.paths.back();
}

std::string tempFile(const std::string &name, const Bytes &bytes) {
  std::string path = tempPath(name);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), bytes.size());
  return path;
}

template <typename T> Bytes bytesOf(const std::vector<T> &ids) {
  Bytes b(ids.size() * sizeof(T));
  std::memcpy(b.data(), ids.data(), b.size());
  return b;
}

std::vector<int64_t> asI64(const Bytes &b) {
  std::vector<int64_t> v(b.size() / 8);
  std::memcpy(v.data(), b.data(), b.size());
  return v;
}

/// Every sample of one step as (input index, micro-batch, row) -> bytes,
/// listed in the order of its global sample index within the step.
std::vector<std::vector<Bytes>> samplesByGlobalIndex(DataSource &data,
                                                     const Program &p,
                                                     int64_t step) {
  int64_t batch = p.batchPerRank(), world = p.worldSize;
  std::vector<std::vector<Bytes>> samples(batch * world * p.microBatches);
  for (int r = 0; r < world; ++r) {
    std::vector<Bytes> bytes;
    data.fill(step, r, static_cast<int>(world), bytes);
    EXPECT_EQ(bytes.size(), p.inputs.size());
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const InputInfo &in = p.inputs[i];
      size_t rowBytes = bytes[i].size() / batch;
      for (int64_t row = 0; row < batch; ++row) {
        int64_t k = in.microBatch * batch + row;
        std::vector<Bytes> &s = samples[r + k * world];
        s.resize(2);
        s[in.index] = Bytes(bytes[i].begin() + row * rowBytes,
                            bytes[i].begin() + (row + 1) * rowBytes);
      }
    }
  }
  return samples;
}

TEST(Data, RanksInterleaveLikeDistributedSampler) {
  // One rank with a batch of 6 against three ranks with one row in each of
  // two micro-batches: the same 6 global samples per step.
  Program one = mlpProgram(1, 6, 1), three = mlpProgram(3, 1, 2);
  DataSource a("synthetic", one, 9), b("synthetic", three, 9);
  for (int64_t step : {0, 3}) {
    auto want = samplesByGlobalIndex(a, one, step);
    auto got = samplesByGlobalIndex(b, three, step);
    ASSERT_EQ(want.size(), 6u);
    EXPECT_EQ(got, want) << "step " << step;
  }
  // Rank 1 of 3, micro-batch 1 holds global sample 1 + 1 * 3 = 4.
  std::vector<Bytes> rank1;
  b.fill(0, 1, 3, rank1);
  EXPECT_EQ(rank1[3], samplesByGlobalIndex(a, one, 0)[4][1]);
}

TEST(Data, SyntheticDataDoesNotDependOnTheWorldSize) {
  Program one = lmProgram(1, 4, 8, 1, 50), two = lmProgram(2, 2, 8, 1, 50);
  DataSource a("synthetic", one, 3), b("synthetic", two, 3);
  EXPECT_EQ(samplesByGlobalIndex(a, one, 5), samplesByGlobalIndex(b, two, 5));
  DataSource c("synthetic", one, 4);
  EXPECT_NE(samplesByGlobalIndex(a, one, 5), samplesByGlobalIndex(c, one, 5))
      << "the seed changes the data";
  EXPECT_NE(samplesByGlobalIndex(a, one, 5), samplesByGlobalIndex(a, one, 6))
      << "each step has new samples";
}

TEST(Data, SyntheticValuesHaveTheirDistributions) {
  Program p = mlpProgram(1, 20000, 1);
  DataSource data("synthetic", p, 1);
  std::vector<Bytes> bytes;
  data.fill(0, 0, 1, bytes);
  std::vector<float> x(bytes[0].size() / 4);
  std::memcpy(x.data(), bytes[0].data(), bytes[0].size());
  double sum = 0, sq = 0;
  for (float v : x) {
    sum += v;
    sq += double(v) * v;
  }
  double mean = sum / x.size();
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(std::sqrt(sq / x.size() - mean * mean), 1.0, 0.02);
  std::set<int64_t> labels;
  for (int64_t id : asI64(bytes[1])) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 10);
    labels.insert(id);
  }
  EXPECT_EQ(labels.size(), 10u);
  EXPECT_EQ(data.tokensPerStep(), 20000);
  EXPECT_FALSE(data.isLanguageModel());
}

TEST(Data, LanguageModelWindowsAreShiftedAndCoverAnEpoch) {
  // Text whose byte i is i: a window starting at s holds s, s+1, ...
  Bytes text(201);
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = static_cast<uint8_t>(i);
  Program p = lmProgram(2, 2, 10, 1, 256);
  DataSource data(tempFile("ramp.txt", text), p, 11);
  ASSERT_TRUE(data.isLanguageModel());
  EXPECT_EQ(data.numTokens(), 201);
  EXPECT_EQ(data.numWindows(), 20); // (201 - 1) / 10
  EXPECT_EQ(data.tokensPerStep(), 2 * 2 * 10);
  std::multiset<int64_t> starts;
  for (int64_t step = 0; step < 5; ++step) // 5 steps x 4 samples = 1 epoch
    for (const std::vector<Bytes> &s : samplesByGlobalIndex(data, p, step)) {
      std::vector<int64_t> tokens = asI64(s[0]), targets = asI64(s[1]);
      ASSERT_EQ(tokens.size(), 10u);
      EXPECT_EQ(tokens[0] % 10, 0) << "windows start at multiples of T";
      for (size_t t = 0; t < tokens.size(); ++t) {
        EXPECT_EQ(tokens[t], tokens[0] + int64_t(t));
        EXPECT_EQ(targets[t], tokens[t] + 1) << "targets are shifted by one";
      }
      starts.insert(tokens[0]);
    }
  EXPECT_EQ(starts.size(), 20u);
  EXPECT_EQ(std::set<int64_t>(starts.begin(), starts.end()).size(), 20u)
      << "one epoch visits every window once";
  // The next epoch visits them in another order.
  std::vector<int64_t> first, second;
  for (int64_t step : {0, 5})
    for (const std::vector<Bytes> &s : samplesByGlobalIndex(data, p, step))
      (step == 0 ? first : second).push_back(asI64(s[0])[0]);
  EXPECT_NE(first, second);
}

TEST(Data, ReadsUint16AndUint32TokenFiles) {
  std::vector<uint16_t> ids16 = {7, 300, 65535, 1024, 2};
  Program p16 = lmProgram(1, 1, 4, 1, 65536, "i32");
  DataSource d16(tempFile("toks.bin", bytesOf(ids16)), p16, 0);
  std::vector<Bytes> bytes;
  d16.fill(0, 0, 1, bytes);
  std::vector<int32_t> tokens(4), targets(4);
  std::memcpy(tokens.data(), bytes[0].data(), 16);
  std::memcpy(targets.data(), bytes[1].data(), 16);
  EXPECT_EQ(tokens, (std::vector<int32_t>{7, 300, 65535, 1024}));
  EXPECT_EQ(targets, (std::vector<int32_t>{300, 65535, 1024, 2}));

  std::vector<uint32_t> ids32 = {70000, 5, 99999};
  Program p32 = lmProgram(1, 1, 2, 1, 100000);
  for (const char *name : {"toks.u32", "toks.bin32"}) {
    DataSource d32(tempFile(name, bytesOf(ids32)), p32, 0);
    d32.fill(0, 0, 1, bytes);
    EXPECT_EQ(asI64(bytes[0]), (std::vector<int64_t>{70000, 5})) << name;
    EXPECT_EQ(asI64(bytes[1]), (std::vector<int64_t>{5, 99999})) << name;
  }
}

std::string errorOf(const std::string &source, const Program &p) {
  try {
    DataSource data(source, p, 0);
  } catch (const std::runtime_error &e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Data, BadFilesAreClearErrors) {
  Program p = lmProgram(1, 1, 4, 1, 256);
  std::string bad = tempFile("bad.bin", bytesOf(std::vector<uint16_t>{
                                            1, 2, 300, 4, 5, 6}));
  EXPECT_EQ(errorOf(bad, p), "data file " + bad +
                                 ": token id 300 at position 2 is out of "
                                 "range for a vocabulary of 256");
  std::string odd = tempFile("odd.bin", Bytes{1, 0, 2});
  EXPECT_EQ(errorOf(odd, p), "data file '" + odd +
                                 "': 3 bytes is not a whole number of "
                                 "uint16 token ids");
  std::string shortFile = tempFile("short.txt", Bytes{'a', 'b', 'c', 'd'});
  EXPECT_EQ(errorOf(shortFile, p),
            "data file '" + shortFile +
                "' has 4 tokens; a window of 4 tokens and its shifted "
                "targets need at least 5");
  EXPECT_NE(errorOf("/nonexistent/corpus.bin", p)
                .find("data file '/nonexistent/corpus.bin' cannot be opened"),
            std::string::npos);
}

TEST(Data, FilesNeedALanguageModel) {
  std::string text = tempFile("words.txt", Bytes(100, 'x'));
  std::string msg = errorOf(text, mlpProgram(1, 2, 1));
  EXPECT_EQ(msg.rfind("--data FILE needs a model whose inputs are token ids "
                      "and next-token targets",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find("0: f32 [2, 3], 1: i64 [2]"), std::string::npos) << msg;
  Program unknownRange = lmProgram(1, 1, 4, 1, -1);
  EXPECT_NE(errorOf("synthetic", unknownRange).find("max_id"),
            std::string::npos);
}

} // namespace
} // namespace driver
} // namespace fsdp

namespace fsdp {
namespace driver {
namespace {

/// A safetensors dataset written with the runtime's checkpoint writer.
std::string tensorDataset(const std::string &name,
                          const std::vector<float> &features,
                          const std::vector<int64_t> &labels, int64_t rows) {
  std::string path = tempPath(name + ".safetensors");
  int64_t writer = 0;
  EXPECT_EQ(fsdprt_ckpt_writer_create(path.c_str(), &writer), FSDPRT_OK);
  int64_t featureShape[] = {rows, 3}, labelShape[] = {rows};
  EXPECT_EQ(fsdprt_ckpt_writer_add(writer, "input.0", FSDPRT_F32, 2,
                                   featureShape, features.data()),
            FSDPRT_OK);
  EXPECT_EQ(fsdprt_ckpt_writer_add(writer, "input.1", FSDPRT_I64, 1,
                                   labelShape, labels.data()),
            FSDPRT_OK);
  EXPECT_EQ(fsdprt_ckpt_writer_finish(writer), FSDPRT_OK);
  return path;
}

TEST(TensorData, SampleGIsRowGModNWhateverTheWorldSize) {
  const int64_t rows = 5;
  std::vector<float> features;
  std::vector<int64_t> labels;
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < 3; ++c)
      features.push_back(float(10 * r + c));
    labels.push_back(r);
  }
  std::string path = tensorDataset("rows", features, labels, rows);
  // Step 1 of a global batch of 4: samples 4..7 = rows 4, 0, 1, 2.
  Program one = mlpProgram(1, 4, 1), two = mlpProgram(2, 1, 2);
  DataSource a(path, one, 0), b(path, two, 0);
  std::vector<Bytes> got;
  a.fill(1, 0, 1, got);
  std::vector<int64_t> ids(4);
  std::memcpy(ids.data(), got[1].data(), 32);
  EXPECT_EQ(ids, (std::vector<int64_t>{4, 0, 1, 2}));
  float first;
  std::memcpy(&first, got[0].data(), 4);
  EXPECT_EQ(first, 40.0f);
  EXPECT_EQ(samplesByGlobalIndex(b, two, 1), samplesByGlobalIndex(a, one, 1));
  EXPECT_EQ(a.tokensPerStep(), 4);
}

TEST(TensorData, MismatchesAreClearErrors) {
  Program p = mlpProgram(1, 2, 1);
  auto message = [&](const std::string &path) {
    try {
      DataSource(path, p, 0);
    } catch (const std::exception &e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // Labels must be below the classifier's 10 classes.
  std::string bad = tensorDataset("badid", {0, 0, 0, 1, 1, 1}, {3, 12}, 2);
  EXPECT_NE(message(bad).find("holds id 12 at element 1, outside [0, 10)"),
            std::string::npos)
      << message(bad);
  // A cross-entropy's ignore_index is a label too (masked-LM labels), and
  // only that one.
  Program ignoring = p;
  for (InputInfo &in : ignoring.inputs)
    if (in.index == 1)
      in.ignoreId = -100;
  std::string masked = tensorDataset("masked", {0, 0, 0, 1, 1, 1}, {-100, 7}, 2);
  EXPECT_NO_THROW(DataSource(masked, ignoring, 0));
  std::string wrong = tensorDataset("wrong", {0, 0, 0, 1, 1, 1}, {-100, -7}, 2);
  try {
    DataSource(wrong, ignoring, 0);
    ADD_FAILURE() << "label -7 was accepted";
  } catch (const std::exception &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "holds id -7 at element 1, outside [0, 10) and not the "
                  "ignore_index -100"),
              std::string::npos)
        << e.what();
  }
  // Features must be [N, 3].
  std::string path = tempPath("shape.safetensors");
  int64_t writer = 0, shape[] = {2, 4};
  std::vector<float> zeros(8, 0.0f);
  ASSERT_EQ(fsdprt_ckpt_writer_create(path.c_str(), &writer), FSDPRT_OK);
  ASSERT_EQ(fsdprt_ckpt_writer_add(writer, "input.0", FSDPRT_F32, 2, shape,
                                   zeros.data()),
            FSDPRT_OK);
  ASSERT_EQ(fsdprt_ckpt_writer_finish(writer), FSDPRT_OK);
  EXPECT_NE(message(path).find("'input.0' has shape [2, 4]; the model's input "
                               "0 needs [N, 3]"),
            std::string::npos)
      << message(path);
  EXPECT_NE(message("/nonexistent.safetensors").find("data file"),
            std::string::npos);
}

} // namespace
} // namespace driver
} // namespace fsdp
