//===- LayoutTest.cpp - layout kernels, slices, cumsum, reduce, cast ------===//
#include "TestUtil.h"

#include "fsdp/rt/math/Half.h"

#include <numeric>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class LayoutConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(LayoutConformance, TransposeArbitraryPermutation) {
  Device dev(GetParam());
  const std::vector<int64_t> shape{2, 3, 4}, perm{2, 0, 1};
  const int64_t n = 24;
  auto x = randomVector(n, 131), dy = randomVector(n, 132);
  // y[i,j,k] = x[j,k,i] with y of shape [4, 2, 3].
  Reference ref = [&](const Inputs &in) {
    std::vector<double> y(n);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t k = 0; k < 3; ++k)
          y[(i * 2 + j) * 3 + k] = in[0][(j * 3 + k) * 4 + i];
    return y;
  };
  int64_t bx = dev.upload(x), bdy = dev.upload(dy), by = dev.alloc(n * 4),
          bdx = dev.alloc(n * 4);
  RT_OK(fsdprt_transpose_forward(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, by, 0,
                                 3, shape.data(), perm.data()));
  RT_OK(fsdprt_transpose_backward(dev.ctx, dev.stream, FSDPRT_F32, bdy, 0, bdx,
                                  0, 3, shape.data(), perm.data()));
  Inputs in{toDouble(x)};
  expectClose(dev.download(by, n), ref(in), "y");
  expectGradients(ref, in, toDouble(dy), {dev.download(bdx, n)}, {"dx"});
}

TEST_P(LayoutConformance, SplitAndConcatAreInverse) {
  Device dev(GetParam());
  const std::vector<int64_t> shape{2, 5, 3}, sizes{1, 3, 1};
  const int64_t n = 30;
  auto x = randomVector(n, 141);
  int64_t bx = dev.upload(x), back = dev.alloc(n * 4);
  std::vector<int64_t> parts, offs(3, 0);
  for (int64_t s : sizes)
    parts.push_back(dev.alloc(2 * s * 3 * 4));
  RT_OK(fsdprt_split(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3, shape.data(), 1,
                     3, sizes.data(), parts.data(), offs.data()));
  int64_t start = 0;
  for (size_t p = 0; p < sizes.size(); ++p) {
    std::vector<double> want;
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t j = start; j < start + sizes[p]; ++j)
        for (int64_t i = 0; i < 3; ++i)
          want.push_back(x[(o * 5 + j) * 3 + i]);
    expectClose(dev.download(parts[p], want.size()), want,
                "part " + std::to_string(p));
    start += sizes[p];
  }
  // concat is split's backward (and vice versa): it must restore x exactly.
  RT_OK(fsdprt_concat(dev.ctx, dev.stream, FSDPRT_F32, 3, parts.data(),
                      offs.data(), sizes.data(), 3, shape.data(), -2, back, 0));
  EXPECT_EQ(dev.download(back, n), x);
}

// Slab copies move the widest unit (up to 16 bytes) every address, pitch
// and width allows: the bytes are those of an element-wise copy whatever
// the unit, for 2-byte elements at every offset parity (bf16 rows of 8,
// 12, 13 and 768 elements).
TEST_P(LayoutConformance, SplitAndConcatAtEveryAlignment) {
  Device dev(GetParam());
  for (int64_t width : {8, 12, 13, 768}) {
    SCOPED_TRACE(::testing::Message() << "part width " << width);
    const int64_t rows = 5, parts = 3, n = rows * parts * width;
    std::vector<uint16_t> x(n);
    for (int64_t i = 0; i < n; ++i)
      x[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
    std::vector<int64_t> shape{rows, parts * width}, sizes(parts, width),
        offs(parts, 0), bufs;
    for (int64_t p = 0; p < parts; ++p)
      bufs.push_back(dev.alloc(rows * width * 2 + 2));
    // An odd element offset (offsets are in bytes) misaligns every row.
    int64_t bx = dev.alloc(n * 2 + 2), back = dev.alloc(n * 2 + 2);
    for (int64_t at : {int64_t(0), int64_t(1)}) {
      SCOPED_TRACE(::testing::Message() << "offset " << at);
      RT_OK(fsdprt_copy_from_host(dev.ctx, dev.stream, bx, at * 2, x.data(),
                                  n * 2));
      std::vector<int64_t> partOffs(parts, at * 2);
      RT_OK(fsdprt_split(dev.ctx, dev.stream, FSDPRT_BF16, bx, at * 2, 2,
                         shape.data(), 1, parts, sizes.data(), bufs.data(),
                         partOffs.data()));
      for (int64_t p = 0; p < parts; ++p) {
        std::vector<uint16_t> want;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < width; ++j)
            want.push_back(x[r * parts * width + p * width + j]);
        auto got = dev.download<uint16_t>(bufs[p], at + rows * width);
        EXPECT_EQ(std::vector<uint16_t>(got.begin() + at, got.end()), want)
            << "part " << p;
      }
      RT_OK(fsdprt_concat(dev.ctx, dev.stream, FSDPRT_BF16, parts, bufs.data(),
                          partOffs.data(), sizes.data(), 2, shape.data(), 1,
                          back, at * 2));
      auto whole = dev.download<uint16_t>(back, at + n);
      EXPECT_EQ(std::vector<uint16_t>(whole.begin() + at, whole.end()), x);
    }
  }
}

TEST_P(LayoutConformance, SliceAndPadOfFloatsAndIntegers) {
  Device dev(GetParam());
  const std::vector<int64_t> shape{2, 5, 3};
  auto x = randomVector(30, 143);
  int64_t bx = dev.upload(x), by = dev.alloc(2 * 2 * 3 * 4),
          bp = dev.alloc(2 * 8 * 3 * 4);
  // x[:, 1:3, :]
  RT_OK(fsdprt_slice(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3, shape.data(),
                     1, 1, 2, by, 0));
  std::vector<float> want;
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j = 1; j < 3; ++j)
      for (int64_t i = 0; i < 3; ++i)
        want.push_back(x[(o * 5 + j) * 3 + i]);
  EXPECT_EQ(dev.download(by, 12), want);
  // One 0.5 before dim 1 and two after: slicing [1, 6) gives x back.
  RT_OK(fsdprt_pad(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3, shape.data(), -2,
                   1, 2, 0.5, bp, 0));
  std::vector<float> padded = dev.download(bp, 48);
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j : {0, 6, 7})
      for (int64_t i = 0; i < 3; ++i)
        EXPECT_EQ(padded[(o * 8 + j) * 3 + i], 0.5f);
  const std::vector<int64_t> paddedShape{2, 8, 3};
  int64_t back = dev.alloc(30 * 4);
  RT_OK(fsdprt_slice(dev.ctx, dev.stream, FSDPRT_F32, bp, 0, 3,
                     paddedShape.data(), 1, 1, 5, back, 0));
  EXPECT_EQ(dev.download(back, 30), x);

  // Integer labels, padded with -100 at the end of the last dim and shifted
  // left by one (Hugging Face's causal-LM loss).
  std::vector<int64_t> labels{3, 1, 4, 1, 5, 9}, labelShape{2, 3},
      paddedLabels{2, 4};
  int64_t bl = dev.upload(labels), bpl = dev.alloc(8 * 8),
          bs = dev.alloc(6 * 8);
  RT_OK(fsdprt_pad(dev.ctx, dev.stream, FSDPRT_I64, bl, 0, 2, labelShape.data(),
                   1, 0, 1, -100.0, bpl, 0));
  RT_OK(fsdprt_slice(dev.ctx, dev.stream, FSDPRT_I64, bpl, 0, 2,
                     paddedLabels.data(), 1, 1, 3, bs, 0));
  EXPECT_EQ(dev.download<int64_t>(bs, 6),
            (std::vector<int64_t>{1, 4, -100, 5, 9, -100}));

  // A window past the end is refused.
  EXPECT_NE(fsdprt_slice(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3,
                         shape.data(), 1, 4, 2, by, 0),
            FSDPRT_OK);
  EXPECT_NE(fsdprt_pad(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3, shape.data(),
                       1, -1, 0, 0.0, bp, 0),
            FSDPRT_OK);
}

/// x[..., start::step, ...] of a [outer, dim, inner] tensor, by loops.
template <typename T>
static std::vector<T> stridedReference(const std::vector<T> &x, int64_t outer,
                                       int64_t dim, int64_t inner,
                                       int64_t start, int64_t step,
                                       int64_t count) {
  std::vector<T> y;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i)
      for (int64_t j = 0; j < inner; ++j)
        y.push_back(x[(o * dim + start + i * step) * inner + j]);
  return y;
}

TEST_P(LayoutConformance, StridedSliceAndItsScatterIntoZeros) {
  Device dev(GetParam());
  // [3, 7, 5] f32: x[:, 1::3, :] picks rows 1 and 4 (7 is not a multiple
  // of the step); the backward puts them back among zeros.
  const std::vector<int64_t> shape{3, 7, 5};
  auto x = randomVector(105, 151);
  int64_t bx = dev.upload(x), by = dev.alloc(3 * 2 * 5 * 4),
          bdx = dev.upload(std::vector<float>(105, 7.0f));
  RT_OK(fsdprt_strided_slice(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3,
                             shape.data(), 1, 1, 3, 2, by, 0));
  std::vector<float> want = stridedReference(x, 3, 7, 5, 1, 3, 2);
  EXPECT_EQ(dev.download(by, 30), want);
  // Every element of dx is written: the stale 7s must all be gone.
  RT_OK(fsdprt_strided_slice_backward(dev.ctx, dev.stream, FSDPRT_F32, by, 0,
                                      3, shape.data(), 1, 1, 3, 2, bdx, 0));
  std::vector<float> dx = dev.download(bdx, 105);
  for (int64_t o = 0; o < 3; ++o)
    for (int64_t r = 0; r < 7; ++r)
      for (int64_t j = 0; j < 5; ++j) {
        int64_t at = (o * 7 + r) * 5 + j;
        EXPECT_EQ(dx[at], r == 1 || r == 4 ? x[at] : 0.0f)
            << "o=" << o << " r=" << r << " j=" << j;
      }

  // GPT-J's interleaved halves of the last dim, bf16 (2-byte elements):
  // even and odd positions together are every element once.
  std::vector<uint16_t> h(2 * 8);
  std::iota(h.begin(), h.end(), uint16_t(100));
  const std::vector<int64_t> hShape{2, 8};
  int64_t bh = dev.upload(h), bEven = dev.alloc(8 * 2), bOdd = dev.alloc(8 * 2);
  RT_OK(fsdprt_strided_slice(dev.ctx, dev.stream, FSDPRT_BF16, bh, 0, 2,
                             hShape.data(), -1, 0, 2, 4, bEven, 0));
  RT_OK(fsdprt_strided_slice(dev.ctx, dev.stream, FSDPRT_BF16, bh, 0, 2,
                             hShape.data(), -1, 1, 2, 4, bOdd, 0));
  EXPECT_EQ(dev.download<uint16_t>(bEven, 8),
            stridedReference(h, 2, 8, 1, 0, 2, 4));
  EXPECT_EQ(dev.download<uint16_t>(bOdd, 8),
            stridedReference(h, 2, 8, 1, 1, 2, 4));

  // i64 ids along dim 0 (8-byte elements), x[0::2] of 5 rows.
  std::vector<int64_t> ids{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const std::vector<int64_t> idShape{5, 2};
  int64_t bi = dev.upload(ids), bo = dev.alloc(6 * 8);
  RT_OK(fsdprt_strided_slice(dev.ctx, dev.stream, FSDPRT_I64, bi, 0, 2,
                             idShape.data(), 0, 0, 2, 3, bo, 0));
  EXPECT_EQ(dev.download<int64_t>(bo, 6),
            (std::vector<int64_t>{1, 2, 5, 6, 9, 10}));

  // A window reaching past the dimension, and a zero step, are refused.
  EXPECT_EQ(fsdprt_strided_slice(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3,
                                 shape.data(), 1, 1, 3, 3, by, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(fsdprt_strided_slice_backward(dev.ctx, dev.stream, FSDPRT_F32, by,
                                          0, 3, shape.data(), 1, 0, 0, 2, bdx,
                                          0),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

/// torch.cumsum of a [outer, dim, inner] tensor in float64.
static std::vector<double> cumsumReference(const std::vector<float> &x,
                                           int64_t outer, int64_t dim,
                                           int64_t inner, bool reverse) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < dim; ++k) {
        int64_t at = (o * dim + (reverse ? dim - 1 - k : k)) * inner + j;
        acc += x[at];
        y[at] = acc;
      }
    }
  return y;
}

TEST_P(LayoutConformance, CumsumOfFloatsAndIntegersBothWays) {
  Device dev(GetParam());
  // [3, 50, 4] f32 along the middle dim, forward and reversed: within one
  // f32 rounding of the float64 sums (the kernel accumulates in double and
  // rounds each prefix once, so 0.5 ulp is the whole error).
  const std::vector<int64_t> shape{3, 50, 4};
  auto x = randomVector(600, 157, -1.0f, 1.0f);
  int64_t bx = dev.upload(x), by = dev.alloc(600 * 4);
  for (int32_t reverse : {0, 1}) {
    RT_OK(fsdprt_cumsum(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3,
                        shape.data(), 1, reverse, by, 0));
    std::vector<float> got = dev.download(by, 600);
    std::vector<double> want = cumsumReference(x, 3, 50, 4, reverse);
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_EQ(got[i], static_cast<float>(want[i]))
          << "reverse=" << reverse << " at " << i;
  }
  // bf16 along the last dim (-1): small integers and halves stay exact.
  std::vector<float> small{0.5f, 1, 2, -3, 4, 0.5f, -1, 8};
  std::vector<uint16_t> h;
  for (float v : small)
    h.push_back(floatToBf16(v));
  const std::vector<int64_t> hShape{2, 4};
  int64_t bh = dev.upload(h), bhy = dev.alloc(8 * 2);
  RT_OK(fsdprt_cumsum(dev.ctx, dev.stream, FSDPRT_BF16, bh, 0, 2,
                      hShape.data(), -1, 0, bhy, 0));
  std::vector<float> hy;
  for (uint16_t v : dev.download<uint16_t>(bhy, 8))
    hy.push_back(bf16ToFloat(v));
  EXPECT_EQ(hy, (std::vector<float>{0.5f, 1.5f, 3.5f, 0.5f, 4, 4.5f, 3.5f,
                                    11.5f}));
  // RoBERTa's position ids: the running count of a padding mask (i32 and
  // i64) along dim 1; i64 sums past 2^32 stay exact.
  std::vector<int32_t> mask{1, 1, 0, 1, 0, 1, 1, 1};
  int64_t bm = dev.upload(mask), bmy = dev.alloc(8 * 4);
  RT_OK(fsdprt_cumsum(dev.ctx, dev.stream, FSDPRT_I32, bm, 0, 2,
                      hShape.data(), 1, 0, bmy, 0));
  EXPECT_EQ(dev.download<int32_t>(bmy, 8),
            (std::vector<int32_t>{1, 2, 2, 3, 0, 1, 2, 3}));
  std::vector<int64_t> big{int64_t(3) << 32, 1, -(int64_t(1) << 33), 5};
  const std::vector<int64_t> bigShape{4};
  int64_t bb = dev.upload(big), bby = dev.alloc(4 * 8);
  RT_OK(fsdprt_cumsum(dev.ctx, dev.stream, FSDPRT_I64, bb, 0, 1,
                      bigShape.data(), 0, 1, bby, 0));
  EXPECT_EQ(dev.download<int64_t>(bby, 4),
            (std::vector<int64_t>{(int64_t(1) << 32) + 6,
                                  -(int64_t(1) << 33) + 6, -(int64_t(1) << 33) + 5,
                                  5}));
  // A dim outside the shape is refused.
  EXPECT_EQ(fsdprt_cumsum(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, 3,
                          shape.data(), 3, 0, by, 0),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

TEST_P(LayoutConformance, ReduceSumAndMeanOverDimLists) {
  Device dev(GetParam());
  const std::vector<int64_t> shape{3, 4, 5};
  const int64_t n = 60;
  auto x = randomVector(n, 151);
  struct Case {
    std::vector<int64_t> dims;
  };
  for (int kind : {FSDPRT_REDUCE_SUM, FSDPRT_REDUCE_MEAN})
    for (const Case &c :
         {Case{{0}}, Case{{2}}, Case{{0, 2}}, Case{{1, -1}}, Case{{0, 1, 2}}}) {
      SCOPED_TRACE("kind " + std::to_string(kind) + ", " +
                   std::to_string(c.dims.size()) + " dims, first " +
                   std::to_string(c.dims[0]));
      std::vector<bool> red(3, false);
      for (int64_t d : c.dims)
        red[(d + 3) % 3] = true;
      int64_t outN = 1, count = 1;
      for (int d = 0; d < 3; ++d)
        (red[d] ? count : outN) *= shape[d];
      Reference ref = [&](const Inputs &in) {
        std::vector<double> y(outN, 0.0);
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 4; ++j)
            for (int64_t k = 0; k < 5; ++k) {
              int64_t idx[3] = {i, j, k}, o = 0;
              for (int d = 0; d < 3; ++d)
                if (!red[d])
                  o = o * shape[d] + idx[d];
              y[o] += in[0][(i * 4 + j) * 5 + k] /
                      (kind == FSDPRT_REDUCE_MEAN ? count : 1);
            }
        return y;
      };
      auto dy = randomVector(outN, 152);
      int64_t bx = dev.upload(x), bdy = dev.upload(dy),
              by = dev.alloc(outN * 4), bdx = dev.alloc(n * 4);
      RT_OK(fsdprt_reduce_forward(dev.ctx, dev.stream, FSDPRT_F32, kind, bx, 0,
                                  3, shape.data(), c.dims.size(), c.dims.data(),
                                  by, 0));
      RT_OK(fsdprt_reduce_backward(dev.ctx, dev.stream, FSDPRT_F32, kind, bdy,
                                   0, 3, shape.data(), c.dims.size(),
                                   c.dims.data(), bdx, 0));
      Inputs in{toDouble(x)};
      expectClose(dev.download(by, outN), ref(in), "y");
      expectGradients(ref, in, toDouble(dy), {dev.download(bdx, n)}, {"dx"});
    }
}

// Long reductions (a bias gradient's 8k rows) are summed in chunks: sums
// over the leading, the middle and two dims against float64.
TEST_P(LayoutConformance, ReduceLongDimensionsInChunks) {
  Device dev(GetParam());
  const std::vector<int64_t> shape{700, 3, 50};
  const int64_t n = 700 * 3 * 50;
  auto x = randomVector(n, 161);
  int64_t bx = dev.upload(x), by = dev.alloc(n * 4);
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{0}, std::vector<int64_t>{1},
        std::vector<int64_t>{0, 2}, std::vector<int64_t>{0, 1}}) {
    SCOPED_TRACE("dims " + std::to_string(dims[0]) + " of " +
                 std::to_string(dims.size()));
    std::vector<bool> red(3, false);
    for (int64_t d : dims)
      red[d] = true;
    int64_t outN = 1;
    for (int d = 0; d < 3; ++d)
      outN *= red[d] ? 1 : shape[d];
    std::vector<double> want(outN, 0.0);
    for (int64_t i = 0; i < shape[0]; ++i)
      for (int64_t j = 0; j < shape[1]; ++j)
        for (int64_t k = 0; k < shape[2]; ++k) {
          int64_t idx[3] = {i, j, k}, o = 0;
          for (int d = 0; d < 3; ++d)
            if (!red[d])
              o = o * shape[d] + idx[d];
          want[o] += x[(i * shape[1] + j) * shape[2] + k];
        }
    RT_OK(fsdprt_reduce_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                FSDPRT_REDUCE_SUM, bx, 0, 3, shape.data(),
                                dims.size(), dims.data(), by, 0));
    expectClose(dev.download(by, outN), want, "sum", 1e-6, 1e-7);
  }
}

// A 16-bit reduce (bias gradients: leading dims, read in storage type; other
// dims: staged) is the f32 reduce of the same values rounded once.
TEST_P(LayoutConformance, ReduceBf16IsTheF32ResultRoundedOnce) {
  Device dev(GetParam());
  const std::vector<int64_t> shape{300, 4, 70};
  const int64_t n = 300 * 4 * 70;
  int64_t bx = dev.upload(randomVector(n, 167)), b16 = dev.alloc(n * 2),
          wide = dev.alloc(n * 4), y32 = dev.alloc(n * 4),
          y16 = dev.alloc(n * 2), want16 = dev.alloc(n * 2);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, FSDPRT_BF16, b16,
                    0, n));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_BF16, b16, 0, FSDPRT_F32,
                    wide, 0, n));
  for (int32_t kind : {FSDPRT_REDUCE_SUM, FSDPRT_REDUCE_MEAN})
    for (std::vector<int64_t> dims :
         {std::vector<int64_t>{0, 1}, std::vector<int64_t>{0},
          std::vector<int64_t>{1, 2}}) {
      SCOPED_TRACE("kind " + std::to_string(kind) + ", dims from " +
                   std::to_string(dims[0]) + ", " +
                   std::to_string(dims.size()) + " of them");
      int64_t outN = n;
      for (int64_t d : dims)
        outN /= shape[d];
      RT_OK(fsdprt_reduce_forward(dev.ctx, dev.stream, FSDPRT_F32, kind, wide,
                                  0, 3, shape.data(), dims.size(),
                                  dims.data(), y32, 0));
      RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, y32, 0, FSDPRT_BF16,
                        want16, 0, outN));
      RT_OK(fsdprt_reduce_forward(dev.ctx, dev.stream, FSDPRT_BF16, kind, b16,
                                  0, 3, shape.data(), dims.size(),
                                  dims.data(), y16, 0));
      EXPECT_EQ(dev.download<uint16_t>(y16, outN),
                dev.download<uint16_t>(want16, outN));
    }
}

// The device high-water mark (metrics' device_peak_bytes) counts the arena
// and the per-call scratch, here the f32 staging of a bf16 reduce over
// inner dims, above what is held between calls (the arena, each worker
// stream's GEMM workspace); the CPU backend does not track it (-1).
TEST_P(LayoutConformance, DeviceHighWaterCountsArenaAndScratch) {
  const int64_t arena = int64_t(8) << 20;
  Device dev(GetParam(), 2, arena);
  const std::vector<int64_t> shape{300, 4, 70}, dims{1, 2};
  const int64_t n = 300 * 4 * 70;
  int64_t bx = dev.alloc(n * 2), by = dev.alloc(300 * 2);
  RT_OK(fsdprt_fill(dev.ctx, dev.stream, FSDPRT_BF16, bx, 0, n, 0.5));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, dev.stream));
  RT_OK(fsdprt_arena_reset_high_water(dev.ctx));
  int64_t held = 0, high = 0;
  RT_OK(fsdprt_device_high_water(dev.ctx, &held));
  RT_OK(fsdprt_reduce_forward(dev.ctx, dev.stream, FSDPRT_BF16,
                              FSDPRT_REDUCE_SUM, bx, 0, 3, shape.data(),
                              dims.size(), dims.data(), by, 0));
  RT_OK(fsdprt_stream_synchronize(dev.ctx, dev.stream));
  RT_OK(fsdprt_device_high_water(dev.ctx, &high));
  if (GetParam() == "cpu") {
    EXPECT_EQ(held, -1);
    EXPECT_EQ(high, -1);
    return;
  }
  EXPECT_GE(held, arena) << "the arena is held between calls";
  EXPECT_GE(high, held + n * 4) << "x's f32 staging on top";
  EXPECT_LT(high, held + n * 4 + (int64_t(1) << 20));
}

// A GEMM workspace is held by the streams that run GEMMs only: a stream
// that copies and fills (a collective's) adds nothing to the device's
// high-water mark; the first GEMM of a stream adds its workspace (an f32
// linear needs no scratch of its own), the next GEMMs nothing.
TEST_P(LayoutConformance, OnlyStreamsRunningGemmsHoldAGemmWorkspace) {
  Device dev(GetParam());
  const int64_t m = 4, k = 8, n = 8;
  int64_t other = 0;
  RT_OK(fsdprt_stream_create(dev.ctx, &other));
  int64_t bx = dev.upload(randomVector(m * k, 41)),
          bw = dev.upload(randomVector(n * k, 42)), by = dev.alloc(m * n * 4);
  auto highAfter = [&](int64_t stream, auto call) -> int64_t {
    RT_EXPECT_OK(call(stream));
    RT_EXPECT_OK(fsdprt_stream_synchronize(dev.ctx, stream));
    int64_t high = 0;
    RT_EXPECT_OK(fsdprt_device_high_water(dev.ctx, &high));
    return high;
  };
  auto fill = [&](int64_t s) {
    return fsdprt_fill(dev.ctx, s, FSDPRT_F32, by, 0, m * n, 1.0);
  };
  auto linear = [&](int64_t s) {
    return fsdprt_linear_forward(dev.ctx, s, FSDPRT_F32, bx, 0, bw, 0, 0, 0,
                                 by, 0, m, k, n);
  };
  int64_t filled = highAfter(dev.stream, fill);
  int64_t gemm = highAfter(dev.stream, linear);
  if (GetParam() == "cpu") {
    EXPECT_EQ(gemm, -1);
    return;
  }
  EXPECT_GT(gemm, filled) << "the default stream's first GEMM";
  EXPECT_EQ(highAfter(dev.stream, linear), gemm) << "a second GEMM";
  EXPECT_EQ(highAfter(other, fill), gemm) << "a stream that only fills";
  EXPECT_GT(highAfter(other, linear), gemm) << "its first GEMM";
  RT_OK(fsdprt_stream_destroy(dev.ctx, other));
}

// Per-call scratch is held once per stream (the CUDA backend's reserves):
// each stream's reserve is its largest call's, the device's high-water
// mark holds both beside what was held before, and fsdprt_device_reserve
// sums them, naming the op of the largest; the CPU tracks none (-1).
TEST_P(LayoutConformance, EachStreamHoldsTheScratchOfItsLargestCall) {
  Device dev(GetParam(), 2, int64_t(16) << 20);
  int64_t other = 0;
  RT_OK(fsdprt_stream_create(dev.ctx, &other));
  const int64_t n = 64 * 128 * 64;
  int64_t bx = dev.alloc(n * 2), by = dev.alloc(64 * 2);
  RT_OK(fsdprt_fill(dev.ctx, dev.stream, FSDPRT_BF16, bx, 0, n, 0.25));
  RT_OK(fsdprt_context_synchronize(dev.ctx));
  int64_t held = 0, high = 0, workspace = 0, scratch = 0;
  const char *op = nullptr;
  RT_OK(fsdprt_device_high_water(dev.ctx, &held));
  // A bf16 reduce stages its input in f32: `rows` rows of it, 4 bytes each.
  auto reduce = [&](int64_t stream, int64_t rows) {
    const std::vector<int64_t> shape{rows, 128, 64}, dims{1, 2};
    RT_EXPECT_OK(fsdprt_reduce_forward(dev.ctx, stream, FSDPRT_BF16,
                                       FSDPRT_REDUCE_MEAN, bx, 0, 3,
                                       shape.data(), dims.size(), dims.data(),
                                       by, 0));
    RT_EXPECT_OK(fsdprt_context_synchronize(dev.ctx));
  };
  reduce(dev.stream, 64);
  reduce(dev.stream, 16);
  reduce(other, 32);
  RT_OK(fsdprt_device_high_water(dev.ctx, &high));
  RT_OK(fsdprt_device_reserve(dev.ctx, &workspace, &scratch, &op));
  std::vector<uint16_t> y = dev.download<uint16_t>(by, 32);
  EXPECT_EQ(y[31], 0x3e80) << "mean of 0.25 in bf16";
  if (GetParam() == "cpu") {
    EXPECT_EQ(scratch, -1);
    EXPECT_EQ(workspace, -1);
    return;
  }
  EXPECT_EQ(workspace, 0) << "no GEMM ran";
  const int64_t staging = 128 * 64 * 4;
  EXPECT_GE(scratch, (64 + 32) * staging) << "the two largest calls'";
  EXPECT_LT(scratch, (64 + 32) * staging * 5 / 4) << "(and partial sums)";
  EXPECT_STREQ(op, "reduce_forward");
  EXPECT_GE(high, held + scratch);
  EXPECT_LT(high, held + scratch + (int64_t(1) << 20))
      << "a call beyond its reserve held the old one beside its pieces";
  RT_OK(fsdprt_stream_destroy(dev.ctx, other));
}

TEST_P(LayoutConformance, CastBetweenFloatTypesAndIntegers) {
  Device dev(GetParam());
  // Values exactly representable in bf16 and f16 survive a round trip.
  std::vector<float> x{1.0f, -2.5f, 0.375f, 1024.0f, -0.0078125f};
  int64_t bx = dev.upload(x), b16 = dev.alloc(x.size() * 2),
          back = dev.alloc(x.size() * 4);
  for (int32_t half : {FSDPRT_BF16, FSDPRT_F16}) {
    RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, bx, 0, half, b16, 0,
                      x.size()));
    RT_OK(fsdprt_cast(dev.ctx, dev.stream, half, b16, 0, FSDPRT_F32, back, 0,
                      x.size()));
    EXPECT_EQ(dev.download(back, x.size()), x) << "via dtype " << half;
  }
  std::vector<int64_t> i64{-3, 0, 7, 1 << 20};
  std::vector<int32_t> i32{5, -6, 0, 100};
  int64_t bi64 = dev.upload(i64), bi32 = dev.upload(i32),
          out = dev.alloc(4 * 4);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_I64, bi64, 0, FSDPRT_F32, out,
                    0, 4));
  EXPECT_EQ(dev.download(out, 4), (std::vector<float>{-3, 0, 7, 1 << 20}));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_I32, bi32, 0, FSDPRT_F32, out,
                    0, 4));
  EXPECT_EQ(dev.download(out, 4), (std::vector<float>{5, -6, 0, 100}));
  // Floats to integers truncate toward zero (torch's x.int(), x.long()),
  // from f32 and from bf16; i64 to i32 wraps, i32 to i64 widens.
  std::vector<float> f{2.75f, -2.75f, 0.5f, -0.5f, 1.0f, 1e9f};
  int64_t bf = dev.upload(f), bi = dev.alloc(6 * 8), bh = dev.alloc(6 * 2);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, bf, 0, FSDPRT_I32, bi, 0,
                    6));
  EXPECT_EQ(dev.download<int32_t>(bi, 6),
            (std::vector<int32_t>{2, -2, 0, 0, 1, 1000000000}));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, bf, 0, FSDPRT_BF16, bh, 0,
                    5));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_BF16, bh, 0, FSDPRT_I64, bi, 0,
                    5));
  EXPECT_EQ(dev.download<int64_t>(bi, 5),
            (std::vector<int64_t>{2, -2, 0, 0, 1}));
  std::vector<int64_t> wide{(int64_t(1) << 32) + 5, -1};
  int64_t bw = dev.upload(wide), bn = dev.alloc(2 * 4),
          bback = dev.alloc(2 * 8);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_I64, bw, 0, FSDPRT_I32, bn, 0,
                    2));
  EXPECT_EQ(dev.download<int32_t>(bn, 2), (std::vector<int32_t>{5, -1}));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_I32, bn, 0, FSDPRT_I64, bback,
                    0, 2));
  EXPECT_EQ(dev.download<int64_t>(bback, 2), (std::vector<int64_t>{5, -1}));
  // An unknown dtype code is refused.
  EXPECT_EQ(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, out, 0, 99, bi32, 0,
                        4),
            FSDPRT_ERR_INVALID_ARGUMENT);
}

FSDPRT_INSTANTIATE_CONFORMANCE(LayoutConformance);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
