//===- LeanCrossEntropyTest.cpp - FSDPRT_XENT_KERNELS=lean against default ===//
//
// Two contexts of the CUDA backend (the emulation here, a GPU when lent),
// one with the lean cross-entropy kernels (CrossEntropyLean.cu) and one with
// RowKernels.cu's: the loss, the backward and the fused in-place call on
// the same logits agree within the bound CrossEntropyLean.cu documents:
// whole packs (widths a multiple of 8) and element by element (odd
// widths, misaligned logits), rows held and streamed; bf16, f16 and f32;
// mean and sum; GPT-2's padded rows; ignored rows; NaN, +inf and -inf.
// The float64 conformance of the lean kernels is LossConformance run with
// FSDPRT_XENT_KERNELS=lean (a CTest variant, unittests/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//
#include "../TestUtil.h"

#include "fsdp/rt/math/Half.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fsdp {
namespace rt {
namespace test {
namespace {

const char *kVar = "FSDPRT_XENT_KERNELS";

/// A context made with FSDPRT_XENT_KERNELS=`kind` (the variable restored).
struct KernelsDevice {
  static std::string withKind(const char *kind) {
    const char *old = std::getenv(kVar);
    std::string saved = old ? old : "";
    setenv(kVar, kind, 1);
    return saved;
  }
  explicit KernelsDevice(const char *kind)
      : saved(withKind(kind)), dev(FSDPRT_CONFORMANCE_BACKEND) {
    if (saved.empty())
      unsetenv(kVar);
    else
      setenv(kVar, saved.c_str(), 1);
  }
  std::string saved;
  Device dev;
};

/// What one setting computes: the forward's loss, the backward's dlogits,
/// the fused call's loss and in-place dlogits, as raw bytes.
struct Results {
  std::vector<uint8_t> loss, grad, fusedLoss, fusedGrad;
};

struct Case {
  int32_t dtype;
  int64_t c, width, offset; // offset: elements the rows start after
  int32_t reduction;
  bool special; // a NaN, a +inf and masked (-inf) logits
};

int64_t sizeOf(int32_t dtype) { return dtype == FSDPRT_F32 ? 4 : 2; }

void run(Device &dev, const Case &k, const std::vector<float> &logits,
         const std::vector<int64_t> &targets, Results &r) {
  const int64_t n = targets.size(), es = sizeOf(k.dtype),
                elems = n * k.width, off = k.offset * es;
  int64_t f32 = dev.upload(logits), x = dev.alloc((elems + 8) * es),
          grad = dev.alloc((elems + 8) * es), bt = dev.upload(targets),
          dl32 = dev.upload(std::vector<float>{0.75f}), dl = dev.alloc(4),
          loss = dev.alloc(4), fusedLoss = dev.alloc(4);
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, f32, 0, k.dtype, x, off,
                    elems));
  RT_OK(fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, dl32, 0, k.dtype, dl, 0,
                    1));
  RT_OK(fsdprt_fill(dev.ctx, dev.stream, k.dtype, grad, 0, elems + 8, 7.0));
  RT_OK(fsdprt_cross_entropy_forward(dev.ctx, dev.stream, k.dtype, FSDPRT_I64,
                                     x, off, bt, 0, loss, 0, n, k.c, k.width,
                                     k.reduction, -100));
  RT_OK(fsdprt_cross_entropy_backward(dev.ctx, dev.stream, k.dtype,
                                      FSDPRT_I64, x, off, bt, 0, dl, 0, grad,
                                      off, n, k.c, k.width, k.reduction,
                                      -100));
  RT_OK(fsdprt_cross_entropy_forward_backward(
      dev.ctx, dev.stream, k.dtype, FSDPRT_I64, x, off, bt, 0, dl, 0,
      fusedLoss, 0, x, off, n, k.c, k.width, k.reduction, -100));
  r.loss = dev.download<uint8_t>(loss, es);
  r.fusedLoss = dev.download<uint8_t>(fusedLoss, es);
  r.grad = dev.download<uint8_t>(grad, (elems + 8) * es);
  r.fusedGrad = dev.download<uint8_t>(x, (elems + 8) * es);
}

/// Element i of raw bytes as a float (16-bit types widened exactly).
float valueAt(const std::vector<uint8_t> &raw, int32_t dtype, int64_t i) {
  if (dtype == FSDPRT_F32) {
    float f;
    std::memcpy(&f, raw.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, raw.data() + 2 * i, 2);
  return dtype == FSDPRT_BF16 ? bf16ToFloat(h) : f16ToFloat(h);
}

/// The distance in units in the last place of two 16-bit values (their
/// sign-magnitude bits as ordered integers).
int64_t ulps16(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b,
               int64_t i) {
  auto ordered = [&](const std::vector<uint8_t> &raw) {
    uint16_t h;
    std::memcpy(&h, raw.data() + 2 * i, 2);
    return h & 0x8000 ? -int64_t(h & 0x7fff) : int64_t(h);
  };
  return std::llabs(ordered(a) - ordered(b));
}

/// lean against default within CrossEntropyLean.cu's bound: f32 within
/// 2e-5 relative (the exps' arguments round differently: a few 1e-6 at
/// logits of 8, the SFU's exp2 ~2 ulp more on a GPU), so a 16-bit result
/// within one unit in the last place (the f32 values may straddle a
/// rounding boundary); NaN exactly where default has NaN. A wrong max,
/// sum, scale or target moves values by 1e-3 relative or more.
void expectWithinBound(const Results &lean, const Results &def, int32_t dtype,
                       int64_t n) {
  auto check = [&](const std::vector<uint8_t> &a,
                   const std::vector<uint8_t> &b, int64_t count,
                   const char *what) {
    int64_t bad = 0;
    for (int64_t i = 0; i < count; ++i) {
      float x = valueAt(a, dtype, i), y = valueAt(b, dtype, i);
      bool ok = std::isnan(x) || std::isnan(y)
                    ? std::isnan(x) && std::isnan(y)
                : dtype == FSDPRT_F32
                    ? std::fabs(x - y) <= 2e-5f * std::fabs(y)
                    : ulps16(a, b, i) <= 1;
      if (!ok && bad++ < 5)
        ADD_FAILURE() << what << "[" << i << "]: lean " << x << ", default "
                      << y;
    }
    EXPECT_EQ(bad, 0) << what;
  };
  check(lean.loss, def.loss, 1, "loss");
  check(lean.fusedLoss, def.fusedLoss, 1, "fused loss");
  check(lean.grad, def.grad, n, "dlogits");
  check(lean.fusedGrad, def.fusedGrad, n, "fused dlogits");
}

void checkCase(const Case &k) {
  SCOPED_TRACE(::testing::Message()
               << "dtype " << k.dtype << " c " << k.c << " width " << k.width
               << " offset " << k.offset << " reduction " << k.reduction
               << (k.special ? " NaN/inf" : ""));
  // Row 2 is ignored; targets at both ends (the last in a partial group
  // when c is not a multiple of 8); the padding holds 1e30.
  std::vector<int64_t> targets{0, k.c - 1, -100, k.c / 2, 3, 7 % k.c};
  const int64_t n = targets.size();
  auto classes = randomVector(n * k.c, 4101 + k.c, 0.0f, 8.0f);
  std::vector<float> logits(n * k.width, 1e30f);
  for (int64_t r = 0; r < n; ++r)
    std::copy(classes.begin() + r * k.c, classes.begin() + (r + 1) * k.c,
              logits.begin() + r * k.width);
  // Row 3: masked groups at the start and scattered (-inf weighs nothing).
  for (int64_t j = 0; j < std::min<int64_t>(17, k.c / 2); ++j)
    logits[3 * k.width + j] = -INFINITY;
  for (int64_t j = k.c / 2 + 1; j < k.c; j += 5)
    logits[3 * k.width + j] = -INFINITY;
  if (k.special) {
    logits[4 * k.width + k.c / 3] = NAN;      // the row's loss, gradient NaN
    logits[5 * k.width + k.c - 1] = INFINITY; // so are this row's
  }
  KernelsDevice lean("lean"), def("default");
  Results a, b;
  ASSERT_NO_FATAL_FAILURE(run(lean.dev, k, logits, targets, a));
  ASSERT_NO_FATAL_FAILURE(run(def.dev, k, logits, targets, b));
  expectWithinBound(a, b, k.dtype, n * k.width + 8);
  // The lean kernels did run: f32 gradients of other arithmetic differ
  // somewhere in their last bits.
  if (k.dtype == FSDPRT_F32)
    EXPECT_NE(a.grad, b.grad) << "the lean kernels did not run";
}

// GPT-2's padded rows (50257 classes of 50304: a partial last group and
// padding), full rows, rows held (bf16 up to 56 elements on the emulation,
// 57344 on a GPU) and streamed.
TEST(LeanCrossEntropy, AlignedRowsWithinTheBound) {
  for (int32_t dt : {FSDPRT_BF16, FSDPRT_F16, FSDPRT_F32})
    for (auto [c, width] : std::vector<std::pair<int64_t, int64_t>>{
             {45, 48}, {200, 208}, {50257, 50304}, {50304, 50304}})
      for (int32_t red : {FSDPRT_LOSS_MEAN, FSDPRT_LOSS_SUM})
        checkCase({dt, c, width, 0, red, false});
}

TEST(LeanCrossEntropy, NanAndInfinityWhereDefaultHasThem) {
  for (int32_t dt : {FSDPRT_BF16, FSDPRT_F16, FSDPRT_F32})
    for (auto [c, width] : std::vector<std::pair<int64_t, int64_t>>{
             {21, 24}, {50257, 50304}})
      checkCase({dt, c, width, 0, FSDPRT_LOSS_MEAN, true});
}

// Rows the lean kernels move element by element.
TEST(LeanCrossEntropy, OddWidthsAndMisalignedRowsWithinTheBound) {
  for (int32_t dt : {FSDPRT_BF16, FSDPRT_F16, FSDPRT_F32}) {
    checkCase({dt, 1001, 1001, 0, FSDPRT_LOSS_MEAN, false});
    checkCase({dt, 45, 50, 0, FSDPRT_LOSS_SUM, true});
    checkCase({dt, 200, 208, 1, FSDPRT_LOSS_MEAN, false});
  }
}

TEST(LeanKernelSwitches, UnknownSettingFailsAtContextCreation) {
  // Both opt-in switches are read when a context is made; a misspelt value
  // is an error there, not a silent fall back to the default kernels.
  for (const char *name : {"FSDPRT_XENT_KERNELS", "FSDPRT_NORM_KERNELS"}) {
    const char *old = std::getenv(name);
    std::string saved = old ? old : "";
    setenv(name, "fast", 1);
    int64_t ctx = 0;
    int32_t status = fsdprt_context_create(FSDPRT_CONFORMANCE_BACKEND, 0, 1,
                                           int64_t(1) << 20, 1, &ctx);
    if (saved.empty())
      unsetenv(name);
    else
      setenv(name, saved.c_str(), 1);
    EXPECT_NE(status, FSDPRT_OK) << name;
    EXPECT_NE(std::string(fsdprt_last_error()).find(std::string(name) + "=fast"),
              std::string::npos)
        << fsdprt_last_error();
    if (status == FSDPRT_OK)
      fsdprt_context_destroy(ctx);
  }
}

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
