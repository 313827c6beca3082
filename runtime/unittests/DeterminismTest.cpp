//===- DeterminismTest.cpp - bitwise equality across thread counts --------===//
//
// Sizes are chosen so that every kernel below really splits its work (they
// exceed each kernel's grain several times over), including OpenBLAS, whose
// thread count follows the context's.
//
//===----------------------------------------------------------------------===//
#include "TestUtil.h"

#include <cstring>

namespace fsdp {
namespace rt {
namespace test {
namespace {

class Determinism : public ::testing::TestWithParam<std::string> {};

/// Runs a mix of forward and backward kernels; returns all outputs' bytes.
std::vector<std::vector<float>> runWorkload(const std::string &backend,
                                            int threads) {
  Device dev(backend, threads, int64_t(256) << 20);
  std::vector<std::vector<float>> outs;
  auto keep = [&](int64_t buf, int64_t n) {
    outs.push_back(dev.download(buf, n));
  };
  // linear forward/backward: m=256, k=128, n=192.
  const int64_t m = 256, k = 128, n = 192;
  int64_t x = dev.upload(randomVector(m * k, 1)),
          w = dev.upload(randomVector(n * k, 2)),
          b = dev.upload(randomVector(n, 3)),
          dy = dev.upload(randomVector(m * n, 4));
  int64_t y = dev.alloc(m * n * 4), dx = dev.alloc(m * k * 4),
          dw = dev.alloc(n * k * 4), db = dev.alloc(n * 4);
  fsdprt_linear_forward(dev.ctx, dev.stream, FSDPRT_F32, x, 0, w, 0, b, 0, y, 0,
                        m, k, n);
  fsdprt_linear_backward(dev.ctx, dev.stream, FSDPRT_F32, x, 0, w, 0, dy, 0, dx,
                         0, dw, 0, db, 0, m, k, n);
  keep(y, m * n), keep(dx, m * k), keep(dw, n * k), keep(db, n);

  // layer_norm backward over 512 rows of 256 (dw/db are column reductions).
  const int64_t rows = 512, d = 256;
  int64_t lx = dev.upload(randomVector(rows * d, 5)),
          lw = dev.upload(randomVector(d, 6)),
          ldy = dev.upload(randomVector(rows * d, 7));
  int64_t ldx = dev.alloc(rows * d * 4), ldw = dev.alloc(d * 4),
          ldb = dev.alloc(d * 4);
  fsdprt_layer_norm_backward(dev.ctx, dev.stream, FSDPRT_F32, lx, 0, lw, 0, ldy,
                             0, ldx, 0, ldw, 0, ldb, 0, rows, d, 1e-5);
  keep(ldx, rows * d), keep(ldw, d), keep(ldb, d);

  // reduce_sum over dim 0 and the broadcast backward of mul.
  const int64_t shape[2] = {rows, d}, dims[1] = {0}, bshape[1] = {d};
  int64_t rs = dev.alloc(d * 4), gda = dev.alloc(rows * d * 4),
          gdb = dev.alloc(d * 4);
  fsdprt_reduce_forward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_REDUCE_SUM, lx,
                        0, 2, shape, 1, dims, rs, 0);
  fsdprt_binary_backward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_MUL, lx, 0, 2,
                         shape, lw, 0, 1, bshape, ldy, 0, gda, 0, gdb, 0);
  keep(rs, d), keep(gda, rows * d), keep(gdb, d);

  // embedding backward with many repeated ids.
  std::vector<int32_t> ids(rows);
  for (int64_t i = 0; i < rows; ++i)
    ids[i] = static_cast<int32_t>((i * 7) % 13);
  int64_t bids = dev.upload(ids), dtab = dev.alloc(13 * d * 4);
  fsdprt_embedding_backward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_I32, bids,
                            0, ldy, 0, dtab, 0, rows, 13, d);
  keep(dtab, 13 * d);

  // attention backward: B=1, T=128, H=4 (2 kv heads), D=32.
  const int64_t t = 128, h = 4, hk = 2, hd = 32;
  int64_t q = dev.upload(randomVector(t * h * hd, 8)),
          kk = dev.upload(randomVector(t * hk * hd, 9)),
          v = dev.upload(randomVector(t * hk * hd, 10)),
          dout = dev.upload(randomVector(t * h * hd, 11));
  int64_t dq = dev.alloc(t * h * hd * 4), dk = dev.alloc(t * hk * hd * 4),
          dv = dev.alloc(t * hk * hd * 4);
  fsdprt_attention_backward(dev.ctx, dev.stream, FSDPRT_F32, q, 0, kk, 0, v, 0,
                            dout, 0, 0, 0, 0, 0, dq, 0, dk, 0, dv, 0, 1, t, t,
                            h, hk, hd, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0);
  keep(dq, t * h * hd), keep(dk, t * hk * hd), keep(dv, t * hk * hd);

  // Whole-tensor reductions: losses and the gradient norm over 131072 values.
  const int64_t big = rows * d;
  int64_t loss = dev.alloc(4), sq = dev.alloc(4);
  fsdprt_mse_loss_forward(dev.ctx, dev.stream, FSDPRT_F32, lx, 0, ldy, 0, loss,
                          0, big, FSDPRT_LOSS_MEAN);
  fsdprt_grad_sq_norm(dev.ctx, dev.stream, FSDPRT_F32, ldx, 0, big, sq, 0, 0);
  keep(loss, 1), keep(sq, 1);
  std::vector<int32_t> targets(rows);
  for (int64_t i = 0; i < rows; ++i)
    targets[i] = static_cast<int32_t>((i * 31) % d);
  int64_t bt = dev.upload(targets), ce = dev.alloc(4);
  fsdprt_cross_entropy_forward(dev.ctx, dev.stream, FSDPRT_F32, FSDPRT_I32, lx,
                               0, bt, 0, ce, 0, rows, d, d, FSDPRT_LOSS_MEAN,
                               -100);
  keep(ce, 1);

  // batch_norm training backward: 16 channels of 64 x 64 values.
  int64_t bw = dev.upload(randomVector(16, 12)),
          brm = dev.upload(randomVector(16, 13)),
          brv = dev.upload(std::vector<float>(16, 1.0f)),
          bdx = dev.alloc(big * 4), bdw = dev.alloc(16 * 4),
          bdb = dev.alloc(16 * 4);
  fsdprt_batch_norm_backward(dev.ctx, dev.stream, FSDPRT_F32, lx, 0, bw, 0, brm,
                             0, brv, 0, ldy, 0, bdx, 0, bdw, 0, bdb, 0, 64, 16,
                             128, 1e-5, 1);
  keep(bdx, big), keep(bdw, 16), keep(bdb, 16);
  // bf16 storage: direct pointwise loops and staged row kernels.
  int64_t hx = dev.alloc(big * 2), hy = dev.alloc(big * 2),
          hln = dev.alloc(big * 2);
  fsdprt_cast(dev.ctx, dev.stream, FSDPRT_F32, lx, 0, FSDPRT_BF16, hx, 0, big);
  fsdprt_activation_forward(dev.ctx, dev.stream, FSDPRT_BF16, FSDPRT_GELU, hx,
                            0, hy, 0, big);
  fsdprt_layer_norm_forward(dev.ctx, dev.stream, FSDPRT_BF16, hy, 0, 0, 0, 0, 0,
                            hln, 0, rows, d, 1e-5);
  keep(hy, big / 2), keep(hln, big / 2); // raw bf16 bits, compared bytewise
  dev.sync();
  return outs;
}

TEST_P(Determinism, OneAndTwoThreadsGiveBitwiseIdenticalResults) {
  auto one = runWorkload(GetParam(), 1);
  auto two = runWorkload(GetParam(), 2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].size(), two[i].size());
    EXPECT_EQ(std::memcmp(one[i].data(), two[i].data(), one[i].size() * 4), 0)
        << "output #" << i << " differs between 1 and 2 threads";
  }
}

FSDPRT_INSTANTIATE_CONFORMANCE(Determinism);

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
