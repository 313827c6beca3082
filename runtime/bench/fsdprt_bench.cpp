//===- fsdprt_bench.cpp - Runtime kernels against their ceilings ----------===//
//
// Prints a table of ratios, not absolute numbers, so that results are
// comparable across machines:
//   - linear forward / backward through the C ABI against calling OpenBLAS
//     cblas_sgemm directly with its own threading (the compute ceiling);
//   - a ResNet 3x3 convolution (im2col + GEMM) and its two gradients
//     against one cblas_sgemm of the same FLOPs (the same ceiling);
//   - elementwise kernels against memcpy bandwidth (the memory ceiling),
//     counting the bytes each kernel must read and write.
// Usage: fsdprt_bench [threads]   (default: hardware threads)
//
//===----------------------------------------------------------------------===//
#include "BenchUtil.h"

#include "fsdp/rt/fsdprt.h"

#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

namespace {

using fsdp::rt::bench::check;
using fsdp::rt::bench::timeIt;

void row(const char *name, const char *unit, double ours, double ceiling) {
  std::printf("%-34s %10.2f %10.2f %-7s %6.2f\n", name, ours, ceiling, unit,
              ours / ceiling);
}

} // namespace

int main(int argc, char **argv) {
  int threads = argc > 1
                    ? std::atoi(argv[1])
                    : static_cast<int>(std::thread::hardware_concurrency());
  int64_t ctx;
  check(fsdprt_context_create("cpu", 0, 1, int64_t(1) << 30, threads, &ctx),
        "context_create");
  const int64_t s = FSDPRT_DEFAULT_STREAM;
  auto sync = [&] { check(fsdprt_context_synchronize(ctx), "synchronize"); };
  auto alloc = [&](int64_t bytes) {
    int64_t b;
    check(fsdprt_buffer_alloc(ctx, bytes, &b), "alloc");
    check(fsdprt_fill(ctx, s, FSDPRT_F32, b, 0, bytes / 4, 0.5), "fill");
    return b;
  };
  auto host = [&](int64_t b) {
    void *p;
    check(fsdprt_buffer_host_ptr(ctx, b, 0, &p), "host_ptr");
    return static_cast<float *>(p);
  };

  std::printf("threads: %d\n", threads);
  std::printf("%-34s %10s %10s %-7s %6s\n", "kernel", "ours", "ceiling", "unit",
              "ratio");
  struct Gemm {
    int64_t m, k, n;
  };
  for (Gemm g : {Gemm{1024, 1024, 1024}, Gemm{2048, 768, 3072}}) {
    int64_t x = alloc(g.m * g.k * 4), w = alloc(g.n * g.k * 4),
            b = alloc(g.n * 4), y = alloc(g.m * g.n * 4),
            dx = alloc(g.m * g.k * 4), dw = alloc(g.n * g.k * 4),
            db = alloc(g.n * 4);
    sync();
    double flops = 2.0 * g.m * g.n * g.k;
    // Our GEMMs parallelise outside OpenBLAS (deterministic results) and
    // run OpenBLAS single-threaded; the ceiling gets OpenBLAS's own threads.
    openblas_set_num_threads(1);
    double fwd = timeIt(
        [&] {
          check(fsdprt_linear_forward(ctx, s, FSDPRT_F32, x, 0, w, 0, b, 0, y,
                                      0, g.m, g.k, g.n),
                "linear_forward");
        },
        sync, 3);
    double bwd = timeIt(
        [&] {
          check(fsdprt_linear_backward(ctx, s, FSDPRT_F32, x, 0, w, 0, y, 0, dx,
                                       0, dw, 0, db, 0, g.m, g.k, g.n),
                "linear_backward");
        },
        sync, 3);
    openblas_set_num_threads(threads);
    float *px = host(x), *pw = host(w), *py = host(y), *pdx = host(dx),
          *pdw = host(dw);
    double blasFwd = timeIt(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g.m, g.n, g.k,
                      1.0f, px, g.k, pw, g.k, 0.0f, py, g.n);
        },
        [] {}, 3);
    double blasBwd = timeIt(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g.m, g.k, g.n,
                      1.0f, py, g.n, pw, g.k, 0.0f, pdx, g.k);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g.n, g.k, g.m,
                      1.0f, py, g.n, px, g.k, 0.0f, pdw, g.k);
        },
        [] {}, 3);
    char name[64];
    std::snprintf(name, sizeof(name), "linear fwd %lldx%lldx%lld",
                  (long long)g.m, (long long)g.k, (long long)g.n);
    row(name, "GFLOP/s", flops / fwd * 1e-9, flops / blasFwd * 1e-9);
    std::snprintf(name, sizeof(name), "linear bwd %lldx%lldx%lld",
                  (long long)g.m, (long long)g.k, (long long)g.n);
    row(name, "GFLOP/s", 2 * flops / bwd * 1e-9, 2 * flops / blasBwd * 1e-9);
    for (int64_t h : {x, w, b, y, dx, dw, db})
      check(fsdprt_buffer_free(ctx, s, h), "free");
  }
  openblas_set_num_threads(1);

  {
    // ResNet-18's second stage at batch 8: 64 -> 64 channels, 28x28, 3x3,
    // stride 1, padding 1. Each convolution is 2·N·O·H·W·C·9 FLOPs.
    const int64_t N = 8, C = 64, H = 28, O = 64, K = 3;
    std::vector<int64_t> geometry{N, C, H, H, O, K, K, H,
                                  H, 1, 1, 1, 1, 1, 1, 1};
    int64_t x = alloc(N * C * H * H * 4), w = alloc(O * C * K * K * 4),
            y = alloc(N * O * H * H * 4), dx = alloc(N * C * H * H * 4),
            dw = alloc(O * C * K * K * 4);
    sync();
    double flops = 2.0 * N * O * H * H * C * K * K;
    auto conv = [&](auto call, const char *what) {
      return timeIt([&] { check(call(), what); }, sync, 3);
    };
    double fwd = conv(
        [&] {
          return fsdprt_conv_forward(ctx, s, FSDPRT_F32, x, 0, w, 0, 0, 0, y, 0,
                                     geometry.data());
        },
        "conv_forward");
    double dgrad = conv(
        [&] {
          return fsdprt_conv_backward_input(ctx, s, FSDPRT_F32, y, 0, w, 0, dx,
                                            0, geometry.data());
        },
        "conv_backward_input");
    double wgrad = conv(
        [&] {
          return fsdprt_conv_backward_weight(ctx, s, FSDPRT_F32, y, 0, x, 0, dw,
                                             0, geometry.data());
        },
        "conv_backward_weight");
    // The ceiling: one GEMM of the same shape as all images' forward GEMMs
    // side by side (O x C·9 by C·9 x N·H·W), OpenBLAS's own threads.
    openblas_set_num_threads(threads);
    std::vector<float> a(O * C * K * K, 0.5f), b(C * K * K * N * H * H, 0.5f),
        c(O * N * H * H);
    double blas = timeIt(
        [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, O, N * H * H,
                      C * K * K, 1.0f, a.data(), C * K * K, b.data(), N * H * H,
                      0.0f, c.data(), N * H * H);
        },
        [] {}, 3);
    openblas_set_num_threads(1);
    double ceiling = flops / blas * 1e-9;
    row("conv fwd 8x64x28x28 3x3", "GFLOP/s", flops / fwd * 1e-9, ceiling);
    row("conv dgrad 8x64x28x28 3x3", "GFLOP/s", flops / dgrad * 1e-9, ceiling);
    row("conv wgrad 8x64x28x28 3x3", "GFLOP/s", flops / wgrad * 1e-9, ceiling);
    for (int64_t h : {x, w, y, dx, dw})
      check(fsdprt_buffer_free(ctx, s, h), "free");
  }

  const int64_t n = int64_t(1) << 24;
  int64_t a = alloc(n * 4), bb = alloc(n * 4), out = alloc(n * 4);
  sync();
  float *pa = host(a), *pout = host(out);
  // The ceiling copies with as many threads as the kernels use.
  auto parallelMemcpy = [&] {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] {
        int64_t b = n * t / threads, e = n * (t + 1) / threads;
        std::memcpy(pout + b, pa + b, (e - b) * 4);
      });
    for (std::thread &w : workers)
      w.join();
  };
  double memcpyTime = timeIt(
      parallelMemcpy, [] {}, 5);
  double memcpyBw = 2.0 * n * 4 / memcpyTime * 1e-9; // read + write
  const int64_t shape[1] = {n};
  auto elementwise = [&](const char *name, double bytes,
                         const std::function<void()> &f) {
    row(name, "GB/s", bytes / timeIt(f, sync, 5) * 1e-9, memcpyBw);
  };
  elementwise("add f32 (16M)", 3.0 * n * 4, [&] {
    check(fsdprt_binary_forward(ctx, s, FSDPRT_F32, FSDPRT_ADD, a, 0, 1, shape,
                                bb, 0, 1, shape, out, 0),
          "add");
  });
  elementwise("mul bf16 (16M)", 3.0 * n * 2, [&] {
    check(fsdprt_binary_forward(ctx, s, FSDPRT_BF16, FSDPRT_MUL, a, 0, 1, shape,
                                bb, 0, 1, shape, out, 0),
          "mul");
  });
  elementwise("relu fwd f32 (16M)", 2.0 * n * 4, [&] {
    check(fsdprt_activation_forward(ctx, s, FSDPRT_F32, FSDPRT_RELU, a, 0, out,
                                    0, n),
          "relu");
  });
  elementwise("gelu bwd f32 (16M)", 3.0 * n * 4, [&] {
    check(fsdprt_activation_backward(ctx, s, FSDPRT_F32, FSDPRT_GELU, a, 0, bb,
                                     0, out, 0, n),
          "gelu_backward");
  });
  elementwise("scale f32 (16M)", 2.0 * n * 4, [&] {
    check(fsdprt_scale_forward(ctx, s, FSDPRT_F32, a, 0, out, 0, n, 0.5),
          "scale");
  });
  elementwise("cast f32->bf16 (16M)", 6.0 * n, [&] {
    check(fsdprt_cast(ctx, s, FSDPRT_F32, a, 0, FSDPRT_BF16, out, 0, n),
          "cast");
  });
  // GPT-J's odd half x[..., 1::2] (one element per copy), its scatter back
  // into zeros, and a running sum along rows of 1024.
  const int64_t pairs[2] = {n / 2, 2}, rowsOf1024[2] = {n / 1024, 1024};
  elementwise("strided slice [:, 1::2] f32 (16M)", 1.0 * n * 4, [&] {
    check(fsdprt_strided_slice(ctx, s, FSDPRT_F32, a, 0, 2, pairs, 1, 1, 2, 1,
                               out, 0),
          "strided_slice");
  });
  elementwise("  its backward (zeros + scatter)", 2.0 * n * 4, [&] {
    check(fsdprt_strided_slice_backward(ctx, s, FSDPRT_F32, a, 0, 2, pairs, 1,
                                        1, 2, 1, out, 0),
          "strided_slice_backward");
  });
  elementwise("cumsum f32 rows of 1024 (16M)", 2.0 * n * 4, [&] {
    check(fsdprt_cumsum(ctx, s, FSDPRT_F32, a, 0, 2, rowsOf1024, 1, 0, out, 0),
          "cumsum");
  });
  for (int64_t h : {a, bb, out})
    check(fsdprt_buffer_free(ctx, s, h), "free");

  // A language model's loss and its gradient (1024 positions, GPT-2's
  // vocabulary): the two calls against the step's one call (in place),
  // each against reading and writing the logits once.
  const int64_t rows = 1024, vocab = 50257;
  int64_t logits = alloc(rows * vocab * 4), dlogits = alloc(rows * vocab * 4),
          loss = alloc(64), dloss = alloc(64), ids = alloc(rows * 8);
  check(fsdprt_fill(ctx, s, FSDPRT_F32, dloss, 0, 1, 1.0), "fill");
  check(fsdprt_fill(ctx, s, FSDPRT_I64, ids, 0, rows, 7), "fill");
  double logitBytes = 2.0 * rows * vocab * 4;
  elementwise("cross_entropy fwd+bwd 1024x50257", logitBytes, [&] {
    check(fsdprt_cross_entropy_forward(ctx, s, FSDPRT_F32, FSDPRT_I64, logits,
                                       0, ids, 0, loss, 0, rows, vocab, vocab,
                                       FSDPRT_LOSS_MEAN, -100),
          "cross_entropy_forward");
    check(fsdprt_cross_entropy_backward(ctx, s, FSDPRT_F32, FSDPRT_I64, logits,
                                        0, ids, 0, dloss, 0, dlogits, 0, rows,
                                        vocab, vocab, FSDPRT_LOSS_MEAN, -100),
          "cross_entropy_backward");
  });
  // Repeated in place, it runs on the last call's gradient: as fast.
  elementwise("  the same in one call, in place", logitBytes, [&] {
    check(fsdprt_cross_entropy_forward_backward(
              ctx, s, FSDPRT_F32, FSDPRT_I64, logits, 0, ids, 0, dloss, 0,
              loss, 0, logits, 0, rows, vocab, vocab, FSDPRT_LOSS_MEAN, -100),
          "cross_entropy_forward_backward");
  });
  check(fsdprt_context_destroy(ctx), "destroy");
  return 0;
}
