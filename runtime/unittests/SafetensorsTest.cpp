//===- SafetensorsTest.cpp - checkpoint round trip and malformed files ----===//
#include "TestUtil.h"

#include <cstdio>
#include <dirent.h>
#include <fstream>
#include <unistd.h>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class Safetensors : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fsdprt_safetensors_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override {
    for (const std::string &f : listDir())
      std::remove((dir + "/" + f).c_str());
    rmdir(dir.c_str());
  }
  std::vector<std::string> listDir() const {
    std::vector<std::string> names;
    if (DIR *d = opendir(dir.c_str())) {
      while (dirent *e = readdir(d))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
          names.push_back(e->d_name);
      closedir(d);
    }
    return names;
  }
  /// Writes an 8-byte length (the header's, unless overridden), the header
  /// text and the data bytes.
  std::string writeRaw(const std::string &header, size_t dataBytes,
                       int64_t lengthOverride = -1) {
    std::string path = dir + "/raw.safetensors";
    std::ofstream out(path, std::ios::binary);
    uint64_t n = lengthOverride >= 0 ? uint64_t(lengthOverride) : header.size();
    for (int i = 0; i < 8; ++i)
      out.put(static_cast<char>((n >> (8 * i)) & 0xff));
    out << header << std::string(dataBytes, '\x01');
    return path;
  }
  /// Opens `path` expecting FSDPRT_ERR_FORMAT with `fragment` in the message.
  void expectRejected(const std::string &path, const std::string &fragment) {
    int64_t reader = 0;
    EXPECT_EQ(fsdprt_ckpt_reader_open(path.c_str(), &reader),
              FSDPRT_ERR_FORMAT);
    std::string msg = fsdprt_last_error();
    EXPECT_NE(msg.find(fragment), std::string::npos)
        << "expected '" << fragment << "' in: " << msg;
  }
  std::string dir;
};

TEST_F(Safetensors, RoundTripsTensorsAndMetadataThroughBuffers) {
  Device dev("cpu");
  std::string path = dir + "/model.safetensors";
  auto w = randomVector(6, 211);
  std::vector<uint16_t> h{0x3f80, 0xc000, 0x0001};
  std::vector<int64_t> ids{-1, 5, 1ll << 40};
  int64_t wbuf = dev.upload(w);
  int64_t writer;
  RT_OK(fsdprt_ckpt_writer_create(path.c_str(), &writer));
  const int64_t wShape[2] = {2, 3}, hShape[1] = {3}, idShape[1] = {3};
  RT_OK(fsdprt_ckpt_writer_add_buffer(writer, dev.ctx, "layers.0.weight",
                                      FSDPRT_F32, 2, wShape, wbuf, 0));
  RT_OK(
      fsdprt_ckpt_writer_add(writer, "half", FSDPRT_BF16, 1, hShape, h.data()));
  RT_OK(fsdprt_ckpt_writer_add(writer, "ids", FSDPRT_I64, 1, idShape,
                               ids.data()));
  RT_OK(fsdprt_ckpt_writer_add(writer, "scalar", FSDPRT_F32, 0, nullptr,
                               w.data()));
  RT_OK(fsdprt_ckpt_writer_set_metadata(writer, "step", "42"));
  RT_OK(fsdprt_ckpt_writer_finish(writer));
  // Atomic write: only the final file is left behind.
  EXPECT_EQ(listDir(), std::vector<std::string>{"model.safetensors"});

  int64_t reader;
  RT_OK(fsdprt_ckpt_reader_open(path.c_str(), &reader));
  int64_t count;
  RT_OK(fsdprt_ckpt_reader_num_tensors(reader, &count));
  ASSERT_EQ(count, 4);
  char name[64];
  RT_OK(fsdprt_ckpt_reader_tensor_name(reader, 0, name, sizeof(name)));
  EXPECT_STREQ(name, "half");
  int32_t dtype, rank;
  int64_t shape[FSDPRT_MAX_RANK];
  RT_OK(fsdprt_ckpt_reader_tensor_info(reader, "layers.0.weight", &dtype, &rank,
                                       shape));
  EXPECT_EQ(dtype, FSDPRT_F32);
  ASSERT_EQ(rank, 2);
  EXPECT_EQ(shape[0], 2);
  EXPECT_EQ(shape[1], 3);
  int64_t back = dev.alloc(6 * 4);
  RT_OK(fsdprt_ckpt_reader_read_to_buffer(reader, "layers.0.weight", dev.ctx,
                                          back, 0));
  EXPECT_EQ(dev.download(back, 6), w);
  std::vector<uint16_t> h2(3);
  RT_OK(fsdprt_ckpt_reader_read(reader, "half", h2.data(), 6));
  EXPECT_EQ(h2, h);
  std::vector<int64_t> ids2(3);
  RT_OK(fsdprt_ckpt_reader_read(reader, "ids", ids2.data(), 24));
  EXPECT_EQ(ids2, ids);
  RT_OK(fsdprt_ckpt_reader_tensor_info(reader, "scalar", &dtype, &rank, shape));
  EXPECT_EQ(rank, 0);
  char value[16];
  RT_OK(fsdprt_ckpt_reader_metadata(reader, "step", value, sizeof(value)));
  EXPECT_STREQ(value, "42");
  // Reading into a wrongly sized destination is refused.
  EXPECT_EQ(fsdprt_ckpt_reader_read(reader, "half", h2.data(), 4),
            FSDPRT_ERR_INVALID_ARGUMENT);
  RT_OK(fsdprt_ckpt_reader_close(reader));
}

TEST_F(Safetensors, OverwritesAnExistingFileAtomically) {
  std::string path = dir + "/ckpt.safetensors";
  for (float v : {1.0f, 2.0f}) {
    int64_t writer;
    RT_OK(fsdprt_ckpt_writer_create(path.c_str(), &writer));
    const int64_t shape[1] = {1};
    RT_OK(fsdprt_ckpt_writer_add(writer, "x", FSDPRT_F32, 1, shape, &v));
    RT_OK(fsdprt_ckpt_writer_finish(writer));
  }
  int64_t reader;
  RT_OK(fsdprt_ckpt_reader_open(path.c_str(), &reader));
  float got = 0;
  RT_OK(fsdprt_ckpt_reader_read(reader, "x", &got, 4));
  EXPECT_EQ(got, 2.0f);
  RT_OK(fsdprt_ckpt_reader_close(reader));
  EXPECT_EQ(listDir().size(), 1u);
}

TEST_F(Safetensors, RejectsFileShorterThanLengthField) {
  std::string path = dir + "/short.safetensors";
  std::ofstream(path) << "abc";
  expectRejected(path, "too short for the 8-byte header length");
}

TEST_F(Safetensors, RejectsOversizedHeaderLength) {
  expectRejected(writeRaw("{}", 0, int64_t(1) << 40), "exceeds the limit");
}

TEST_F(Safetensors, RejectsHeaderLengthPastEndOfFile) {
  expectRejected(writeRaw("{}", 0, 4096), "runs past the end of the file");
}

TEST_F(Safetensors, RejectsInvalidJson) {
  expectRejected(writeRaw("{\"a\": [1, 2", 0), "not valid JSON");
}

TEST_F(Safetensors, RejectsUnknownDtype) {
  expectRejected(
      writeRaw(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8),
      "unsupported dtype 'F64'");
}

TEST_F(Safetensors, RejectsTruncatedData) {
  expectRejected(
      writeRaw(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
               10),
      "past the data section");
}

TEST_F(Safetensors, RejectsSizeNotMatchingShape) {
  expectRejected(
      writeRaw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})",
               16),
      "shape and dtype need 12");
}

TEST_F(Safetensors, RejectsOverlappingTensors) {
  expectRejected(
      writeRaw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               12),
      "overlap");
}

TEST_F(Safetensors, RejectsNegativeAndReversedOffsets) {
  expectRejected(
      writeRaw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 8),
      "is negative");
  expectRejected(
      writeRaw(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8),
      "reversed");
}

TEST_F(Safetensors, RejectsNonStringMetadata) {
  expectRejected(writeRaw(R"({"__metadata__":{"step":3}})", 0),
                 "__metadata__ value of 'step' is not a string");
}

TEST_F(Safetensors, MissingFileIsAnIoError) {
  int64_t reader;
  EXPECT_EQ(fsdprt_ckpt_reader_open((dir + "/nope").c_str(), &reader),
            FSDPRT_ERR_IO);
}

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
