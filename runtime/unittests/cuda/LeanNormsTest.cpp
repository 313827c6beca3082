//===- LeanNormsTest.cpp - lean norm kernels give the streaming bits ------===//
//
// The lean layer_norm / rms_norm row kernels (LeanNorms.cu) against the
// streaming ones (RowKernels.cu), called directly through the backend's
// launchers: the same bits for every output (y, the fused add's sum, dx
// with and without addend, the backward's mean and rstd) in f32, bf16 and
// f16, at the lean widths and, where the launchers fall back to the
// streaming kernels, at other widths and misaligned rows; a NaN row gives
// NaN in both, the hardware's canonical NaN (0x7fff) in the lean kernels'
// 16-bit outputs. Runs on the host emulation (fsdprt_cuda_emu_unittests)
// and on a GPU (fsdprt_cuda_unittests, skipped without one), where the
// kernels' rows are spread over more warps than are resident.
//
//===----------------------------------------------------------------------===//
#include "Kernels.h" // runtime/backends/cuda

#include "fsdp/rt/math/Half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace fsdp {
namespace rt {
namespace cuda {
namespace {

#ifdef FSDPRT_CUDA_EMULATION
constexpr int64_t kRows = 13;
#else
// More rows than an H100's resident warps (132 SMs x 16): each warp of
// the lean kernels strides over several rows.
constexpr int64_t kRows = 4133;
#endif

/// Device memory holding `bytes` plus one element's slack (misaligned
/// operands start one element in).
class Buffer {
public:
  explicit Buffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr_, bytes + 8), 0); }
  ~Buffer() { cudaFree(ptr_); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  char *get() const { return static_cast<char *>(ptr_); }

private:
  void *ptr_ = nullptr;
};

struct Case {
  DType dt;
  int64_t d;
  bool aligned, affine;
  /// Whether the lean launchers take it (a lean width, aligned).
  bool lean;
};

class LeanNormsTest : public ::testing::TestWithParam<DType> {
protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), 0);
  }
  void TearDown() override { cudaStreamDestroy(stream); }

  size_t es() const { return GetParam() == DType::F32 ? 4 : 2; }

  /// n values in the storage type (bytes), uniform in [-2, 2), with a NaN
  /// at `nanAt` (if >= 0).
  std::vector<char> values(int64_t n, uint32_t seed, int64_t nanAt = -1) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    std::vector<char> bytes(n * es());
    for (int64_t i = 0; i < n; ++i) {
      float f = i == nanAt ? NAN : dist(gen);
      if (es() == 4) {
        std::memcpy(&bytes[i * 4], &f, 4);
      } else {
        uint16_t h = GetParam() == DType::BF16 ? floatToBf16(f) : floatToF16(f);
        std::memcpy(&bytes[i * 2], &h, 2);
      }
    }
    return bytes;
  }

  /// v's bytes at b + off (copied before v goes).
  char *upload(const Buffer &b, size_t off, const std::vector<char> &v) {
    EXPECT_EQ(cudaMemcpyAsync(b.get() + off, v.data(), v.size(),
                              cudaMemcpyHostToDevice, stream),
              0);
    EXPECT_EQ(cudaStreamSynchronize(stream), 0);
    return b.get() + off;
  }
  std::vector<char> download(const char *p, size_t bytes) {
    std::vector<char> v(bytes);
    EXPECT_EQ(cudaMemcpyAsync(v.data(), p, bytes, cudaMemcpyDeviceToHost,
                              stream),
              0);
    EXPECT_EQ(cudaStreamSynchronize(stream), 0);
    return v;
  }

  /// Streaming and lean results are the same bits, but where the lean
  /// kernels ran (`lean`) and the streaming result is a NaN: there the lean
  /// one is a NaN too, 0x7fff in 16 bits. `width`: bytes an element (4 for
  /// the f32 statistics).
  void expectSameBits(const std::vector<char> &streaming,
                      const std::vector<char> &lean, size_t width, bool ran,
                      const char *what) {
    ASSERT_EQ(streaming.size(), lean.size());
    int64_t n = static_cast<int64_t>(streaming.size() / width), nans = 0,
            bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint32_t s = 0, l = 0;
      std::memcpy(&s, &streaming[i * width], width);
      std::memcpy(&l, &lean[i * width], width);
      bool sNan = width == 4 ? (s & 0x7fffffffu) > 0x7f800000u
                  : GetParam() == DType::BF16 ? (s & 0x7fffu) > 0x7f80u
                                              : (s & 0x7fffu) > 0x7c00u;
      nans += sNan;
      bool ok = !sNan || !ran ? s == l
                : width == 4
                    ? (l & 0x7fffffffu) > 0x7f800000u
                    : l == 0x7fffu;
      if (!ok && bad++ < 3)
        ADD_FAILURE() << what << "[" << i << "]: streaming 0x" << std::hex
                      << s << ", lean 0x" << l;
    }
    EXPECT_EQ(bad, 0) << what << ": elements differing";
    // Row 1 holds a NaN (values()): its outputs are NaN, the rest finite.
    EXPECT_LT(nans, n) << what << ": every element NaN";
  }

  void check(const Case &c);

  cudaStream_t stream = nullptr;
};

void LeanNormsTest::check(const Case &c) {
  SCOPED_TRACE(::testing::Message()
               << "d " << c.d << (c.aligned ? " aligned" : " misaligned")
               << (c.affine ? " affine" : ""));
  const int64_t n = kRows * c.d;
  const size_t off = c.aligned ? 0 : es(), bytes = n * es(), wb = c.d * es();
  const float eps = 1e-5f;
  Buffer bx(bytes), bw(wb), bb(wb), bdy(bytes), badd(bytes), bout(bytes),
      bsum(bytes), bstats(2 * kRows * 4);
  // Row 1 of x (and of the add's first operand) holds a NaN.
  char *x = upload(bx, off, values(n, 11, c.d + 5));
  char *w = c.affine ? upload(bw, off, values(c.d, 12)) : nullptr;
  char *b = c.affine ? upload(bb, off, values(c.d, 13)) : nullptr;
  char *dy = upload(bdy, off, values(n, 14));
  char *addend = upload(badd, off, values(n, 15));
  char *out = bout.get() + off, *sum = bsum.get() + off;
  float *mean = reinterpret_cast<float *>(bstats.get()),
        *rstd = mean + kRows;
  EXPECT_EQ(leanLayerNormForward(stream, c.dt, x, w, b, out, kRows, c.d, eps),
            c.lean);

  // Each call twice, streaming then lean; out's bytes after each.
  auto both = [&](auto call) {
    std::vector<char> r[2];
    int i = 0;
    for (NormKernels k : {NormKernels::Streaming, NormKernels::Lean}) {
      call(k);
      r[i++] = download(out, bytes);
    }
    return std::pair<std::vector<char>, std::vector<char>>(r[0], r[1]);
  };

  auto fwd = both([&](NormKernels k) {
    layerNormForward(stream, c.dt, x, w, b, out, kRows, c.d, eps, k);
  });
  expectSameBits(fwd.first, fwd.second, es(), c.lean, "layer_norm y");

  std::vector<char> sums[2];
  int at = 0;
  auto add = both([&](NormKernels k) {
    addLayerNormForward(stream, c.dt, x, dy, w, b, sum, out, kRows, c.d, eps,
                        k);
    sums[at++] = download(sum, bytes);
  });
  expectSameBits(add.first, add.second, es(), c.lean, "add_layer_norm y");
  expectSameBits(sums[0], sums[1], es(), c.lean, "add_layer_norm sum");

  for (bool withAddend : {false, true}) {
    std::vector<char> stats[2];
    at = 0;
    auto bwd = both([&](NormKernels k) {
      layerNormRowsBackward(stream, c.dt, x, w, dy,
                            withAddend ? addend : nullptr, out, mean, rstd,
                            kRows, c.d, eps, k);
      stats[at++] = download(bstats.get(), 2 * kRows * 4);
    });
    expectSameBits(bwd.first, bwd.second, es(), c.lean,
                   withAddend ? "layer_norm dx + addend" : "layer_norm dx");
    expectSameBits(stats[0], stats[1], 4, c.lean, "layer_norm mean, rstd");
  }

  auto rms = both([&](NormKernels k) {
    rmsNormForward(stream, c.dt, x, w, out, kRows, c.d, eps, k);
  });
  expectSameBits(rms.first, rms.second, es(), c.lean, "rms_norm y");
  std::vector<char> stats[2];
  at = 0;
  auto rmsBwd = both([&](NormKernels k) {
    rmsNormRowsBackward(stream, c.dt, x, w, dy, out, rstd, kRows, c.d, eps, k);
    stats[at++] = download(reinterpret_cast<const char *>(rstd), kRows * 4);
  });
  expectSameBits(rmsBwd.first, rmsBwd.second, es(), c.lean,
                 "rms_norm dx");
  expectSameBits(stats[0], stats[1], 4, c.lean, "rms_norm rstd");
}

/// GPT-2 small's and medium's widths and the smallest lean one, with and
/// without weights: the lean kernels run and give the streaming bits.
TEST_P(LeanNormsTest, LeanWidthsGiveTheStreamingBits) {
  for (int64_t d : {int64_t(768), int64_t(1024), int64_t(256)})
    for (bool affine : {true, false})
      check({GetParam(), d, true, affine, true});
}

/// Rows the lean kernels do not take fall back to the streaming kernels:
/// an odd width, a multiple of 8 that is no lean width, misaligned rows.
TEST_P(LeanNormsTest, OtherRowsFallBack) {
  check({GetParam(), 771, true, true, false});
  check({GetParam(), 264, true, true, false});
  check({GetParam(), 768, false, true, false});
}

INSTANTIATE_TEST_SUITE_P(Storage, LeanNormsTest,
                         ::testing::Values(DType::F32, DType::BF16,
                                           DType::F16),
                         [](const auto &info) {
                           return std::string(dtypeName(info.param));
                         });

} // namespace
} // namespace cuda
} // namespace rt
} // namespace fsdp
