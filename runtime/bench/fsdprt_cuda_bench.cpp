//===- fsdprt_cuda_bench.cpp - CUDA kernels at GPT-2 124M shapes ----------===//
//
// Times the CUDA backend's kernels through the C ABI at the shapes of one
// GPT-2 124M training step (batch 8 x 1024 tokens, width 768, 12 heads,
// vocabulary 50257 in logit rows of 50304) and prints each against its
// ceiling on this GPU:
//   - GEMMs (linear forward / backward) against cuBLAS called directly on
//     the same shapes, writing the storage type (no f32 staging);
//   - everything else against the bytes it must read and write at the
//     device-to-device copy bandwidth measured here (attention: the larger
//     of that and its FLOPs at cuBLAS's rate on its per-head products).
// The ratio (ours / ceiling, in time) says where a step's time goes beyond
// what the hardware needs. Not a test. Run it on a GPU (the lease kit does).
//   fsdprt_cuda_bench [--dtype bf16|f32] [--iters N] [--batch B]
//                     [--only gemm|attention|pointwise|norm|loss|optimizer]
// (--batch: sequences of 1024; the kit runs 8 and, for the norms, 64.)
// The norm and cross-entropy rows run on the default context (the kernels
// the environment selects), each followed by the same on a context made
// with the opt-in lean kernels (FSDPRT_NORM_KERNELS=lean,
// FSDPRT_XENT_KERNELS=lean).
//
//===----------------------------------------------------------------------===//
#include "BenchUtil.h"

#include "fsdp/rt/fsdprt.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using fsdp::rt::bench::check;
using fsdp::rt::bench::timeIt;

constexpr int kReps = 3; // timings per kernel; the best one counts

void checkCuda(cudaError_t rc, const char *what) {
  if (rc != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(rc));
    std::exit(1);
  }
}
void checkBlas(cublasStatus_t rc, const char *what) {
  if (rc != CUBLAS_STATUS_SUCCESS) {
    std::fprintf(stderr, "%s: cuBLAS status %d\n", what, int(rc));
    std::exit(1);
  }
}

void row(const std::string &name, double ours, double ceiling) {
  std::printf("%-40s %9.3f %9.3f %7.2f\n", name.c_str(), ours * 1e3,
              ceiling * 1e3, ours / ceiling);
}

} // namespace

int main(int argc, char **argv) {
  bool bf16 = true;
  int iters = 10;
  int64_t B = 8;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--dtype" && i + 1 < argc)
      bf16 = std::string(argv[++i]) == "bf16";
    else if (a == "--iters" && i + 1 < argc)
      iters = std::max(1, std::atoi(argv[++i]));
    else if (a == "--batch" && i + 1 < argc)
      B = std::max(1, std::atoi(argv[++i]));
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(stderr,
                   "usage: %s [--dtype bf16|f32] [--iters N] [--batch B] "
                   "[--only gemm|attention|pointwise|norm|loss|optimizer]\n",
                   argv[0]);
      return 2;
    }
  }
  const int32_t dt = bf16 ? FSDPRT_BF16 : FSDPRT_F32;
  const int64_t es = bf16 ? 2 : 4;
  auto want = [&](const char *section) {
    return only.empty() || only == section;
  };
  const int64_t T = 1024, C = 768, H = 12, V = 50257, M = B * T;
  // The logits' width: fsdp-pad-vocab pads the lm head to 64 classes.
  const int64_t W = (V + 63) / 64 * 64;

  int64_t ctx;
  check(fsdprt_context_create("cuda", 0, 1, int64_t(8) << 30, 0, &ctx),
        "context_create");
  const int64_t s = FSDPRT_DEFAULT_STREAM;
  auto sync = [&] { check(fsdprt_context_synchronize(ctx), "synchronize"); };
  auto alloc = [&](int64_t elems, int64_t elemSize) {
    int64_t b;
    check(fsdprt_buffer_alloc(ctx, elems * elemSize, &b), "alloc");
    if (elemSize == es)
      check(fsdprt_fill(ctx, s, dt, b, 0, elems, 0.01), "fill");
    return b;
  };

  // Ceilings: the copy bandwidth, and cuBLAS on raw device memory.
  const size_t copyBytes = size_t(1) << 30;
  void *src, *dst;
  checkCuda(cudaMalloc(&src, copyBytes), "cudaMalloc");
  checkCuda(cudaMalloc(&dst, copyBytes), "cudaMalloc");
  auto devSync = [] { checkCuda(cudaDeviceSynchronize(), "synchronize"); };
  const double copyTime = timeIt(
      [&] {
        checkCuda(cudaMemcpy(dst, src, copyBytes, cudaMemcpyDeviceToDevice),
                  "cudaMemcpy");
      },
      devSync, 5, kReps);
  const double bandwidth = 2.0 * copyBytes / copyTime; // read + write
  cublasHandle_t blas;
  checkBlas(cublasCreate(&blas), "cublasCreate");
  const cudaDataType_t ct = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  /// cuBLAS's time for row-major C[m, n] = A[m, k] B[k, n] in the storage
  /// type (f32 accumulation, no TF32), on scratch device memory.
  auto cublasTime = [&](int64_t m, int64_t k, int64_t n, int64_t batch) {
    void *a, *b, *c;
    checkCuda(cudaMalloc(&a, m * k * es * batch), "cudaMalloc");
    checkCuda(cudaMalloc(&b, k * n * es * batch), "cudaMalloc");
    checkCuda(cudaMalloc(&c, m * n * es * batch), "cudaMalloc");
    float one = 1.0f, zero = 0.0f;
    double t = timeIt(
        [&] {
          checkBlas(cublasGemmStridedBatchedEx(
                        blas, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k),
                        &one, b, ct, int(n), k * n, a, ct, int(k), m * k, &zero,
                        c, ct, int(n), m * n, int(batch), CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT),
                    "cublasGemmStridedBatchedEx");
        },
        devSync, iters, kReps);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return t;
  };
  std::printf("dtype %s, copy bandwidth %.0f GB/s\n", bf16 ? "bf16" : "f32",
              bandwidth * 1e-9);
  std::printf("%-40s %9s %9s %7s\n", "kernel (GPT-2 124M step shapes)",
              "ours ms", "ceil ms", "ratio");

  struct Linear {
    const char *what;
    int64_t k, n;
    bool bias;
  };
  for (Linear l :
       want("gemm")
           ? std::vector<Linear>{Linear{"qkv", C, 3 * C, true},
                                 Linear{"attn proj", C, C, true},
                                 Linear{"mlp fc", C, 4 * C, true},
                                 Linear{"mlp proj", 4 * C, C, true},
                                 Linear{"lm head (padded)", C, W, false}}
           : std::vector<Linear>{}) {
    int64_t x = alloc(M * l.k, es), w = alloc(l.n * l.k, es),
            b = l.bias ? alloc(l.n, es) : 0, y = alloc(M * l.n, es),
            dx = alloc(M * l.k, es), dw = alloc(l.n * l.k, es),
            db = l.bias ? alloc(l.n, es) : 0;
    sync();
    double fwd = timeIt(
        [&] {
          check(fsdprt_linear_forward(ctx, s, dt, x, 0, w, 0, b, 0, y, 0, M,
                                      l.k, l.n),
                "linear_forward");
        },
        sync, iters, kReps);
    double bwd = timeIt(
        [&] {
          check(fsdprt_linear_backward(ctx, s, dt, x, 0, w, 0, y, 0, dx, 0, dw,
                                       0, db, 0, M, l.k, l.n),
                "linear_backward");
        },
        sync, iters, kReps);
    double gemm = cublasTime(M, l.k, l.n, 1);
    double gemmBwd = cublasTime(M, l.n, l.k, 1) + cublasTime(l.n, M, l.k, 1);
    std::string shape = " " + std::to_string(M) + "x" + std::to_string(l.k) +
                        "x" + std::to_string(l.n);
    row(std::string("linear fwd ") + l.what + shape, fwd, gemm);
    row(std::string("linear bwd ") + l.what + shape, bwd, gemmBwd);
    for (int64_t h : {x, w, b, y, dx, dw, db})
      if (h)
        check(fsdprt_buffer_free(ctx, s, h), "free");
  }

  // fuse-bias-gelu: the MLP's c_fc with its GELU in cuBLASLt's
  // GELU_AUX_BIAS epilogue, and c_proj's input gradient with the GELU's
  // derivative in DGELU, each against the unfused calls it replaces (the
  // ceiling column; a ratio under 1 is the fusion's gain).
  if (want("gemm")) {
    const int64_t F = 4 * C;
    int64_t x = alloc(M * C, es), w1 = alloc(F * C, es), b1 = alloc(F, es),
            pre = alloc(M * F, es), y = alloc(M * F, es), w2 = alloc(C * F, es),
            dy = alloc(M * C, es), dh = alloc(M * F, es),
            dw2 = alloc(C * F, es), db2 = alloc(C, es);
    sync();
    auto time = [&](const std::function<void()> &f) {
      return timeIt(f, sync, iters, kReps);
    };
    double fusedFwd = time([&] {
      check(fsdprt_linear_gelu_forward(ctx, s, dt, x, 0, w1, 0, b1, 0, pre, 0,
                                       y, 0, M, C, F),
            "linear_gelu_forward");
    });
    double plainFwd = time([&] {
      check(fsdprt_linear_forward(ctx, s, dt, x, 0, w1, 0, b1, 0, pre, 0, M, C,
                                  F),
            "linear_forward");
      check(fsdprt_activation_forward(ctx, s, dt, FSDPRT_GELU_TANH, pre, 0, y,
                                      0, M * F),
            "activation_forward");
    });
    double fusedBwd = time([&] {
      check(fsdprt_linear_gelu_backward(ctx, s, dt, y, 0, w2, 0, dy, 0, pre, 0,
                                        dh, 0, dw2, 0, db2, 0, M, F, C),
            "linear_gelu_backward");
    });
    double plainBwd = time([&] {
      check(fsdprt_linear_backward(ctx, s, dt, y, 0, w2, 0, dy, 0, dh, 0, dw2,
                                   0, db2, 0, M, F, C),
            "linear_backward");
      check(fsdprt_activation_backward(ctx, s, dt, FSDPRT_GELU_TANH, pre, 0, dh,
                                       0, dh, 0, M * F),
            "activation_backward");
    });
    row("mlp fc+gelu fused fwd (ceil: unfused)", fusedFwd, plainFwd);
    row("mlp proj+dgelu fused bwd (ceil: unfused)", fusedBwd, plainBwd);
    for (int64_t h : {x, w1, b1, pre, y, w2, dy, dh, dw2, db2})
      check(fsdprt_buffer_free(ctx, s, h), "free");
  }

  // What padding the vocabulary buys (the backend's run-time padding of
  // GEMM dimensions to multiples of 8, with pad-vocab=0): cuBLAS alone on
  // the unpadded lm head against its padded shape.
  if (want("gemm"))
    row("cuBLAS lm head: n 50257 (ceil: n 50264)", cublasTime(M, C, V, 1),
        cublasTime(M, C, (V + 7) / 8 * 8, 1));

  if (want("attention")) { // attention: 4 products of [T, T, 64] per (batch,
                           // head) forward, 8 back
    const int64_t D = C / H, n = M * C;
    int64_t q = alloc(n, es), k = alloc(n, es), v = alloc(n, es),
            o = alloc(n, es), dq = alloc(n, es), dk = alloc(n, es),
            dv = alloc(n, es), stats = alloc(B * H * T, 4);
    sync();
    // The forward keeps its softmax statistics for the backward, as a
    // compiled step's packed attention does.
    double fwd = timeIt(
        [&] {
          check(fsdprt_attention_forward(ctx, s, dt, q, 0, k, 0, v, 0, o, 0,
                                         stats, 0, B, T, T, H, H, D, 0, 0, 1,
                                         0.0, 0, 0, 0, 0),
                "attention_forward");
        },
        sync, iters, kReps);
    double bwd = timeIt(
        [&] {
          check(fsdprt_attention_backward(ctx, s, dt, q, 0, k, 0, v, 0, o, 0,
                                          o, 0, stats, 0, dq, 0, dk, 0, dv, 0,
                                          B, T, T, H, H, D, 0, 0, 1, 0.0, 0, 0,
                                          0, 0, 0, 0),
                "attention_backward");
        },
        sync, iters, kReps);
    double products = cublasTime(T, D, T, B * H) + cublasTime(T, T, D, B * H);
    row("attention fwd (causal, full products)",
        fwd, std::max(products, 4.0 * n * es / bandwidth));
    row("attention bwd (causal, full products)",
        bwd, std::max(2 * products, 8.0 * n * es / bandwidth));
    for (int64_t h : {q, k, v, o, dq, dk, dv, stats})
      check(fsdprt_buffer_free(ctx, s, h), "free");
  }

  if (want("pointwise")) { // pointwise: the residual add, the MLP's GELU, a
                           // parameter cast
    const int64_t F = 4 * C, P = int64_t(124) << 20;
    int64_t a = alloc(M * C, es), b = alloc(M * C, es), sum = alloc(M * C, es),
            x = alloc(M * F, es), g = alloc(M * F, es), y = alloc(M * F, es),
            master = alloc(P, 4), half = alloc(P, 2);
    int64_t shape[2] = {M, C};
    sync();
    auto time = [&](const std::function<void()> &f) {
      return timeIt(f, sync, iters, kReps);
    };
    row("add (residual) 8192x768", time([&] {
          check(fsdprt_binary_forward(ctx, s, dt, FSDPRT_ADD, a, 0, 2, shape, b,
                                      0, 2, shape, sum, 0),
                "binary_forward");
        }),
        3.0 * M * C * es / bandwidth);
    row("gelu (tanh) fwd 8192x3072", time([&] {
          check(fsdprt_activation_forward(ctx, s, dt, FSDPRT_GELU_TANH, x, 0,
                                          y, 0, M * F),
                "activation_forward");
        }),
        2.0 * M * F * es / bandwidth);
    row("gelu (tanh) bwd 8192x3072", time([&] {
          check(fsdprt_activation_backward(ctx, s, dt, FSDPRT_GELU_TANH, x, 0,
                                           g, 0, y, 0, M * F),
                "activation_backward");
        }),
        3.0 * M * F * es / bandwidth);
    // GPT-J's interleaved rotary halves: x[..., 1::2] and the gradient's
    // scatter back into zeros; RoBERTa-style running sums along rows.
    int64_t wide[2] = {M, F};
    row("strided slice [:, 1::2] 8192x3072", time([&] {
          check(fsdprt_strided_slice(ctx, s, dt, x, 0, 2, wide, 1, 1, 2, F / 2,
                                     y, 0),
                "strided_slice");
        }),
        1.0 * M * F * es / bandwidth);
    row("  its backward (zeros + scatter)", time([&] {
          check(fsdprt_strided_slice_backward(ctx, s, dt, y, 0, 2, wide, 1, 1,
                                              2, F / 2, g, 0),
                "strided_slice_backward");
        }),
        2.0 * M * F * es / bandwidth);
    row("cumsum along rows 8192x3072 (a thread per row)", time([&] {
          check(fsdprt_cumsum(ctx, s, dt, x, 0, 2, wide, 1, 0, y, 0),
                "cumsum");
        }),
        2.0 * M * F * es / bandwidth);
    row("cast f32 -> bf16, 124M parameters", time([&] {
          check(fsdprt_cast(ctx, s, FSDPRT_F32, master, 0, FSDPRT_BF16, half,
                            0, P),
                "cast");
        }),
        6.0 * P / bandwidth);
    // The attention's q / k / v out of c_attn's [B, T, 3C] and their
    // gradients back: slab copies of 1536-byte (bf16) rows.
    int64_t qkvShape[3] = {M, 1, 3 * C}, thirds[3] = {C, C, C},
            offs[3] = {0, 0, 0}, parts[3] = {a, b, sum};
    row("split qkv 8192x2304 -> 3 x 8192x768", time([&] {
          check(fsdprt_split(ctx, s, dt, x, 0, 3, qkvShape, 2, 3, thirds,
                             parts, offs),
                "split");
        }),
        2.0 * M * 3 * C * es / bandwidth);
    row("concat 3 x 8192x768 -> 8192x2304", time([&] {
          check(fsdprt_concat(ctx, s, dt, 3, parts, offs, thirds, 3, qkvShape,
                              2, x, 0),
                "concat");
        }),
        2.0 * M * 3 * C * es / bandwidth);
    for (int64_t h : {a, b, sum, x, g, y, master, half})
      check(fsdprt_buffer_free(ctx, s, h), "free");
  }

  // A second context with both opt-in kernel sets (docs/CUDA.md), read
  // when it is made: FSDPRT_NORM_KERNELS=lean and FSDPRT_XENT_KERNELS=lean,
  // the variables restored after. Its rows follow the default ones.
  auto leanContext = [&] {
    const char *names[] = {"FSDPRT_NORM_KERNELS", "FSDPRT_XENT_KERNELS"};
    std::string saved[2];
    bool wasSet[2];
    for (int i = 0; i < 2; ++i) {
      const char *v = std::getenv(names[i]);
      wasSet[i] = v != nullptr;
      saved[i] = v ? v : "";
      setenv(names[i], "lean", 1);
    }
    int64_t cx;
    check(fsdprt_context_create("cuda", 0, 1, int64_t(8) << 30, 0, &cx),
          "context_create");
    for (int i = 0; i < 2; ++i) {
      if (wasSet[i])
        setenv(names[i], saved[i].c_str(), 1);
      else
        unsetenv(names[i]);
    }
    return cx;
  };
  // fn(cx, alloc on cx, sync of cx) on the default context, then on the
  // lean one: the two sets of times.
  auto onBothContexts = [&](auto fn) {
    std::vector<double> times[2];
    int64_t contexts[2] = {ctx, leanContext()};
    for (int k = 0; k < 2; ++k) {
      int64_t cx = contexts[k];
      auto cxAlloc = [&](int64_t bytes) {
        int64_t b;
        check(fsdprt_buffer_alloc(cx, bytes, &b), "alloc");
        return b;
      };
      auto cxSync = [&] {
        check(fsdprt_context_synchronize(cx), "synchronize");
      };
      times[k] = fn(cx, cxAlloc, cxSync);
    }
    check(fsdprt_context_destroy(contexts[1]), "destroy");
    return std::make_pair(times[0], times[1]);
  };

  if (want("norm")) { // layer_norm, rows of 768
    auto normTimes = [&](int64_t cx, auto cxAlloc, auto cxSync) {
      auto buf = [&](int64_t elems) {
        int64_t h = cxAlloc(elems * es);
        check(fsdprt_fill(cx, s, dt, h, 0, elems, 0.01), "fill");
        return h;
      };
      int64_t x = buf(M * C), w = buf(C), b = buf(C), y = buf(M * C),
              dx = buf(M * C), dw = buf(C), db = buf(C), r = buf(M * C),
              sum = buf(M * C);
      cxSync();
      auto time = [&](auto call) {
        return timeIt(call, cxSync, iters, kReps);
      };
      // The backward, wanting dx, dw and db, or some of them.
      auto backward = [&](int64_t dxOut, int64_t dwOut, int64_t dbOut) {
        return time([&] {
          check(fsdprt_layer_norm_backward(cx, s, dt, x, 0, w, 0, y, 0, dxOut,
                                           0, dwOut, 0, dbOut, 0, M, C, 1e-5),
                "layer_norm_backward");
        });
      };
      const int64_t shape[2] = {M, C};
      std::vector<double> t = {
          time([&] {
            check(fsdprt_layer_norm_forward(cx, s, dt, x, 0, w, 0, b, 0, y, 0,
                                            M, C, 1e-5),
                  "layer_norm_forward");
          }),
          backward(dx, dw, db), backward(dx, 0, 0), backward(0, dw, db),
          // The residual add fused with the norm (fuse-add-layer-norm).
          time([&] {
            check(fsdprt_add_layer_norm_forward(cx, s, dt, x, 0, r, 0, w, 0, b,
                                                0, sum, 0, y, 0, M, C, 1e-5),
                  "add_layer_norm_forward");
          }),
          // Its backward half: the norm's input gradient plus the residual
          // gradient r, in one call or as the unfused pair.
          time([&] {
            check(fsdprt_add_layer_norm_backward(cx, s, dt, x, 0, w, 0, y, 0,
                                                 r, 0, sum, 0, dw, 0, db, 0, M,
                                                 C, 1e-5),
                  "add_layer_norm_backward");
          }),
          time([&] {
            check(fsdprt_layer_norm_backward(cx, s, dt, x, 0, w, 0, y, 0, dx,
                                             0, dw, 0, db, 0, M, C, 1e-5),
                  "layer_norm_backward");
            check(fsdprt_binary_forward(cx, s, dt, FSDPRT_ADD, r, 0, 2, shape,
                                        dx, 0, 2, shape, sum, 0),
                  "binary_forward");
          })};
      for (int64_t h : {x, w, b, y, dx, dw, db, r, sum})
        check(fsdprt_buffer_free(cx, s, h), "free");
      cxSync();
      return t;
    };
    auto [norms, lean] = onBothContexts(normTimes);
    // Bytes moved, in rows of M x C elements: the forward reads x, writes
    // y; the backward reads x and dy, writes dx (its columns: reads x and
    // dy); the fused forward reads a and r, writes the sum and y; the
    // fused backward reads x, dy and r, writes dx (the unfused pair 6).
    const double rows[] = {2, 3, 3, 2, 4, 4, 6};
    const std::string shape = std::to_string(M) + "x768";
    const std::string names[] = {"layer_norm fwd " + shape,
                                 "layer_norm bwd " + shape,
                                 "  its rows only (dx)",
                                 "  its columns only (dw, db)",
                                 "add + layer_norm fwd " + shape,
                                 "layer_norm bwd + add " + shape,
                                 "  unfused: bwd, then add"};
    for (int k = 0; k < 7; ++k) {
      double ceiling = rows[k] * M * C * es / bandwidth;
      row(names[k], norms[k], ceiling);
      row("  lean (FSDPRT_NORM_KERNELS=lean)", lean[k], ceiling);
    }
  }

  if (want("loss")) { // cross-entropy over the vocabulary, embedding backward
                      // into it
    std::vector<int64_t> targets(M);
    std::mt19937 rng(0);
    for (int64_t &t : targets)
      t = std::uniform_int_distribution<int64_t>(0, V - 1)(rng);
    // Forward, backward and the train step's call (both from one pass, the
    // gradient in place) on context cx, whose FSDPRT_XENT_KERNELS setting
    // (read when it was made) chose the cross-entropy kernels.
    auto crossEntropyTimes = [&](int64_t cx, auto cxAlloc, auto cxSync) {
      int64_t logits = cxAlloc(M * W * es), ids = cxAlloc(M * 8),
              loss = cxAlloc(4), dloss = cxAlloc(4);
      check(fsdprt_fill(cx, s, dt, logits, 0, M * W, 0.01), "fill");
      check(fsdprt_copy_from_host(cx, s, ids, 0, targets.data(), M * 8),
            "copy_from_host");
      check(fsdprt_fill(cx, s, FSDPRT_F32, dloss, 0, 1, 1.0), "fill");
      cxSync();
      int64_t dlogits = cxAlloc(M * W * es);
      auto time = [&](auto call) {
        return timeIt(call, cxSync, iters, kReps);
      };
      std::vector<double> t = {
          time([&] {
            check(fsdprt_cross_entropy_forward(cx, s, dt, FSDPRT_I64, logits,
                                               0, ids, 0, loss, 0, M, V, W,
                                               FSDPRT_LOSS_MEAN, -100),
                  "cross_entropy_forward");
          }),
          time([&] {
            check(fsdprt_cross_entropy_backward(
                      cx, s, dt, FSDPRT_I64, logits, 0, ids, 0, dloss, 0,
                      dlogits, 0, M, V, W, FSDPRT_LOSS_MEAN, -100),
                  "cross_entropy_backward");
          }),
          time([&] {
            check(fsdprt_cross_entropy_forward_backward(
                      cx, s, dt, FSDPRT_I64, logits, 0, ids, 0, dloss, 0,
                      loss, 0, logits, 0, M, V, W, FSDPRT_LOSS_MEAN, -100),
                  "cross_entropy_forward_backward");
          })};
      for (int64_t h : {logits, dlogits, ids, loss, dloss})
        check(fsdprt_buffer_free(cx, s, h), "free");
      cxSync();
      return t;
    };
    auto [xent, lean] = onBothContexts(crossEntropyTimes);
    int64_t ids = alloc(M, 8), dy = alloc(M * C, es), dtable = alloc(V * C, es);
    check(fsdprt_copy_from_host(ctx, s, ids, 0, targets.data(), M * 8),
          "copy_from_host");
    sync();
    double emb = timeIt(
        [&] {
          check(fsdprt_embedding_backward(ctx, s, dt, FSDPRT_I64, ids, 0, dy, 0,
                                          dtable, 0, M, V, C),
                "embedding_backward");
        },
        sync, iters, kReps);
    const double fwdCeiling = 1.0 * M * V * es / bandwidth,
                 bwdCeiling = 2.0 * M * W * es / bandwidth;
    const std::string shape = std::to_string(M) + "x50257 (rows of 50304)";
    row("cross_entropy fwd " + shape, xent[0], fwdCeiling);
    row("  lean (FSDPRT_XENT_KERNELS=lean)", lean[0], fwdCeiling);
    row("cross_entropy bwd " + shape, xent[1], bwdCeiling);
    row("  lean (FSDPRT_XENT_KERNELS=lean)", lean[1], bwdCeiling);
    row("cross_entropy fwd+bwd one call, in place", xent[2], bwdCeiling);
    row("  lean (FSDPRT_XENT_KERNELS=lean)", lean[2], bwdCeiling);
    row("embedding bwd 8192 ids into 50257x768", emb,
        1.0 * (M * C + V * C) * es / bandwidth);
    for (int64_t h : {ids, dy, dtable})
      check(fsdprt_buffer_free(ctx, s, h), "free");
  }

  if (want("optimizer")) { // AdamW over every parameter, as one call
    // GPT-2 124M's parameters with the padded vocabulary (the step updates
    // one flat shard per unit; together they are this many). The gradient
    // is read in the storage type (the reduced shard the update reads), the
    // f32 parameter and both moments read and written.
    const int64_t N = W * C + T * C + 12 * (12 * C * C + 13 * C) + 2 * C;
    int64_t p = alloc(N, 4), m = alloc(N, 4), v = alloc(N, 4),
            g = alloc(N, es);
    for (int64_t h : {p, m, v})
      check(fsdprt_fill(ctx, s, FSDPRT_F32, h, 0, N, 0.01), "fill");
    sync();
    int64_t step = 1;
    double adamw = timeIt(
        [&] {
          check(fsdprt_adamw_step(ctx, s, dt, p, 0, g, 0, m, 0, v, 0, N,
                                  step++, 6e-4, 0.9, 0.95, 1e-8, 0.1, 0, 0,
                                  0),
                "adamw_step");
        },
        sync, iters, kReps);
    // The same elements as the step updates them: 13 unit shards (the root
    // with the embeddings and ln_f, 12 blocks), a call each, or one
    // multi-tensor call (fused-optimizer).
    std::vector<int64_t> sizes(12, 12 * C * C + 13 * C);
    sizes.insert(sizes.begin(), W * C + T * C + 2 * C);
    std::vector<int64_t> buffers, offsets;
    int64_t first = 0;
    for (int64_t n : sizes) {
      buffers.insert(buffers.end(), {p, g, m, v});
      offsets.insert(offsets.end(),
                     {first * 4, first * es, first * 4, first * 4});
      first += n;
    }
    double separate = timeIt(
        [&] {
          for (size_t k = 0; k < sizes.size(); ++k)
            check(fsdprt_adamw_step(ctx, s, dt, p, offsets[4 * k], g,
                                    offsets[4 * k + 1], m, offsets[4 * k + 2],
                                    v, offsets[4 * k + 3], sizes[k], step++,
                                    6e-4, 0.9, 0.95, 1e-8, 0.1, 0, 0, 0),
                  "adamw_step");
        },
        sync, iters, kReps);
    double together = timeIt(
        [&] {
          check(fsdprt_adamw_multi_step(
                    ctx, s, dt, static_cast<int64_t>(sizes.size()),
                    buffers.data(), offsets.data(), sizes.data(), step++,
                    6e-4, 0.9, 0.95, 1e-8, 0.1, 0, 0, 0),
                "adamw_multi_step");
        },
        sync, iters, kReps);
    const double ceiling = (24.0 + es) * N / bandwidth;
    row("adamw " + std::to_string(N) + " params", adamw, ceiling);
    row("  as 13 unit shards, a call each", separate, ceiling);
    row("  as 13 unit shards, one multi call (fused-optimizer)", together,
        ceiling);
    for (int64_t h : {p, m, v, g})
      check(fsdprt_buffer_free(ctx, s, h), "free");
  }

  cublasDestroy(blas);
  cudaFree(src);
  cudaFree(dst);
  check(fsdprt_context_destroy(ctx), "destroy");
  return 0;
}
