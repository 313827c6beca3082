//===- CApiErrorTest.cpp - bad calls at the C ABI return errors -----------===//
#include "TestUtil.h"

extern "C" int fsdprtCHeaderSmoke(void);

namespace fsdp {
namespace rt {
namespace test {
namespace {

class CApiErrors : public ::testing::TestWithParam<std::string> {};

/// Expects `status` and a message containing `fragment`.
#define EXPECT_RT_ERROR(call, status, fragment)                                \
  do {                                                                         \
    EXPECT_EQ((call), status) << #call;                                        \
    std::string msg_ = fsdprt_last_error();                                    \
    EXPECT_NE(msg_.find(fragment), std::string::npos)                          \
        << "expected '" << fragment << "' in: " << msg_;                       \
  } while (0)

TEST_P(CApiErrors, ContextCreationArguments) {
  int64_t ctx;
  EXPECT_RT_ERROR(fsdprt_context_create("tpu", 0, 1, 1024, 1, &ctx),
                  FSDPRT_ERR_UNSUPPORTED, "available: cpu");
  EXPECT_RT_ERROR(
      fsdprt_context_create(GetParam().c_str(), 2, 2, 1024, 1, &ctx),
      FSDPRT_ERR_INVALID_ARGUMENT, "rank 2");
  EXPECT_RT_ERROR(fsdprt_context_create(GetParam().c_str(), 0, 1, 0, 1, &ctx),
                  FSDPRT_ERR_INVALID_ARGUMENT, "arena size");
  EXPECT_RT_ERROR(fsdprt_context_create(nullptr, 0, 1, 1024, 1, &ctx),
                  FSDPRT_ERR_INVALID_ARGUMENT, "backend must not be null");
  EXPECT_RT_ERROR(
      fsdprt_context_create(GetParam().c_str(), 0, 1, 1024, 1, nullptr),
      FSDPRT_ERR_INVALID_ARGUMENT, "out_ctx");
}

TEST_P(CApiErrors, NullStaleAndForgedHandles) {
  int64_t ctx;
  RT_OK(fsdprt_context_create(GetParam().c_str(), 0, 1, 1 << 16, 1, &ctx));
  int32_t rank;
  RT_OK(fsdprt_context_rank(ctx, &rank));
  RT_OK(fsdprt_context_destroy(ctx));
  EXPECT_RT_ERROR(fsdprt_context_rank(ctx, &rank), FSDPRT_ERR_INVALID_HANDLE,
                  "fsdprt_context_rank: invalid context handle");
  EXPECT_RT_ERROR(fsdprt_context_destroy(ctx), FSDPRT_ERR_INVALID_HANDLE,
                  "context");
  EXPECT_RT_ERROR(fsdprt_context_synchronize(0), FSDPRT_ERR_INVALID_HANDLE,
                  "context");
  EXPECT_RT_ERROR(fsdprt_context_synchronize(-5), FSDPRT_ERR_INVALID_HANDLE,
                  "context");
  EXPECT_RT_ERROR(fsdprt_context_synchronize(0x7fffffff00000003),
                  FSDPRT_ERR_INVALID_HANDLE, "context");

  Device dev(GetParam());
  int64_t buf = dev.alloc(64);
  RT_OK(fsdprt_buffer_free(dev.ctx, dev.stream, buf));
  EXPECT_RT_ERROR(fsdprt_fill(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, 1, 0.0),
                  FSDPRT_ERR_INVALID_HANDLE, "dst: invalid buffer handle");
  EXPECT_RT_ERROR(fsdprt_buffer_free(dev.ctx, dev.stream, buf),
                  FSDPRT_ERR_INVALID_HANDLE, "buffer");
  // A new buffer in the same slot gets a new generation: the old handle
  // stays invalid.
  int64_t again = dev.alloc(64);
  EXPECT_NE(again, buf);
  EXPECT_EQ(fsdprt_fill(dev.ctx, dev.stream, FSDPRT_F32, buf, 0, 1, 0.0),
            FSDPRT_ERR_INVALID_HANDLE);
  EXPECT_RT_ERROR(fsdprt_stream_synchronize(dev.ctx, 77),
                  FSDPRT_ERR_INVALID_HANDLE, "stream");
  EXPECT_RT_ERROR(fsdprt_stream_destroy(dev.ctx, FSDPRT_DEFAULT_STREAM),
                  FSDPRT_ERR_INVALID_ARGUMENT, "default stream");
  EXPECT_RT_ERROR(fsdprt_event_record(dev.ctx, 3, dev.stream),
                  FSDPRT_ERR_INVALID_HANDLE, "event");
  EXPECT_RT_ERROR(fsdprt_ckpt_reader_close(99), FSDPRT_ERR_INVALID_HANDLE,
                  "checkpoint reader");
  EXPECT_RT_ERROR(fsdprt_ckpt_writer_finish(99), FSDPRT_ERR_INVALID_HANDLE,
                  "checkpoint writer");
  EXPECT_RT_ERROR(fsdprt_buffer_size(dev.ctx, again, nullptr),
                  FSDPRT_ERR_INVALID_ARGUMENT, "out_bytes");
  EXPECT_RT_ERROR(
      fsdprt_copy_from_host(dev.ctx, dev.stream, again, 0, nullptr, 4),
      FSDPRT_ERR_INVALID_ARGUMENT, "src");
}

TEST_P(CApiErrors, SizeMismatchesAndBadDims) {
  Device dev(GetParam());
  int64_t small = dev.alloc(16), big = dev.alloc(4096);
  // x needs 4 * 8 floats; the buffer holds 4.
  EXPECT_RT_ERROR(fsdprt_linear_forward(dev.ctx, dev.stream, FSDPRT_F32, small,
                                        0, big, 0, 0, 0, big, 0, 4, 8, 2),
                  FSDPRT_ERR_OUT_OF_RANGE, "x: bytes [0, 128)");
  // An offset that pushes the operand past the end.
  EXPECT_RT_ERROR(fsdprt_scale_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                       4000, big, 0, 100, 2.0),
                  FSDPRT_ERR_OUT_OF_RANGE, "x:");
  EXPECT_RT_ERROR(fsdprt_scale_forward(dev.ctx, dev.stream, FSDPRT_F32, big, -4,
                                       big, 0, 1, 2.0),
                  FSDPRT_ERR_OUT_OF_RANGE, "x:");
  EXPECT_RT_ERROR(fsdprt_linear_forward(dev.ctx, dev.stream, FSDPRT_F32, big, 0,
                                        big, 0, 0, 0, big, 0, -1, 8, 2),
                  FSDPRT_ERR_INVALID_ARGUMENT, "m must be non-negative");
  // Overflowing element counts are caught, not wrapped.
  EXPECT_RT_ERROR(fsdprt_linear_forward(dev.ctx, dev.stream, FSDPRT_F32, big, 0,
                                        big, 0, 0, 0, big, 0, 1ll << 40,
                                        1ll << 40, 2),
                  FSDPRT_ERR_INVALID_ARGUMENT, "overflows");
  const int64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_RT_ERROR(fsdprt_softmax_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                         0, big, 0, 9, shape, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "rank 9");
  EXPECT_RT_ERROR(fsdprt_softmax_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                         0, big, 0, 2, nullptr, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "null shape");
  EXPECT_RT_ERROR(fsdprt_softmax_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                         0, big, 0, 2, shape, 2),
                  FSDPRT_ERR_INVALID_ARGUMENT, "dim 2 is out of range");
  const int64_t a[2] = {2, 3}, b[2] = {4, 3};
  EXPECT_RT_ERROR(fsdprt_binary_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                        FSDPRT_ADD, big, 0, 2, a, big, 0, 2, b,
                                        big, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "do not broadcast");
  EXPECT_RT_ERROR(fsdprt_attention_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                           0, big, 0, big, 0, big, 0, 0, 0, 1,
                                           2, 2,
                                           3, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "does not divide");
  // Token strides of q and k / v cover at least a token's heads.
  EXPECT_RT_ERROR(fsdprt_attention_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                           0, big, 0, big, 0, big, 0, 0, 0, 1,
                                           2, 2,
                                           2, 2, 4, 7, 0, 0, 0, 0, 0, 0, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT,
                  "q_row 7 is less than heads x head_dim = 8");
  // An attention bias broadcasts only from 1 (batch 2, heads 2 here).
  EXPECT_RT_ERROR(fsdprt_attention_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                           0, big, 0, big, 0, big, 0, 0, 0, 2,
                                           2, 2,
                                           2, 2, 2, 0, 0, 0, 0, big, 0, 3, 1),
                  FSDPRT_ERR_INVALID_ARGUMENT,
                  "bias_batch 3 is neither 1 nor the batch 2");
  EXPECT_RT_ERROR(fsdprt_attention_backward(dev.ctx, dev.stream, FSDPRT_F32,
                                            big, 0, big, 0, big, 0, big, 0,
                                            0, 0, 0, 0, big, 0, big, 0, big, 0,
                                            2, 2, 2, 2,
                                            2, 2, 0, 0, 0, 0, big, 0, big, 0, 1,
                                            3),
                  FSDPRT_ERR_INVALID_ARGUMENT,
                  "bias_heads 3 is neither 1 nor the heads 2");
  EXPECT_RT_ERROR(fsdprt_attention_backward(dev.ctx, dev.stream, FSDPRT_F32,
                                            big, 0, big, 0, big, 0, big, 0,
                                            0, 0, 0, 0, big, 0, big, 0, big, 0,
                                            2, 2, 2, 2,
                                            2, 2, 0, 0, 0, 0, 0, 0, big, 0, 1,
                                            1),
                  FSDPRT_ERR_INVALID_ARGUMENT, "dbias without a bias");
  int64_t host = 0;
  EXPECT_RT_ERROR(fsdprt_buffer_alloc_host(dev.ctx, 0, &host),
                  FSDPRT_ERR_INVALID_ARGUMENT,
                  "host buffer size must be positive, got 0");
  EXPECT_RT_ERROR(fsdprt_rope_forward(dev.ctx, dev.stream, FSDPRT_F32, big, 0,
                                      big, 0, 1, 2, 1, 3, 10000.0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "must be even");
  const int64_t sizes[2] = {1, 1}, parts[2] = {big, big}, offs[2] = {0, 0};
  EXPECT_RT_ERROR(fsdprt_split(dev.ctx, dev.stream, FSDPRT_F32, big, 0, 2, a, 1,
                               2, sizes, parts, offs),
                  FSDPRT_ERR_INVALID_ARGUMENT, "sum to 2");
  const int64_t perm[2] = {0, 0};
  EXPECT_RT_ERROR(fsdprt_transpose_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                           0, big, 0, 2, a, perm),
                  FSDPRT_ERR_INVALID_ARGUMENT, "not a permutation");
  EXPECT_RT_ERROR(fsdprt_dropout_forward(dev.ctx, dev.stream, FSDPRT_F32, big,
                                         0, big, 0, 4, 1.5, 0, 0, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "not in [0, 1]");
  EXPECT_RT_ERROR(fsdprt_adamw_step(dev.ctx, dev.stream, FSDPRT_F32, big, 0,
                                    big, 0, big, 0, big, 0, 4, 0, 1e-3, 0.9,
                                    0.999, 1e-8, 0.01, 0, 0, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "step must be >= 1");
  EXPECT_RT_ERROR(fsdprt_batch_norm_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                            big, 0, 0, 0, 0, 0, big, 0, big, 0,
                                            big, 0, 1, 2, 1, 1e-5, 0.1, 1),
                  FSDPRT_ERR_INVALID_ARGUMENT, "more than 1 value per channel");
}

TEST_P(CApiErrors, MultiTensorUpdatesNameTheBadTensor) {
  Device dev(GetParam());
  int64_t small = dev.alloc(16), big = dev.alloc(4096);
  // Tensor 1's exp_avg_sq (its fourth operand) holds 4 floats, not 8.
  const int64_t buffers[8] = {big, big, big, big, big, big, big, small},
                offsets[8] = {0, 1024, 2048, 3072, 128, 1152, 2176, 0},
                numels[2] = {8, 8};
  EXPECT_RT_ERROR(fsdprt_adamw_multi_step(dev.ctx, dev.stream, FSDPRT_F32, 2,
                                          buffers, offsets, numels, 1, 1e-3,
                                          0.9, 0.999, 1e-8, 0.01, 0, 0, 0),
                  FSDPRT_ERR_OUT_OF_RANGE, "exp_avg_sq of tensor 1");
  const int64_t negative[2] = {8, -1};
  EXPECT_RT_ERROR(fsdprt_adamw_multi_step(dev.ctx, dev.stream, FSDPRT_F32, 2,
                                          buffers, offsets, negative, 1, 1e-3,
                                          0.9, 0.999, 1e-8, 0.01, 0, 0, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "numel of tensor 1");
  EXPECT_RT_ERROR(fsdprt_lion_multi_step(dev.ctx, dev.stream, FSDPRT_F32, 0,
                                         buffers, offsets, numels, 1, 1e-3,
                                         0.9, 0.99, 0.0, 0, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "count");
  EXPECT_RT_ERROR(fsdprt_sgd_multi_step(dev.ctx, dev.stream, FSDPRT_F32, 2,
                                        nullptr, offsets, numels, 1, 0.1, 0.0,
                                        0.0, 0.0, 0, 0, 0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "must not be null");
}

TEST_P(CApiErrors, UnknownDtypesAndOptionCodes) {
  Device dev(GetParam());
  int64_t buf = dev.alloc(1024);
  EXPECT_RT_ERROR(
      fsdprt_scale_forward(dev.ctx, dev.stream, 9, buf, 0, buf, 0, 4, 1.0),
      FSDPRT_ERR_INVALID_ARGUMENT, "unknown dtype code 9");
  EXPECT_RT_ERROR(fsdprt_scale_forward(dev.ctx, dev.stream, FSDPRT_I32, buf, 0,
                                       buf, 0, 4, 1.0),
                  FSDPRT_ERR_INVALID_ARGUMENT, "not a floating-point type");
  EXPECT_RT_ERROR(fsdprt_activation_forward(dev.ctx, dev.stream, FSDPRT_F32, 7,
                                            buf, 0, buf, 0, 4),
                  FSDPRT_ERR_INVALID_ARGUMENT, "unknown activation kind 7");
  EXPECT_RT_ERROR(fsdprt_embedding_forward(dev.ctx, dev.stream, FSDPRT_F32,
                                           FSDPRT_F32, buf, 0, buf, 0, buf, 0,
                                           1, 1, 1),
                  FSDPRT_ERR_INVALID_ARGUMENT, "must be I32 or I64");
  EXPECT_RT_ERROR(fsdprt_mse_loss_forward(dev.ctx, dev.stream, FSDPRT_F32, buf,
                                          0, buf, 0, buf, 0, 4, 5),
                  FSDPRT_ERR_INVALID_ARGUMENT, "unknown loss reduction 5");
  int64_t writer;
  RT_OK(fsdprt_ckpt_writer_create("/tmp/fsdprt_unused.safetensors", &writer));
  const int64_t shape[1] = {1};
  float v = 0;
  EXPECT_RT_ERROR(fsdprt_ckpt_writer_add(writer, "x", -1, 1, shape, &v),
                  FSDPRT_ERR_INVALID_ARGUMENT, "unknown dtype code -1");
  RT_OK(fsdprt_ckpt_writer_discard(writer));
}

TEST_P(CApiErrors, ArenaLimitsAndHighWaterMark) {
  Device dev(GetParam(), 1, 4096);
  int64_t a, b, c;
  RT_OK(fsdprt_buffer_alloc(dev.ctx, 1000, &a)); // rounds to 1024
  RT_OK(fsdprt_buffer_alloc(dev.ctx, 2000, &b)); // 2048 at 1024
  EXPECT_RT_ERROR(fsdprt_buffer_alloc(dev.ctx, 2000, &c),
                  FSDPRT_ERR_OUT_OF_MEMORY, "arena out of memory");
  EXPECT_RT_ERROR(fsdprt_buffer_alloc_at(dev.ctx, 512, 64, &c),
                  FSDPRT_ERR_INVALID_ARGUMENT, "overlaps a live buffer");
  EXPECT_RT_ERROR(fsdprt_buffer_alloc_at(dev.ctx, 3100, 64, &c),
                  FSDPRT_ERR_INVALID_ARGUMENT, "multiple of 64");
  EXPECT_RT_ERROR(fsdprt_buffer_alloc_at(dev.ctx, 4032, 128, &c),
                  FSDPRT_ERR_OUT_OF_MEMORY, "exceeds the arena capacity");
  RT_OK(fsdprt_buffer_free(dev.ctx, dev.stream, a));
  dev.sync();
  RT_OK(fsdprt_buffer_alloc(dev.ctx, 500, &c)); // reuses the first gap
  int64_t peak, extent, inUse;
  RT_OK(fsdprt_arena_high_water(dev.ctx, &peak, &extent));
  RT_OK(fsdprt_arena_in_use(dev.ctx, &inUse));
  EXPECT_EQ(peak, 1024 + 2048);
  EXPECT_EQ(extent, 3072);
  EXPECT_EQ(inUse, 512 + 2048);
  void *p0, *p1;
  RT_OK(fsdprt_buffer_host_ptr(dev.ctx, c, 0, &p0));
  RT_OK(fsdprt_buffer_host_ptr(dev.ctx, b, 0, &p1));
  EXPECT_EQ(static_cast<char *>(p1) - static_cast<char *>(p0), 1024);
}

TEST_P(CApiErrors, ArenaBasePlacesASecondProgramAndHighWaterRestarts) {
  Device dev(GetParam(), 1, 4096);
  int64_t first, second, third;
  RT_OK(fsdprt_buffer_alloc_at(dev.ctx, 0, 1024, &first));
  // A second program's offset 0 lands after the first's 1024 bytes.
  RT_OK(fsdprt_context_set_arena_base(dev.ctx, 1024));
  RT_OK(fsdprt_buffer_alloc_at(dev.ctx, 0, 2048, &second));
  EXPECT_RT_ERROR(fsdprt_buffer_alloc_at(dev.ctx, 2048, 1088, &third),
                  FSDPRT_ERR_OUT_OF_MEMORY, "exceeds the arena capacity");
  int64_t peak, extent;
  RT_OK(fsdprt_arena_high_water(dev.ctx, &peak, &extent));
  EXPECT_EQ(extent, 1024 + 2048);
  EXPECT_RT_ERROR(fsdprt_context_set_arena_base(dev.ctx, 100),
                  FSDPRT_ERR_INVALID_ARGUMENT, "multiple of 64");
  RT_OK(fsdprt_buffer_free(dev.ctx, dev.stream, second));
  RT_OK(fsdprt_context_set_arena_base(dev.ctx, 0));
  dev.sync();
  RT_OK(fsdprt_arena_high_water(dev.ctx, &peak, &extent));
  EXPECT_EQ(peak, 3072);
  RT_OK(fsdprt_arena_reset_high_water(dev.ctx));
  RT_OK(fsdprt_arena_high_water(dev.ctx, &peak, &extent));
  EXPECT_EQ(peak, 1024); // what is live now: the first buffer
  EXPECT_EQ(extent, 1024);
}

FSDPRT_INSTANTIATE_CONFORMANCE(CApiErrors);

TEST(CHeader, CompilesAsC99AndRunsASequenceOfCalls) {
  EXPECT_EQ(fsdprtCHeaderSmoke(), 0) << fsdprt_last_error();
}

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
