//===- RoutingTest.cpp - mixture-of-experts routing kernels ---------------===//
//
// Top-k, stable sort, histc, the inverse permutation, the index check and
// the grouped GEMM (forward against float64, its gradients against finite
// differences) on every backend.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include "fsdp/rt/math/Half.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class RoutingConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(RoutingConformance, TopkPicksLargestNaNFirstTiesByPosition) {
  Device dev(GetParam());
  const int64_t rows = 3, n = 6, k = 3;
  const float nan = std::nanf("");
  std::vector<float> x{0.1f,  0.7f, 0.3f,  0.7f, -1.0f, 0.2f, // tie: 1 before 3
                       -0.5f, nan,  0.9f,  0.0f, 0.9f,  0.4f, // NaN largest
                       0.25f, 0.5f, 0.75f, 1.0f, -2.0f, 3.0f};
  int64_t bx = dev.upload(x), bv = dev.alloc(rows * k * 4),
          bi = dev.alloc(rows * k * 8);
  RT_OK(fsdprt_topk_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, rows, n, k,
                            bv, 0, bi, 0));
  EXPECT_EQ(dev.download<int64_t>(bi, rows * k),
            (std::vector<int64_t>{1, 3, 2, 1, 2, 4, 5, 3, 2}));
  std::vector<float> v = dev.download(bv, rows * k);
  EXPECT_TRUE(std::isnan(v[3]));
  v[3] = 0;
  EXPECT_EQ(v, (std::vector<float>{0.7f, 0.7f, 0.3f, 0, 0.9f, 0.9f, 3.0f, 1.0f,
                                   0.75f}));
  // bf16 storage: the values are the chosen elements' bits.
  std::vector<uint16_t> h;
  for (float f : {0.5f, -1.0f, 2.0f, 0.25f})
    h.push_back(floatToBf16(f));
  int64_t bh = dev.upload(h), bhv = dev.alloc(2 * 2), bhi = dev.alloc(2 * 8);
  RT_OK(fsdprt_topk_forward(dev.ctx, dev.stream, FSDPRT_BF16, bh, 0, 1, 4, 2,
                            bhv, 0, bhi, 0));
  EXPECT_EQ(dev.download<int64_t>(bhi, 2), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(dev.download<uint16_t>(bhv, 2),
            (std::vector<uint16_t>{h[2], h[0]}));
}

TEST_P(RoutingConformance, SortIsStableAscending) {
  Device dev(GetParam());
  // Two rows of i64 expert ids with repeats: equal ids keep their order.
  std::vector<int64_t> ids{3, 1, 2, 1, 0, 3, 1, 2, 2, 0, 0, 1, 3, 3};
  const int64_t rows = 2, n = 7;
  int64_t bx = dev.upload(ids), bv = dev.alloc(rows * n * 8),
          bp = dev.alloc(rows * n * 8);
  RT_OK(fsdprt_sort_forward(dev.ctx, dev.stream, FSDPRT_I64, bx, 0, rows, n, bv,
                            0, bp, 0));
  std::vector<int64_t> want(rows * n);
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(want.begin() + r * n, want.begin() + (r + 1) * n, 0);
    std::stable_sort(
        want.begin() + r * n, want.begin() + (r + 1) * n,
        [&](int64_t a, int64_t b) { return ids[r * n + a] < ids[r * n + b]; });
  }
  EXPECT_EQ(dev.download<int64_t>(bp, rows * n), want);
  std::vector<int64_t> sorted = dev.download<int64_t>(bv, rows * n);
  for (int64_t i = 0; i < rows * n; ++i)
    EXPECT_EQ(sorted[i], ids[(i / n) * n + want[i]]) << i;
  // i32 ids and f32 with a NaN (last).
  std::vector<int32_t> small{2, 0, 2, 1};
  int64_t bs = dev.upload(small), bsv = dev.alloc(4 * 4), bsp = dev.alloc(32);
  RT_OK(fsdprt_sort_forward(dev.ctx, dev.stream, FSDPRT_I32, bs, 0, 1, 4, bsv,
                            0, bsp, 0));
  EXPECT_EQ(dev.download<int32_t>(bsv, 4), (std::vector<int32_t>{0, 1, 2, 2}));
  EXPECT_EQ(dev.download<int64_t>(bsp, 4), (std::vector<int64_t>{1, 3, 0, 2}));
  std::vector<float> f{0.5f, std::nanf(""), -1.0f, 0.5f};
  int64_t bf = dev.upload(f), bfv = dev.alloc(16), bfp = dev.alloc(32);
  RT_OK(fsdprt_sort_forward(dev.ctx, dev.stream, FSDPRT_F32, bf, 0, 1, 4, bfv,
                            0, bfp, 0));
  EXPECT_EQ(dev.download<int64_t>(bfp, 4), (std::vector<int64_t>{2, 0, 3, 1}));
}

TEST_P(RoutingConformance, HistcCountsEqualBinsAndSkipsOutside) {
  Device dev(GetParam());
  // torch.histc(x, bins=4, min=0, max=3): expert ids as floats (3 = max
  // falls in the last bin), plus values between and outside the range.
  std::vector<float> x{0, 3, 1, 1, 2, 3, 0.74f, 0.76f, 2.9f, -0.1f, 3.1f};
  int64_t bx = dev.upload(x), by = dev.alloc(4 * 4);
  RT_OK(fsdprt_histc(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, x.size(), 4, 0.0,
                     3.0, by, 0));
  EXPECT_EQ(dev.download(by, 4), (std::vector<float>{2, 3, 1, 3}));
  EXPECT_EQ(fsdprt_histc(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, x.size(), 4,
                         1.0, 1.0, by, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

TEST_P(RoutingConformance, InvertPermutationAndItsCheck) {
  Device dev(GetParam());
  std::vector<int64_t> p{3, 0, 4, 1, 2};
  int64_t bp = dev.upload(p), by = dev.alloc(5 * 8);
  RT_OK(fsdprt_invert_permutation(dev.ctx, dev.stream, FSDPRT_I64, bp, 0, 5, by,
                                  0));
  EXPECT_EQ(dev.download<int64_t>(by, 5),
            (std::vector<int64_t>{1, 3, 4, 0, 2}));
  std::vector<int32_t> p32{1, 0};
  int64_t bp32 = dev.upload(p32), by32 = dev.alloc(8);
  RT_OK(fsdprt_invert_permutation(dev.ctx, dev.stream, FSDPRT_I32, bp32, 0, 2,
                                  by32, 0));
  EXPECT_EQ(dev.download<int32_t>(by32, 2), (std::vector<int32_t>{1, 0}));
  // An entry outside [0, n) is data: reported at the next synchronize.
  std::vector<int64_t> bad{0, 5, 1};
  int64_t bb = dev.upload(bad);
  RT_OK(fsdprt_invert_permutation(dev.ctx, dev.stream, FSDPRT_I64, bb, 0, 3, by,
                                  0));
  EXPECT_EQ(fsdprt_stream_synchronize(dev.ctx, dev.stream),
            FSDPRT_ERR_OUT_OF_RANGE);
  std::string msg = fsdprt_last_error();
  EXPECT_NE(msg.find("invert_permutation"), std::string::npos) << msg;
}

TEST_P(RoutingConformance, IndexCheckNamesTheFirstBadIdAndItsPosition) {
  Device dev(GetParam());
  static const char what[] = "net.py:12: nn.id_range";
  // In range, and the ignore index where it is allowed: nothing to report.
  std::vector<int64_t> ok{0, 4, -100, 2};
  int64_t bok = dev.upload(ok);
  RT_OK(fsdprt_index_check(dev.ctx, dev.stream, FSDPRT_I64, bok, 0, 4, 5, 1,
                           -100, what));
  std::vector<int32_t> ok32{1, 0, 4};
  int64_t bok32 = dev.upload(ok32);
  RT_OK(fsdprt_index_check(dev.ctx, dev.stream, FSDPRT_I32, bok32, 0, 3, 5, 0,
                           0, what));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, dev.stream));
  struct Case {
    std::vector<int64_t> ids;
    int32_t hasIgnore;
    std::string message;
  };
  for (const Case &c : std::vector<Case>{
           // The first bad one of several, past the end and negative.
           {{1, 5, -1},
            1,
            "net.py:12: nn.id_range: index 5 at position 1 is outside [0, 5) "
            "and is not the ignore index -100"},
           {{0, -3}, 1, "index -3 at position 1 is outside [0, 5)"},
           // -100 is allowed only with has_ignore.
           {{-100}, 0, "index -100 at position 0 is outside [0, 5)"}}) {
    int64_t b = dev.upload(c.ids);
    RT_OK(fsdprt_index_check(dev.ctx, dev.stream, FSDPRT_I64, b, 0,
                             int64_t(c.ids.size()), 5, c.hasIgnore, -100,
                             what));
    // A device reports at the next synchronisation, the host at once.
    EXPECT_EQ(fsdprt_stream_synchronize(dev.ctx, dev.stream),
              FSDPRT_ERR_OUT_OF_RANGE);
    std::string msg = fsdprt_last_error();
    EXPECT_NE(msg.find(c.message), std::string::npos) << msg;
    EXPECT_EQ(c.hasIgnore != 0, msg.find("ignore") != std::string::npos) << msg;
  }
  EXPECT_EQ(fsdprt_index_check(dev.ctx, dev.stream, FSDPRT_I64, bok, 0, 4, 5, 0,
                               0, nullptr),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

/// y = the grouped GEMM of x [rows, k] by w [groups, k, n] over segment
/// ends `ends`, in float64.
static std::vector<double> groupedReference(const Inputs &in,
                                            const std::vector<int64_t> &ends,
                                            int64_t rows, int64_t k,
                                            int64_t n) {
  std::vector<double> y(rows * n, 0.0);
  int64_t begin = 0;
  for (size_t g = 0; g < ends.size(); begin = ends[g++])
    for (int64_t r = begin; r < ends[g]; ++r)
      for (int64_t c = 0; c < n; ++c)
        for (int64_t j = 0; j < k; ++j)
          y[r * n + c] += in[0][r * k + j] * in[1][(g * k + j) * n + c];
  return y;
}

TEST_P(RoutingConformance, GroupedMatmulMatchesFloat64AndFiniteDifferences) {
  Device dev(GetParam());
  // 4 groups over 13 rows: group 1 empty, rows 11 and 12 in no group (0,
  // no gradient); i32 offsets as torch's.
  const int64_t rows = 13, groups = 4, k = 5, n = 3;
  const std::vector<int64_t> ends{3, 3, 9, 11};
  std::vector<int32_t> offs(ends.begin(), ends.end());
  auto x = randomVector(rows * k, 171), w = randomVector(groups * k * n, 172),
       dy = randomVector(rows * n, 173);
  std::vector<float> wt(w.size()); // w[g]ᵀ: the input gradient's weights
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t c = 0; c < n; ++c)
        wt[(g * n + c) * k + j] = w[(g * k + j) * n + c];
  int64_t bx = dev.upload(x), bw = dev.upload(w), bwt = dev.upload(wt),
          bdy = dev.upload(dy), bo = dev.upload(offs),
          by = dev.alloc(rows * n * 4), bdx = dev.alloc(rows * k * 4),
          bdw = dev.alloc(groups * k * n * 4);
  RT_OK(fsdprt_grouped_matmul_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                      FSDPRT_I32, bx, 0, bw, 0, bo, 0, by, 0,
                                      rows, groups, k, n));
  RT_OK(fsdprt_grouped_matmul_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                      FSDPRT_I32, bdy, 0, bwt, 0, bo, 0, bdx, 0,
                                      rows, groups, n, k));
  RT_OK(fsdprt_grouped_matmul_backward_weight(dev.ctx, dev.stream, FSDPRT_F32,
                                              FSDPRT_I32, bx, 0, bdy, 0, bo, 0,
                                              bdw, 0, rows, groups, k, n));
  Reference ref = [&](const Inputs &in) {
    return groupedReference(in, ends, rows, k, n);
  };
  Inputs in{toDouble(x), toDouble(w)};
  std::vector<float> y = dev.download(by, rows * n);
  expectClose(y, ref(in), "y");
  for (int64_t i = 11 * n; i < rows * n; ++i)
    EXPECT_EQ(y[i], 0.0f) << "row of no group at " << i;
  expectGradients(
      ref, in, toDouble(dy),
      {dev.download(bdx, rows * k), dev.download(bdw, groups * k * n)},
      {"dx", "dw"});
  std::vector<float> dw = dev.download(bdw, groups * k * n);
  for (int64_t i = k * n; i < 2 * k * n; ++i)
    EXPECT_EQ(dw[i], 0.0f) << "empty group's gradient at " << i;
}

TEST_P(RoutingConformance, GroupedMatmulSpansTilesAndSegmentBoundaries) {
  // Segments that start and end inside the CUDA kernels' 16-row tiles, k
  // and n that are not multiples of 16, an empty group and rows of none:
  // both products against their float64 definitions.
  const int64_t rows = 70, groups = 4, k = 37, n = 20;
  const std::vector<int64_t> ends{20, 20, 53, 61};
  std::vector<int32_t> offs(ends.begin(), ends.end());
  auto x = randomVector(rows * k, 201), w = randomVector(groups * k * n, 202),
       dy = randomVector(rows * n, 203);
  Device dev(GetParam());
  int64_t bx = dev.upload(x), bw = dev.upload(w), bdy = dev.upload(dy),
          bo = dev.upload(offs), by = dev.alloc(rows * n * 4),
          bdw = dev.alloc(groups * k * n * 4);
  RT_OK(fsdprt_grouped_matmul_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                      FSDPRT_I32, bx, 0, bw, 0, bo, 0, by, 0,
                                      rows, groups, k, n));
  RT_OK(fsdprt_grouped_matmul_backward_weight(
      dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_I32, bx, 0, bdy, 0, bo, 0, bdw,
      0, rows, groups, k, n));
  Inputs in{toDouble(x), toDouble(w)};
  expectClose(dev.download(by, rows * n),
              groupedReference(in, ends, rows, k, n), "y");
  std::vector<double> dw(groups * k * n, 0.0);
  int64_t begin = 0;
  for (int64_t g = 0; g < groups; begin = ends[g++])
    for (int64_t r = begin; r < ends[g]; ++r)
      for (int64_t j = 0; j < k; ++j)
        for (int64_t c = 0; c < n; ++c)
          dw[(g * k + j) * n + c] += double(x[r * k + j]) * dy[r * n + c];
  expectClose(dev.download(bdw, groups * k * n), dw, "dw");
}

TEST_P(RoutingConformance, GroupedMatmulI64OffsetsAndBf16) {
  Device dev(GetParam());
  // The same product in bf16 storage with i64 offsets: f32 accumulation,
  // one rounding to bf16 (2^-8 relative) is the whole error.
  const int64_t rows = 6, groups = 2, k = 4, n = 2;
  const std::vector<int64_t> ends{2, 6};
  auto x = randomVector(rows * k, 181), w = randomVector(groups * k * n, 182);
  std::vector<uint16_t> xh, wh;
  for (float &v : x)
    xh.push_back(floatToBf16(v)), v = bf16ToFloat(xh.back());
  for (float &v : w)
    wh.push_back(floatToBf16(v)), v = bf16ToFloat(wh.back());
  int64_t bx = dev.upload(xh), bw = dev.upload(wh), bo = dev.upload(ends),
          by = dev.alloc(rows * n * 2);
  RT_OK(fsdprt_grouped_matmul_forward(dev.ctx, dev.stream, FSDPRT_BF16,
                                      FSDPRT_I64, bx, 0, bw, 0, bo, 0, by, 0,
                                      rows, groups, k, n));
  std::vector<float> got;
  for (uint16_t v : dev.download<uint16_t>(by, rows * n))
    got.push_back(bf16ToFloat(v));
  expectClose(got,
              groupedReference({toDouble(x), toDouble(w)}, ends, rows, k, n),
              "y", 1e-2, 1e-2);
}

TEST_P(RoutingConformance, GroupedMatmulOffsetPastTheRowsFails) {
  Device dev(GetParam());
  std::vector<int32_t> offs{2, 7}; // 7 > rows
  auto x = randomVector(6 * 2, 191), w = randomVector(2 * 2 * 2, 192);
  int64_t bx = dev.upload(x), bw = dev.upload(w), bo = dev.upload(offs),
          by = dev.alloc(6 * 2 * 4);
  RT_OK(fsdprt_grouped_matmul_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                      FSDPRT_I32, bx, 0, bw, 0, bo, 0, by, 0, 6,
                                      2, 2, 2));
  EXPECT_EQ(fsdprt_stream_synchronize(dev.ctx, dev.stream),
            FSDPRT_ERR_OUT_OF_RANGE);
  std::string msg = fsdprt_last_error();
  EXPECT_NE(msg.find("grouped_matmul_forward"), std::string::npos) << msg;
}

TEST_P(RoutingConformance, FloorDivRoundsDownOnIntegers) {
  Device dev(GetParam());
  std::vector<int64_t> a{7, -7, 6, 5, 9}, b{2};
  const std::vector<int64_t> as{5}, bs{1};
  int64_t ba = dev.upload(a), bb = dev.upload(b), bo = dev.alloc(5 * 8);
  RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_I64, FSDPRT_FLOOR_DIV,
                              ba, 0, 1, as.data(), bb, 0, 1, bs.data(), bo, 0));
  EXPECT_EQ(dev.download<int64_t>(bo, 5),
            (std::vector<int64_t>{3, -4, 3, 2, 4}));
  std::vector<int32_t> c{5, -5}, d{-2, 0};
  const std::vector<int64_t> cs{2};
  int64_t bc = dev.upload(c), bd = dev.upload(d), bq = dev.alloc(8);
  RT_OK(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_I32, FSDPRT_FLOOR_DIV,
                              bc, 0, 1, cs.data(), bd, 0, 1, cs.data(), bq, 0));
  EXPECT_EQ(dev.download<int32_t>(bq, 2), (std::vector<int32_t>{-3, 0}));
  // Floats have no floor_div.
  EXPECT_EQ(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                  FSDPRT_FLOOR_DIV, bc, 0, 1, cs.data(), bd, 0,
                                  1, cs.data(), bq, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

FSDPRT_INSTANTIATE_CONFORMANCE(RoutingConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
