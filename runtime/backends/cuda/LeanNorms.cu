//===- LeanNorms.cu - Norm rows in fewer instructions ---------------------===//
//
// The lean layer_norm and rms_norm row kernels (FSDPRT_NORM_KERNELS=lean,
// docs/CUDA.md). An H200 profile found the streaming kernels
// (RowKernels.cu) issue-bound, not memory-bound: ~1650 warp instructions
// for a 768-wide row, most of them integer and predicate work (per-element
// bounds, 64-bit indices, a per-group alignment test) and software
// bf16 / f16 rounding. These kernels take only the common case: a row
// width W of the list below (whole 16-byte packs, W / (32 x 8) groups a
// lane, a compile-time count) and every pointer 16-byte aligned; the
// launchers return false for any other shape and the streaming kernels run.
//
// Their arithmetic is the streaming kernels', expression for expression,
// in the same order (lane l sums groups l, l + 32, ... in double, element
// by element, through the same warpSum tree): the same bits, which a test
// asserts on the emulation and on a GPU (LeanNormsTest.cpp). What differs:
// * a lane's groups of the row are loaded once, all at once, into
//   registers (as stored) and every pass reads them there;
// * the weight and bias are loaded once per warp, before its rows, and the
//   grid holds only as many warps as are resident, so that each strides
//   over several rows;
// * 16-bit values are widened and rounded by the hardware, two at a time
//   (HalfPairs.cuh): the same bits as Half.h's software rounding for every
//   value but NaN, which becomes the canonical NaN 0x7fff where Half.h
//   keeps its sign and payload.
//
//===----------------------------------------------------------------------===//
#include "HalfPairs.cuh"
#include "KernelSupport.cuh"
#include "Kernels.h"
#include "RowGroups.cuh"

#include "fsdp/rt/math/Pointwise.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <utility>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// Row widths the lean kernels take (GPT-2 small 768, medium 1024 and the
/// widths below): W / 256 groups a lane on a GPU, the lane's share of x
/// (and dy) and of the weights held in registers; wider rows would spill.
/// Under the emulation (one lane) the same widths.
constexpr int kLeanWidths[] = {256, 512, 768, 1024};

/// f(std::integral_constant<int, W>) for d = W of kLeanWidths; false if d
/// is none of them.
template <typename F> bool withLeanWidth(int64_t d, F f) {
  bool found = false;
  auto tryWidth = [&](auto width) {
    if (!found && d == decltype(width)::value) {
      found = true;
      f(width);
    }
  };
  tryWidth(std::integral_constant<int, kLeanWidths[0]>{});
  tryWidth(std::integral_constant<int, kLeanWidths[1]>{});
  tryWidth(std::integral_constant<int, kLeanWidths[2]>{});
  tryWidth(std::integral_constant<int, kLeanWidths[3]>{});
  return found;
}

/// Unrolls a loop over a lane's groups on the device; under the emulation
/// (one lane: up to 128 groups) it stays a loop.
#ifdef FSDPRT_CUDA_EMULATION
#define FSDPRT_LEAN_UNROLL
#else
#define FSDPRT_LEAN_UNROLL _Pragma("unroll")
#endif

using Group = float[kRowGroup];

/// A group in its storage type, as loaded (16 bytes of bf16 / f16, 32 of
/// f32), in 32-bit words, widened where it is used: a held row and the
/// weights cost registers at their storage width (held as floats, a
/// 768-wide forward took 151 registers, one block an SM), and widening
/// bf16 is one instruction an element.
template <typename S> struct Raw {
  using T = typename S::T;
  static constexpr int kWords = kRowGroup * sizeof(T) / 4;
  uint32_t w[kWords];

  /// The group at p (16-byte aligned).
  __device__ void load(const T *p) {
#pragma unroll
    for (int k = 0; k < kWords / 4; ++k) {
      Pack<T> pack = loadPack(p, k);
      std::memcpy(&w[4 * k], &pack, sizeof pack);
    }
  }
  /// Every element `value` (exact in the storage type: 0 or 1).
  __device__ void fill(float value) {
    Group v;
#pragma unroll
    for (int i = 0; i < kRowGroup; ++i)
      v[i] = value;
    narrow(v);
  }
  __device__ void widen(Group &v) const {
    if constexpr (sizeof(T) == 4) {
      std::memcpy(v, w, sizeof w);
    } else {
#pragma unroll
      for (int k = 0; k < kWords; ++k)
        Hw<S>::widen(w[k], v[2 * k], v[2 * k + 1]);
    }
  }
  /// v rounded to the storage type.
  __device__ void narrow(const Group &v) {
    if constexpr (sizeof(T) == 4) {
      std::memcpy(w, v, sizeof w);
    } else {
#pragma unroll
      for (int k = 0; k < kWords; ++k)
        w[k] = Hw<S>::narrow(v[2 * k], v[2 * k + 1]);
    }
  }
  /// Stores the group at p (16-byte aligned).
  __device__ void store(T *p) const {
#pragma unroll
    for (int k = 0; k < kWords / 4; ++k) {
      Pack<T> pack;
      std::memcpy(&pack, &w[4 * k], sizeof pack);
      storePack(p, k, pack);
    }
  }
};

/// A lane's share of a W-wide row: groups lane, lane + kWarp, ... (the
/// streaming kernels' forWarpGroups), kGroups of them, held as loaded.
template <typename S, int W> struct LeanRow {
  using T = typename S::T;
  static_assert(W % (kWarp * kRowGroup) == 0, "whole groups in every lane");
  static constexpr int kGroups = W / (kWarp * kRowGroup);
  using Held = Raw<S>[kGroups];

  /// Element offset of group k of the calling lane.
  static __device__ int at(int k) {
    return (static_cast<int>(threadIdx.x % kWarp) + k * kWarp) * kRowGroup;
  }
  /// The lane's groups of row p.
  static __device__ void load(const T *p, Held &h) {
    FSDPRT_LEAN_UNROLL for (int k = 0; k < kGroups; ++k)
      h[k].load(p + at(k));
  }
  /// A weight's groups, `none` everywhere where it is null.
  static __device__ void loadOr(const T *p, Held &h, float none) {
    if (p) {
      load(p, h);
      return;
    }
    FSDPRT_LEAN_UNROLL for (int k = 0; k < kGroups; ++k)
      h[k].fill(none);
  }

  /// blockMeanRstd's mean and 1/sqrt(biased variance + eps), its sums.
  static __device__ void meanRstd(const Held &x, float eps, float &mean,
                                  float &rstd) {
    double sum = 0.0;
    FSDPRT_LEAN_UNROLL for (int k = 0; k < kGroups; ++k) {
      Group v;
      x[k].widen(v);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        sum += v[i];
    }
    double mu = warpSum(sum) / static_cast<double>(W);
    double sq = 0.0;
    FSDPRT_LEAN_UNROLL for (int k = 0; k < kGroups; ++k) {
      Group v;
      x[k].widen(v);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i) {
        double c = v[i] - mu;
        sq += c * c;
      }
    }
    mean = static_cast<float>(mu);
    rstd = static_cast<float>(
        1.0 / sqrt(warpSum(sq) / static_cast<double>(W) + eps));
  }

  /// blockRmsRstd's 1/sqrt(mean(x^2) + eps).
  static __device__ float rmsRstd(const Held &x, float eps) {
    double sq = 0.0;
    FSDPRT_LEAN_UNROLL for (int k = 0; k < kGroups; ++k) {
      Group v;
      x[k].widen(v);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        sq += static_cast<double>(v[i]) * v[i];
    }
    return static_cast<float>(
        1.0 / sqrt(warpSum(sq) / static_cast<double>(W) + eps));
  }

  /// layerNormRow on a held row: y = (x - mean) * rstd * w + b.
  static __device__ void layerNorm(const Held &x, const Held &w,
                                   const Held &b, T *yr, float eps) {
    float mean, rstd;
    meanRstd(x, eps, mean, rstd);
    FSDPRT_LEAN_UNROLL for (int k = 0; k < kGroups; ++k) {
      Group v, wv, bv;
      x[k].widen(v);
      w[k].widen(wv);
      b[k].widen(bv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        v[i] = (v[i] - mean) * rstd * wv[i] + bv[i];
      Raw<S> y;
      y.narrow(v);
      y.store(yr + at(k));
    }
  }
};

/// Blocks an SM the kernels' registers must allow: two (128 registers)
/// for 16-bit rows up to 768 wide, where the lane's held groups fit
/// without spills; one for wider or f32 rows (up to 214 registers), which
/// would spill at 128.
template <typename S, int W> constexpr int leanMinBlocks() {
  return sizeof(typename S::T) == 2 && W <= 768 ? 2 : 1;
}
/// The lean kernels' launch bounds (in a kernel templated on S and W).
#define FSDPRT_LEAN_BOUNDS __launch_bounds__(kThreads, leanMinBlocks<S, W>())

/// This warp's first row and the stride between its rows, in int: the
/// launcher checked that rows fit.
__device__ inline int firstWarpRow() {
  return static_cast<int>(blockIdx.x * (blockDim.x / kWarp) +
                          threadIdx.x / kWarp);
}
__device__ inline int warpRowStep() {
  return static_cast<int>(gridDim.x * (blockDim.x / kWarp));
}

template <typename S, int W>
__global__ void FSDPRT_LEAN_BOUNDS
    leanLayerNormKernel(const typename S::T *x, const typename S::T *w,
                        const typename S::T *b, typename S::T *y, int rows,
                        float eps) {
  using Row = LeanRow<S, W>;
  typename Row::Held wh, bh, xh;
  Row::loadOr(w, wh, 1.0f);
  Row::loadOr(b, bh, 0.0f);
  for (int r = firstWarpRow(); r < rows; r += warpRowStep()) {
    size_t base = static_cast<size_t>(r) * W;
    Row::load(x + base, xh);
    Row::layerNorm(xh, wh, bh, y + base, eps);
  }
}

/// addLayerNormRowsKernel: sum = a + b rounded and stored, then the
/// layer_norm of the stored sum, held as stored.
template <typename S, int W>
__global__ void FSDPRT_LEAN_BOUNDS leanAddLayerNormKernel(
    const typename S::T *a, const typename S::T *b, const typename S::T *w,
    const typename S::T *bias, typename S::T *sum, typename S::T *y, int rows,
    float eps) {
  using Row = LeanRow<S, W>;
  typename Row::Held wh, bh, ah, ch;
  Row::loadOr(w, wh, 1.0f);
  Row::loadOr(bias, bh, 0.0f);
  for (int r = firstWarpRow(); r < rows; r += warpRowStep()) {
    size_t base = static_cast<size_t>(r) * W;
    Row::load(a + base, ah);
    Row::load(b + base, ch);
    FSDPRT_LEAN_UNROLL for (int k = 0; k < Row::kGroups; ++k) {
      Group av, bv;
      ah[k].widen(av);
      ch[k].widen(bv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        av[i] = binaryApply(FSDPRT_ADD, av[i], bv[i]);
      ah[k].narrow(av);
      ah[k].store(sum + base + Row::at(k));
    }
    Row::layerNorm(ah, wh, bh, y + base, eps);
  }
}

/// layerNormRowsBackwardKernel on held x and dy: the same g = dy * w and
/// xhat computed in each of the two passes, the same sums.
template <typename S, int W>
__global__ void FSDPRT_LEAN_BOUNDS leanLayerNormBackwardKernel(
    const typename S::T *x, const typename S::T *w, const typename S::T *dy,
    const typename S::T *addend, typename S::T *dx, float *mean, float *rstd,
    int rows, float eps) {
  using Row = LeanRow<S, W>;
  typename Row::Held wh, xh, dh;
  Row::loadOr(w, wh, 1.0f);
  for (int r = firstWarpRow(); r < rows; r += warpRowStep()) {
    size_t base = static_cast<size_t>(r) * W;
    Row::load(x + base, xh);
    if (dx)
      Row::load(dy + base, dh);
    float mu, rs;
    Row::meanRstd(xh, eps, mu, rs);
    if (threadIdx.x % kWarp == 0) {
      mean[r] = mu;
      rstd[r] = rs;
    }
    if (!dx)
      continue;
    // g and xhat of group k (gv becomes g, xv xhat); g rounded on its own,
    // as the streaming kernel's (nvcc fused the held g's product into
    // g - mg here, not there).
    auto group = [&](int k, Group &gv, Group &xv) {
      Group wv;
      xh[k].widen(xv);
      dh[k].widen(gv);
      wh[k].widen(wv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i) {
        gv[i] = __fmul_rn(gv[i], wv[i]);
        xv[i] = (xv[i] - mu) * rs;
      }
    };
    double sg = 0.0, sgx = 0.0;
    FSDPRT_LEAN_UNROLL for (int k = 0; k < Row::kGroups; ++k) {
      Group gv, xv;
      group(k, gv, xv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i) {
        sg += gv[i];
        sgx += static_cast<double>(gv[i]) * xv[i];
      }
    }
    float mg = static_cast<float>(warpSum(sg) / W);
    float mgx = static_cast<float>(warpSum(sgx) / W);
    FSDPRT_LEAN_UNROLL for (int k = 0; k < Row::kGroups; ++k) {
      Group gv, xv;
      group(k, gv, xv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        gv[i] = rs * (gv[i] - mg - xv[i] * mgx);
      Raw<S> out;
      out.narrow(gv);
      if (addend) {
        // The unfused kernel's rounding, then the add kernel's add.
        Raw<S> ah;
        Group av;
        ah.load(addend + base + Row::at(k));
        ah.widen(av);
        out.widen(gv);
#pragma unroll
        for (int i = 0; i < kRowGroup; ++i)
          gv[i] = __fadd_rn(av[i], gv[i]);
        out.narrow(gv);
      }
      out.store(dx + base + Row::at(k));
    }
  }
}

template <typename S, int W>
__global__ void FSDPRT_LEAN_BOUNDS
    leanRmsNormKernel(const typename S::T *x, const typename S::T *w,
                      typename S::T *y, int rows, float eps) {
  using Row = LeanRow<S, W>;
  typename Row::Held wh, xh;
  Row::loadOr(w, wh, 1.0f);
  for (int r = firstWarpRow(); r < rows; r += warpRowStep()) {
    size_t base = static_cast<size_t>(r) * W;
    Row::load(x + base, xh);
    float rstd = Row::rmsRstd(xh, eps);
    FSDPRT_LEAN_UNROLL for (int k = 0; k < Row::kGroups; ++k) {
      Group v, wv;
      xh[k].widen(v);
      wh[k].widen(wv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        v[i] = v[i] * rstd * wv[i];
      Raw<S> out;
      out.narrow(v);
      out.store(y + base + Row::at(k));
    }
  }
}

/// rmsNormRowsBackwardKernel on held x and dy.
template <typename S, int W>
__global__ void FSDPRT_LEAN_BOUNDS leanRmsNormBackwardKernel(
    const typename S::T *x, const typename S::T *w, const typename S::T *dy,
    typename S::T *dx, float *rstd, int rows, float eps) {
  using Row = LeanRow<S, W>;
  typename Row::Held wh, xh, dh;
  Row::loadOr(w, wh, 1.0f);
  for (int r = firstWarpRow(); r < rows; r += warpRowStep()) {
    size_t base = static_cast<size_t>(r) * W;
    Row::load(x + base, xh);
    if (dx)
      Row::load(dy + base, dh);
    float rs = Row::rmsRstd(xh, eps);
    if (threadIdx.x % kWarp == 0)
      rstd[r] = rs;
    if (!dx)
      continue;
    // g rounded on its own, as in leanLayerNormBackwardKernel.
    auto group = [&](int k, Group &gv, Group &xv) {
      Group wv;
      xh[k].widen(xv);
      dh[k].widen(gv);
      wh[k].widen(wv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        gv[i] = __fmul_rn(gv[i], wv[i]);
    };
    double sgx = 0.0;
    FSDPRT_LEAN_UNROLL for (int k = 0; k < Row::kGroups; ++k) {
      Group gv, xv;
      group(k, gv, xv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        sgx += static_cast<double>(gv[i]) * xv[i];
    }
    float c = static_cast<float>(warpSum(sgx) / W) * rs * rs * rs;
    FSDPRT_LEAN_UNROLL for (int k = 0; k < Row::kGroups; ++k) {
      Group gv, xv;
      group(k, gv, xv);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        gv[i] = rs * gv[i] - xv[i] * c;
      Raw<S> out;
      out.narrow(gv);
      out.store(dx + base + Row::at(k));
    }
  }
}

/// The blocks of `Kernel` resident on the whole GPU at once (asked once per
/// kernel; every device of a process is taken to be alike).
template <auto Kernel> int64_t residentBlocks() {
  static const int64_t blocks = [] {
    int perSm = 0, device = 0, sms = 0;
    checkCuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, Kernel,
                                                            kThreads, 0),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    checkCuda(cudaGetDevice(&device), "cudaGetDevice");
    checkCuda(
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
        "cudaDeviceGetAttribute");
    return std::max<int64_t>(1, int64_t(perSm) * sms);
  }();
  return blocks;
}

/// Launches Kernel over `rows` rows, a warp a row but no more blocks than
/// are resident: each warp strides over several rows and loads the weights
/// once for all of them.
template <auto Kernel, typename... Args>
void launchLean(Stream s, int64_t rows, Args... args) {
  int64_t blocks = std::min((rows + kWarpsPerBlock - 1) / kWarpsPerBlock,
                            residentBlocks<Kernel>());
  auto *kernel = Kernel;
  FSDPRT_LAUNCH_BLOCKS(kernel, blocks, s, args...);
}

/// Whether the lean kernels take rows of d elements at these pointers.
bool leanFits(int64_t rows, int64_t d, std::initializer_list<const void *> ps) {
  if (rows <= 0 || rows > INT_MAX)
    return false;
  for (const void *p : ps)
    if (!packAligned(p))
      return false;
  return withLeanWidth(d, [](auto) {});
}

} // namespace

bool leanLayerNormForward(Stream s, DType dt, const void *x, const void *w,
                          const void *b, void *y, int64_t rows, int64_t d,
                          float eps) {
  if (!leanFits(rows, d, {x, w, b, y}))
    return false;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    withLeanWidth(d, [&](auto width) {
      launchLean<leanLayerNormKernel<S, decltype(width)::value>>(
          s, rows, static_cast<const T *>(x), static_cast<const T *>(w),
          static_cast<const T *>(b), static_cast<T *>(y),
          static_cast<int>(rows), eps);
    });
  });
  return true;
}

bool leanAddLayerNormForward(Stream s, DType dt, const void *a, const void *b,
                             const void *w, const void *bias, void *sum,
                             void *y, int64_t rows, int64_t d, float eps) {
  if (!leanFits(rows, d, {a, b, w, bias, sum, y}))
    return false;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    withLeanWidth(d, [&](auto width) {
      launchLean<leanAddLayerNormKernel<S, decltype(width)::value>>(
          s, rows, static_cast<const T *>(a), static_cast<const T *>(b),
          static_cast<const T *>(w), static_cast<const T *>(bias),
          static_cast<T *>(sum), static_cast<T *>(y), static_cast<int>(rows),
          eps);
    });
  });
  return true;
}

bool leanLayerNormRowsBackward(Stream s, DType dt, const void *x,
                               const void *w, const void *dy,
                               const void *addend, void *dx, float *mean,
                               float *rstd, int64_t rows, int64_t d,
                               float eps) {
  if (!leanFits(rows, d, {x, w, dy, addend, dx}))
    return false;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    withLeanWidth(d, [&](auto width) {
      launchLean<leanLayerNormBackwardKernel<S, decltype(width)::value>>(
          s, rows, static_cast<const T *>(x), static_cast<const T *>(w),
          static_cast<const T *>(dy), static_cast<const T *>(addend),
          static_cast<T *>(dx), mean, rstd, static_cast<int>(rows), eps);
    });
  });
  return true;
}

bool leanRmsNormForward(Stream s, DType dt, const void *x, const void *w,
                        void *y, int64_t rows, int64_t d, float eps) {
  if (!leanFits(rows, d, {x, w, y}))
    return false;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    withLeanWidth(d, [&](auto width) {
      launchLean<leanRmsNormKernel<S, decltype(width)::value>>(
          s, rows, static_cast<const T *>(x), static_cast<const T *>(w),
          static_cast<T *>(y), static_cast<int>(rows), eps);
    });
  });
  return true;
}

bool leanRmsNormRowsBackward(Stream s, DType dt, const void *x, const void *w,
                             const void *dy, void *dx, float *rstd,
                             int64_t rows, int64_t d, float eps) {
  if (!leanFits(rows, d, {x, w, dy, dx}))
    return false;
  withStorage(dt, [&](auto st) {
    using S = decltype(st);
    using T = typename S::T;
    withLeanWidth(d, [&](auto width) {
      launchLean<leanRmsNormBackwardKernel<S, decltype(width)::value>>(
          s, rows, static_cast<const T *>(x), static_cast<const T *>(w),
          static_cast<const T *>(dy), static_cast<T *>(dx), rstd,
          static_cast<int>(rows), eps);
    });
  });
  return true;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
