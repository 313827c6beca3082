//===- CudnnConvTest.cpp - cuDNN convolutions: translation and agreement --===//
//
// Everywhere a build has cuDNN's headers: the translation of the runtime's
// geometry into cuDNN's NCHW dims, strides and paddings (CudnnConvShape.h)
// against values derived by hand, and that CudnnConv says why where it
// cannot run (no usable device or library). On a GPU: cuDNN's forward,
// input gradient and weight gradient against the direct kernels of Conv.cu
// (double sums, the conformance suites' oracle on CUDA) over the
// geometries models use, in f32 and bf16; skipped without a device.
//
//===----------------------------------------------------------------------===//
#include "CudnnConv.h"
#include "CudnnConvShape.h"
#include "Kernels.h"

#include "fsdp/rt/math/Half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {
namespace cuda {
namespace {

using Dims4 = CudnnConvShape::Dims4;
using Dims2 = CudnnConvShape::Dims2;

// n, c, h, w, o, kh, kw, oh, ow, stride, pad (before), dilation, groups.

TEST(CudnnConvShape, Conv1dIsHeightOneWithPaddingAfterToFitTheWindows) {
  // w = 9, kw = 3, stride 2, pad 1, dilation 2: ow = 4 windows span
  // 3 * 2 + 2 * 2 + 1 = 11 columns = 1 before + 9 + 1 after.
  CudnnConvShape s;
  std::string why;
  ASSERT_TRUE(
      cudnnConvShape({2, 3, 1, 9, 4, 1, 3, 1, 4, 1, 2, 0, 1, 1, 2, 1}, s, why))
      << why;
  EXPECT_EQ(s.xDim, (Dims4{2, 3, 1, 9}));
  EXPECT_EQ(s.xStride, (Dims4{27, 9, 9, 1}));
  EXPECT_EQ(s.wDim, (Dims4{4, 3, 1, 3}));
  EXPECT_EQ(s.wStride, (Dims4{9, 3, 3, 1}));
  EXPECT_EQ(s.yDim, (Dims4{2, 4, 1, 4}));
  EXPECT_EQ(s.yStride, (Dims4{16, 4, 4, 1}));
  EXPECT_EQ(s.prePadding, (Dims2{0, 1}));
  EXPECT_EQ(s.postPadding, (Dims2{0, 1}));
  EXPECT_EQ(s.stride, (Dims2{1, 2}));
  EXPECT_EQ(s.dilation, (Dims2{1, 2}));
}

TEST(CudnnConvShape, DepthwiseWeightHasOneChannelPerGroup) {
  // 7x7 depthwise 'same' (ConvNeXt): c = o = groups = 3, pad 3 each side.
  CudnnConvShape s;
  std::string why;
  ASSERT_TRUE(
      cudnnConvShape({2, 3, 6, 5, 3, 7, 7, 6, 5, 1, 1, 3, 3, 1, 1, 3}, s, why))
      << why;
  EXPECT_EQ(s.wDim, (Dims4{3, 1, 7, 7}));
  EXPECT_EQ(s.wStride, (Dims4{49, 49, 7, 1}));
  EXPECT_EQ(s.prePadding, (Dims2{3, 3}));
  EXPECT_EQ(s.postPadding, (Dims2{3, 3}));
}

TEST(CudnnConvShape, DilatedGroupedUnpadded) {
  // c = 4 in 2 groups: w [6, 2, 3, 3]; dilation 2 spans 5 = 7 - 2 rows.
  CudnnConvShape s;
  std::string why;
  ASSERT_TRUE(
      cudnnConvShape({2, 4, 7, 7, 6, 3, 3, 3, 3, 1, 1, 0, 0, 2, 2, 2}, s, why))
      << why;
  EXPECT_EQ(s.wDim, (Dims4{6, 2, 3, 3}));
  EXPECT_EQ(s.wStride, (Dims4{18, 9, 3, 1}));
  EXPECT_EQ(s.prePadding, (Dims2{0, 0}));
  EXPECT_EQ(s.postPadding, (Dims2{0, 0}));
  EXPECT_EQ(s.dilation, (Dims2{2, 2}));
}

TEST(CudnnConvShape, SamePaddingOfAnEvenKernelPadsMoreAfter) {
  // padding='same', kh = 3, kw = 4: rows 1 and 1, columns 1 before, 2 after.
  CudnnConvShape s;
  std::string why;
  ASSERT_TRUE(
      cudnnConvShape({1, 2, 5, 6, 3, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1, 1}, s, why))
      << why;
  EXPECT_EQ(s.prePadding, (Dims2{1, 1}));
  EXPECT_EQ(s.postPadding, (Dims2{1, 2}));
}

TEST(CudnnConvShape, InputLeftOverByTheStrideNeedsNoPaddingAfter) {
  // h = 8, 3x3 stride 2 unpadded: 3 windows span 7 rows, the 8th is what
  // the stride leaves over (PyTorch's floor): padding after 0, not -1.
  CudnnConvShape s;
  std::string why;
  ASSERT_TRUE(
      cudnnConvShape({1, 1, 8, 8, 1, 3, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1}, s, why))
      << why;
  EXPECT_EQ(s.postPadding, (Dims2{0, 0}));
}

TEST(CudnnConvShape, RefusesInputPastTheLastWindowBeyondAStride) {
  // h = 10 but oh = 4 3x3 stride-1 windows read rows 0..5 only: cuDNN
  // would size the output 8.
  CudnnConvShape s;
  std::string why;
  EXPECT_FALSE(cudnnConvShape({1, 1, 10, 6, 1, 3, 3, 4, 4, 1, 1, 0, 0, 1, 1, 1},
                              s, why));
  EXPECT_NE(why.find("past the last window"), std::string::npos) << why;
}

bool haveDevice() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

TEST(CudnnConv, CreateSaysWhyWhereItCannotRun) {
  std::string why;
  std::unique_ptr<CudnnConv> conv = CudnnConv::create(nullptr, false, why);
  RecordProperty("why", why);
  if (haveDevice()) {
    // With a device only a missing library stops it.
    EXPECT_TRUE(conv || why.find("libcudnn.so.9") != std::string::npos) << why;
    return;
  }
  EXPECT_EQ(conv, nullptr);
  EXPECT_FALSE(why.empty()) << "expected the reason cuDNN cannot run";
}

/// Device memory holding a host vector (of float or uint16_t).
template <typename T> struct DeviceVector {
  explicit DeviceVector(const std::vector<T> &host) : n(host.size()) {
    EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess);
    EXPECT_EQ(
        cudaMemcpy(ptr, host.data(), n * sizeof(T), cudaMemcpyHostToDevice),
        cudaSuccess);
  }
  ~DeviceVector() { cudaFree(ptr); }
  std::vector<T> read() const {
    std::vector<T> host(n);
    EXPECT_EQ(
        cudaMemcpy(host.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost),
        cudaSuccess);
    return host;
  }
  void *ptr = nullptr;
  size_t n;
};

std::vector<float> uniform(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = u(gen);
  return v;
}

/// `got` against `want` elementwise within `relative` of each element plus
/// `ofLargest` of the largest |want|.
void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                double relative, double ofLargest, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double largest = 0;
  for (float v : want)
    largest = std::max(largest, double(std::fabs(v)));
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    double tol = relative * std::fabs(want[i]) + ofLargest * largest;
    if (!(std::fabs(double(got[i]) - want[i]) <= tol)) {
      ++bad;
      ADD_FAILURE() << what << "[" << i << "]: cuDNN " << got[i] << ", direct "
                    << want[i] << " (tolerance " << tol << ")";
    }
  }
}

struct Named {
  const char *name;
  ConvGeometry g;
};

const Named kGeometries[] = {
    {"resnet 3x3 stride 1",
     {2, 16, 14, 14, 16, 3, 3, 14, 14, 1, 1, 1, 1, 1, 1, 1}},
    {"resnet 3x3 stride 2",
     {2, 16, 14, 14, 32, 3, 3, 7, 7, 2, 2, 1, 1, 1, 1, 1}},
    {"resnet 1x1", {2, 32, 7, 7, 16, 1, 1, 7, 7, 1, 1, 0, 0, 1, 1, 1}},
    {"resnet stem 7x7 stride 2 pad 3",
     {2, 3, 32, 32, 16, 7, 7, 16, 16, 2, 2, 3, 3, 1, 1, 1}},
    {"depthwise groups = c",
     {2, 16, 12, 12, 16, 3, 3, 12, 12, 1, 1, 1, 1, 1, 1, 16}},
    {"conv1d", {2, 8, 1, 33, 8, 1, 5, 1, 33, 1, 1, 0, 2, 1, 1, 1}},
    {"dilation 2", {2, 8, 12, 12, 8, 3, 3, 12, 12, 1, 1, 2, 2, 2, 2, 1}},
    {"same padding, even kernel",
     {2, 4, 9, 10, 6, 3, 4, 9, 10, 1, 1, 1, 1, 1, 1, 2}},
    // The 8th row and column are left over by the stride: dx's are zero.
    {"stride leaves input over",
     {2, 8, 8, 8, 8, 3, 3, 3, 3, 2, 2, 0, 0, 1, 1, 1}},
};

constexpr uint16_t kBf16NaN = 0x7fc0;

std::vector<uint16_t> toBf16(const std::vector<float> &v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = floatToBf16(v[i]);
  return out;
}
std::vector<float> fromBf16(const std::vector<uint16_t> &v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    out[i] = bf16ToFloat(v[i]);
  return out;
}

/// The three convolutions of `g` on cuDNN in `dt` against the direct f32
/// kernels on the same (for bf16: bf16-rounded) values.
void compareWithDirect(CudnnConv &conv, cudaStream_t s, DType dt,
                       const ConvGeometry &g, double relative,
                       double ofLargest) {
  auto x = uniform(g.inputNumel(), 1), w = uniform(g.weightNumel(), 2),
       dy = uniform(g.outputNumel(), 3);
  if (dt == DType::BF16) // both sides see the same bf16 values
    for (auto *v : {&x, &w, &dy})
      *v = fromBf16(toBf16(*v));
  DeviceVector<float> xOn(x), wOn(w), dyOn(dy),
      yDirect(std::vector<float>(g.outputNumel())),
      dxDirect(std::vector<float>(g.inputNumel())),
      dwDirect(std::vector<float>(g.weightNumel()));
  convForward(s, (float *)xOn.ptr, (float *)wOn.ptr, nullptr,
              (float *)yDirect.ptr, g);
  convBackwardInput(s, (float *)dyOn.ptr, (float *)wOn.ptr,
                    (float *)dxDirect.ptr, g);
  convBackwardWeight(s, (float *)dyOn.ptr, (float *)xOn.ptr,
                     (float *)dwDirect.ptr, g);
  std::string why;
  std::vector<float> y, gx, gw;
  if (dt == DType::F32) {
    // NaN until written: an element cuDNN leaves alone fails.
    DeviceVector<float> y1(std::vector<float>(g.outputNumel(), NAN)),
        gx1(std::vector<float>(g.inputNumel(), NAN)),
        gw1(std::vector<float>(g.weightNumel(), NAN));
    ASSERT_TRUE(conv.forward(dt, xOn.ptr, wOn.ptr, y1.ptr, g, why)) << why;
    ASSERT_TRUE(conv.backwardInput(dt, dyOn.ptr, wOn.ptr, gx1.ptr, g, why))
        << why;
    ASSERT_TRUE(conv.backwardWeight(dt, dyOn.ptr, xOn.ptr, gw1.ptr, g, why))
        << why;
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    y = y1.read(), gx = gx1.read(), gw = gw1.read();
  } else {
    DeviceVector<uint16_t> x16(toBf16(x)), w16(toBf16(w)), dy16(toBf16(dy)),
        y1(std::vector<uint16_t>(g.outputNumel(), kBf16NaN)),
        gx1(std::vector<uint16_t>(g.inputNumel(), kBf16NaN)),
        gw1(std::vector<uint16_t>(g.weightNumel(), kBf16NaN));
    ASSERT_TRUE(conv.forward(dt, x16.ptr, w16.ptr, y1.ptr, g, why)) << why;
    ASSERT_TRUE(conv.backwardInput(dt, dy16.ptr, w16.ptr, gx1.ptr, g, why))
        << why;
    ASSERT_TRUE(conv.backwardWeight(dt, dy16.ptr, x16.ptr, gw1.ptr, g, why))
        << why;
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    y = fromBf16(y1.read()), gx = fromBf16(gx1.read()),
    gw = fromBf16(gw1.read());
  }
  expectNear(y, yDirect.read(), relative, ofLargest, "y");
  expectNear(gx, dxDirect.read(), relative, ofLargest, "dx");
  expectNear(gw, dwDirect.read(), relative, ofLargest, "dw");
}

class CudnnConvOnDevice : public ::testing::Test {
protected:
  void SetUp() override {
    if (!haveDevice())
      GTEST_SKIP() << "no CUDA device";
    ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
    std::string why;
    conv = CudnnConv::create(stream, /*tf32=*/false, why);
    if (!conv)
      GTEST_SKIP() << "cuDNN cannot run here: " << why;
  }
  void TearDown() override {
    conv.reset();
    if (stream)
      cudaStreamDestroy(stream);
  }
  cudaStream_t stream = nullptr;
  std::unique_ptr<CudnnConv> conv;
};

// f32 without TF32 (the backend's default): cuDNN sums in f32 in its own
// order (and may transform, Winograd or FFT, as PyTorch allows) where the
// direct kernels sum in double; with at most 576 products of values in
// [-1, 1] per element that differs by a few 1e-6 of the largest result.
// 1e-4 of it leaves room and still catches a wrong tap or channel (errors
// of the order of the result itself).
TEST_F(CudnnConvOnDevice, F32AgreesWithTheDirectKernels) {
  for (const Named &c : kGeometries) {
    SCOPED_TRACE(c.name);
    compareWithDirect(*conv, stream, DType::F32, c.g, 0, 1e-4);
  }
}

// bf16 operands, f32 accumulation, results rounded once to bf16: half a
// bf16 ulp (2^-9) of the f32 result; 2^-8 leaves room for a sum in another
// order rounding the other way, plus the f32 summation-order term above.
TEST_F(CudnnConvOnDevice, Bf16AgreesWithTheDirectKernels) {
  for (const Named &c : kGeometries) {
    SCOPED_TRACE(c.name);
    compareWithDirect(*conv, stream, DType::BF16, c.g, std::ldexp(1.0, -8),
                      1e-4);
  }
}

} // namespace
} // namespace cuda
} // namespace rt
} // namespace fsdp
