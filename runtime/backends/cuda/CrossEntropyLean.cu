//===- CrossEntropyLean.cu - Cross-entropy rows on fewer instructions -----===//
//
// The cross-entropy rows of RowKernels.cu (one 1024-thread block a row,
// groups of 8 elements, the row held in registers where it fits) rewritten
// for the instruction count: an H200 profile found the norms' row kernels
// issue-bound (integer and predicate work, software conversions, FP64), and
// at GPT-2's 50304-wide bf16 rows the current kernels ran 1.7-2.2x their
// bandwidth ceiling. Here:
//  - conversions by the hardware (a bf16 / f16 pair in one instruction):
//    the same bits as Half.h's software rounding for every non-NaN value;
//    a NaN stored becomes the canonical NaN 0x7fff (PTX's cvt into
//    .bf16x2 / .f16x2), which the host emulation reproduces;
//  - whole 16-byte packs, no per-element bound, where the row width is a
//    multiple of 8 and the rows 16-byte aligned (else the same groups
//    element by element: the same bits); 32-bit indices; a partial last
//    group of the classes is handled once, by its thread, apart from the
//    loop;
//  - each thread's max first (on 16-bit pairs), then exps relative to it:
//    no per-group rescaling, one rescale a thread when the block combines;
//  - the exp of a logit is exp2(x * log2(e) - K) with K = the thread's
//    max * log2(e): one FFMA and one MUFU.EX2, computed once where the row
//    is held: the gradient reads it back from shared memory (HeldExps; 56
//    f32 a thread do not fit the 64 registers a 1024-thread block allows),
//    streamed rows recompute it;
//  - the target's -1 is applied once, by its owner, after its group is
//    stored, not by a compare per element.
// Numbers: each group's 8 exps summed in f32, the groups' sums in double
// (one conversion and one DADD per 8 elements), so a row's sum is within a
// few 1e-7 relative of its exact value for any width and thread count.
// Against RowKernels.cu's kernels the exps' arguments round differently
// (x * log2(e) - K where they take (x - max) * log2(e)), so the bits
// differ: the loss and gradients agree within 2e-5 relative in f32, one
// unit in the last place in bf16 / f16, NaN where they have NaN (test:
// LeanCrossEntropyTest.cpp). One difference beyond rounding: a logit over
// 2.3e38 in magnitude overflows K, and its row's results are NaN. 16-bit
// rows compute what their f32 widening does (the same groups, the same
// arithmetic), held or streamed, packed or not.
//
//===----------------------------------------------------------------------===//
#include "CrossEntropyLean.h"
#include "KernelSupport.cuh"
#include "HalfPairs.cuh"
#include "RowGroups.cuh"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

namespace fsdp {
namespace rt {
namespace cuda {

namespace {

/// A complete group of kRowGroup elements as loaded: 4 words of 16-bit
/// pairs, or 8 f32.
template <typename S> struct Group {
  using T = typename S::T;
  static constexpr int kWords = kRowGroup * sizeof(T) / 4;
  uint32_t w[kWords];

  /// Group q of row p: in whole packs (kPacked: p 16-byte aligned), else
  /// element by element (the same values, so the same results).
  template <bool kPacked> __device__ static Group load(const T *p, int q) {
    Group g;
    if constexpr (kPacked) {
#pragma unroll
      for (int k = 0; k < kWords / 4; ++k) {
        Pack<T> pack = loadPack(p, q * (kWords / 4) + k);
        std::memcpy(&g.w[4 * k], &pack, 16);
      }
    } else {
      const T *x = p + q * kRowGroup;
#pragma unroll
      for (int k = 0; k < kWords; ++k) {
        if constexpr (sizeof(T) == 4)
          std::memcpy(&g.w[k], &x[k], 4);
        else
          g.w[k] = x[2 * k] | static_cast<uint32_t>(x[2 * k + 1]) << 16;
      }
    }
    return g;
  }
  template <bool kPacked> __device__ void store(T *p, int q) const {
    if constexpr (kPacked) {
#pragma unroll
      for (int k = 0; k < kWords / 4; ++k) {
        Pack<T> pack;
        std::memcpy(&pack, &w[4 * k], 16);
        storePack(p, q * (kWords / 4) + k, pack);
      }
    } else {
      T *x = p + q * kRowGroup;
#pragma unroll
      for (int k = 0; k < kWords; ++k) {
        if constexpr (sizeof(T) == 4) {
          std::memcpy(&x[k], &w[k], 4);
        } else {
          x[2 * k] = static_cast<T>(w[k]);
          x[2 * k + 1] = static_cast<T>(w[k] >> 16);
        }
      }
    }
  }
  __device__ void widen(float *v) const {
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      if constexpr (sizeof(T) == 4)
        std::memcpy(&v[k], &w[k], 4);
      else
        Hw<S>::widen(w[k], v[2 * k], v[2 * k + 1]);
    }
  }
  __device__ void narrow(const float *v) {
#pragma unroll
    for (int k = 0; k < kWords; ++k) {
      if constexpr (sizeof(T) == 4)
        std::memcpy(&w[k], &v[k], 4);
      else
        w[k] = Hw<S>::narrow(v[2 * k], v[2 * k + 1]);
    }
  }
  /// The running max updated with the group (a NaN loses to a number):
  /// m itself for f32, for 16-bit elements m2, each half the max of its
  /// halves (two 3-input HMNMX2 a group), widened once at the end
  /// (widenMax).
  __device__ void max(float &m, uint32_t &m2) const {
    if constexpr (sizeof(T) == 4) {
#pragma unroll
      for (int k = 0; k < kWords; ++k)
        m = fmaxf(m, __uint_as_float(w[k]));
    } else {
      m2 = Hw<S>::max2(Hw<S>::max2(m2, w[0]), w[1]);
      m2 = Hw<S>::max2(Hw<S>::max2(m2, w[2]), w[3]);
    }
  }
  static constexpr uint32_t minusInf2() {
    if constexpr (sizeof(T) == 4)
      return 0;
    else
      return Hw<S>::kMinusInf2;
  }
  __device__ static float widenMax(float m, uint32_t m2) {
    if constexpr (sizeof(T) == 4) {
      return m;
    } else {
      float lo, hi;
      Hw<S>::widen(m2, lo, hi);
      return fmaxf(m, fmaxf(lo, hi));
    }
  }
};

/// Where a held group's exps wait for its gradient, so that each is
/// computed once: shared memory on a GPU, 16-byte slots [k][half][thread]
/// (a warp's accesses conflict-free); the one thread's array under the
/// emulation. The exps' MUFU.EX2 issue at 16 a clock an SM: at two a logit
/// they took about as long as the row's DRAM traffic, with which they do
/// not overlap (one block an SM). Stored or recomputed, the same bits.
template <int kHeld> struct HeldExps {
#ifdef FSDPRT_CUDA_EMULATION
  float v[kHeld > 0 ? kHeld * kRowGroup : 1];
  void put(int k, const float *e) {
    std::memcpy(&v[k * kRowGroup], e, sizeof(float) * kRowGroup);
  }
  void get(int k, float *e) const {
    std::memcpy(e, &v[k * kRowGroup], sizeof(float) * kRowGroup);
  }
#else
  __device__ static uint4 *slots() {
    extern __shared__ uint4 leanExps[];
    return leanExps;
  }
  __device__ void put(int k, const float *e) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint4 u;
      std::memcpy(&u, e + 4 * h, 16);
      slots()[(2 * k + h) * blockDim.x + threadIdx.x] = u;
    }
  }
  __device__ void get(int k, float *e) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint4 u = slots()[(2 * k + h) * blockDim.x + threadIdx.x];
      std::memcpy(e + 4 * h, &u, 16);
    }
  }
#endif
};

/// Registers of held groups a thread may use: 7 x 4 words of 16-bit
/// elements (rows up to 57344) or 3 x 8 of f32 (24576), as RowKernels.cu;
/// under the host emulation (one thread) 56 and 24 elements.
template <typename S>
constexpr int kLeanHeld = sizeof(typename S::T) == 2 ? 7 : 3;

/// Cross-entropy rows as RowKernels.cu's crossEntropyRowsKernel (the same
/// arguments and results; kPacked: whole packs, the rows' width a multiple
/// of 8 and the rows 16-byte aligned). kHeld > 0: the thread's complete
/// groups (at most kHeld) are loaded into registers once, and the exps of
/// its first `stored` groups kept for the gradient (HeldExps); kHeld = 0:
/// each pass reads them again (`stored` 0).
template <typename S, int kHeld, bool kPacked>
__global__ void __launch_bounds__(kWideThreads, kHeld > 0 ? 1 : 2)
    leanCrossEntropyKernel(bool i32, const typename S::T *logits,
                           const void *targets, const int64_t *count,
                           const float *dloss, double *terms,
                           typename S::T *dlogits, LogitRows rows, bool mean,
                           int64_t ignoreIndex, int stored) {
  using T = typename S::T;
  using G = Group<S>;
  const int c = static_cast<int>(rows.c), width = static_cast<int>(rows.width);
  const int full = c / kRowGroup, tail = c % kRowGroup;
  const int tid = threadIdx.x, threads = blockDim.x;
  // The partial last group's thread (none when c is a multiple of 8).
  const bool ownsTail = tail && full % threads == tid;
  const float g = !dlogits ? 0.0f
                  : mean   ? *dloss / static_cast<float>(*count)
                           : *dloss;
  FSDPRT_ROW_STRIDE(r, rows.n) {
    const T *xr = logits + r * rows.width;
    T *dr = dlogits ? dlogits + r * rows.width : nullptr;
    int64_t t = loadIndex(i32, targets, r);
    // As RowKernels.cu: an ignored row (or a target out of range, which
    // the index check reports) adds +0.0 and gets a zero gradient.
    if (t == ignoreIndex || t < 0 || t >= c) {
      if (terms && tid == 0)
        terms[r] = 0.0;
      if (dr) {
        G zero{};
        for (int q = tid; q < width / kRowGroup; q += threads)
          zero.template store<kPacked>(dr, q);
        for (int j = width / kRowGroup * kRowGroup + tid; j < width;
             j += threads)
          dr[j] = T{};
      }
      continue;
    }
    if (dr) {
      for (int j = c + tid; j < width; j += threads)
        dr[j] = T{}; // +0.0 in every storage type
    }
    const int ti = static_cast<int>(t);
    // Read before the first barrier: the owner may overwrite it in place.
    const float target = Hw<S>::one(xr[ti]);
    G held[kHeld > 0 ? kHeld : 1];
    if constexpr (kHeld > 0) {
#pragma unroll
      for (int k = 0; k < kHeld; ++k) {
        int q = tid + k * threads;
        if (q < full)
          held[k] = G::template load<kPacked>(xr, q);
      }
    }
    // f(group, q, k) for this thread's complete groups in increasing q,
    // k the group's place among them.
    auto forGroups = [&](auto f) {
      if constexpr (kHeld > 0) {
#pragma unroll
        for (int k = 0; k < kHeld; ++k) {
          int q = tid + k * threads;
          if (q < full)
            f(held[k], q, k);
        }
      } else {
        for (int q = tid, k = 0; q < full; q += threads, ++k)
          f(G::template load<kPacked>(xr, q), q, k);
      }
    };
    // The partial group's elements as floats (its thread only).
    auto tailValues = [&](float *v) {
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        v[i] = i < tail ? Hw<S>::one(xr[full * kRowGroup + i]) : -INFINITY;
    };

    float m = -INFINITY;
    uint32_t m2 = G::minusInf2();
    forGroups([&](const G &grp, int, int) { grp.max(m, m2); });
    m = G::widenMax(m, m2);
    if (ownsTail) {
      float v[kRowGroup];
      tailValues(v);
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        m = fmaxf(m, v[i]);
    }
    // exp(x - m) = exp2(x * log2(e) - k); a thread that saw only -inf (or
    // nothing) takes k = 0, so its terms are exp2(-inf) = 0, not NaN.
    const float k = m == -INFINITY ? 0.0f : m * kLog2e;
    double sum = 0.0;
    auto addExps = [&](float *v) { // v becomes the exps
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i) {
        v[i] = fastExp2(fmaf(v[i], kLog2e, -k));
        s += v[i];
      }
      sum += s;
    };
    HeldExps<kHeld> exps;
    forGroups([&](const G &grp, int, int gk) {
      float v[kRowGroup];
      grp.widen(v);
      addExps(v);
      if (gk < stored)
        exps.put(gk, v);
    });
    if (ownsTail) {
      float v[kRowGroup];
      tailValues(v); // the missing elements' -inf add exp2(-inf) = 0
      addExps(v);
    }
    // The row: kMax = max * log2(e), sum2 = sum of exp2(x log2(e) - kMax).
    const float kMax = wideBlockReduce(m == -INFINITY ? -INFINITY : k,
                                       [](float a, float b) {
                                         return fmaxf(a, b);
                                       });
    // This thread's share rescaled to kMax (0 for a thread that saw only
    // -inf, NaN where it saw a NaN or kMax is NaN or +inf).
    const float rescale = m == -INFINITY ? 0.0f : fastExp2(k - kMax);
    const double sum2 = wideBlockReduce(
        sum * rescale, [](double a, double b) { return a + b; });
    if (terms && tid == 0)
      terms[r] = (static_cast<double>(kMax) + log2(sum2)) /
                     static_cast<double>(kLog2e) -
                 target;
    if (!dr)
      continue;
    // grad = exp2(x log2(e) - k) * p, p = rescale / sum2 * g; the target's
    // (exp2(..) * rescale / sum2 - 1) * g.
    const float prob = rescale / static_cast<float>(sum2);
    const float scale = prob * g;
    forGroups([&](G grp, int q, int gk) {
      float v[kRowGroup];
      if (gk < stored) {
        exps.get(gk, v);
      } else {
        grp.widen(v);
#pragma unroll
        for (int i = 0; i < kRowGroup; ++i)
          v[i] = fastExp2(fmaf(v[i], kLog2e, -k));
      }
#pragma unroll
      for (int i = 0; i < kRowGroup; ++i)
        v[i] *= scale;
      grp.narrow(v);
      grp.template store<kPacked>(dr, q);
    });
    if (ownsTail) {
      float v[kRowGroup];
      tailValues(v);
      for (int i = 0; i < tail; ++i)
        dr[full * kRowGroup + i] =
            Hw<S>::narrowOne(fastExp2(fmaf(v[i], kLog2e, -k)) * scale);
    }
    // The target's owner (its group's thread) overwrites its element,
    // after the group's store above in this thread's program order.
    if ((ti / kRowGroup) % threads == tid)
      dr[ti] = Hw<S>::narrowOne(
          (fastExp2(fmaf(target, kLog2e, -k)) * prob - 1.0f) * g);
  }
}

template <typename S>
void launchLean(Stream s, bool i32, const void *logits, const void *targets,
                const int64_t *count, const float *dloss, double *terms,
                void *dlogits, LogitRows rows, bool mean,
                int64_t ignoreIndex) {
  using T = typename S::T;
  constexpr int kHeld = kLeanHeld<S>;
  int64_t perThread = (rows.c / kRowGroup + kWideThreads - 1) / kWideThreads;
  // Whole packs where every row starts 16-byte aligned; other rows stream
  // (held, their 2-byte loads in flight spilled).
  bool packed = rows.width % kRowGroup == 0 && packAligned(logits) &&
                (!dlogits || packAligned(dlogits));
  bool held = packed && perThread <= kHeld;
  auto *kernel = held     ? leanCrossEntropyKernel<S, kHeld, true>
                 : packed ? leanCrossEntropyKernel<S, 0, true>
                          : leanCrossEntropyKernel<S, 0, false>;
  // The held groups whose exps the gradient reuses: all of them where the
  // shared memory holds them (7 x 32 KiB of a Hopper's 227 KiB a block), as
  // many as fit elsewhere (an A100's 163 KiB: 5).
  int stored = held && dlogits ? static_cast<int>(perThread) : 0;
#ifdef FSDPRT_CUDA_EMULATION
  FSDPRT_LAUNCH_WIDE_ROWS(kernel, rows.n, s, i32,
                          static_cast<const T *>(logits), targets, count,
                          dloss, terms, static_cast<T *>(dlogits), rows, mean,
                          ignoreIndex, stored);
#else
  if (rows.n <= 0)
    return;
  constexpr int kSlotBytes = kRowGroup * 4 * kWideThreads; // a group's
  constexpr int kStaticBytes = 1024; // the reductions' (384) and slack
  int device, optin;
  checkCuda(cudaGetDevice(&device), "cudaGetDevice");
  checkCuda(cudaDeviceGetAttribute(
                &optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
            "cudaDeviceGetAttribute");
  stored = std::min(stored, (optin - kStaticBytes) / kSlotBytes);
  int bytes = stored * kSlotBytes;
  if (bytes > 0)
    checkCuda(cudaFuncSetAttribute(
                  kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes),
              "cudaFuncSetAttribute");
  kernel<<<static_cast<unsigned>(std::min<int64_t>(rows.n, int64_t(1) << 20)),
           kWideThreads, bytes, s>>>(
      i32, static_cast<const T *>(logits), targets, count, dloss, terms,
      static_cast<T *>(dlogits), rows, mean, ignoreIndex, stored);
  checkLaunch(s, "leanCrossEntropyKernel");
#endif
}

} // namespace

bool leanCrossEntropyRows(Stream s, DType dt, bool i32, const void *logits,
                          const void *targets, const int64_t *count,
                          const float *dloss, double *terms, void *dlogits,
                          LogitRows rows, bool mean, int64_t ignoreIndex) {
  if (rows.width > INT_MAX - kRowGroup)
    return false;
  withStorage(dt, [&](auto st) {
    launchLean<decltype(st)>(s, i32, logits, targets, count, dloss, terms,
                             dlogits, rows, mean, ignoreIndex);
  });
  return true;
}

} // namespace cuda
} // namespace rt
} // namespace fsdp
