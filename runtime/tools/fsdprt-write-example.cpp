//===- fsdprt-write-example.cpp - Writes a known safetensors file ---------===//
//
// Used by python_tests/test_safetensors_interop.py to check that files written
// through the C ABI load in the reference `safetensors` package. Tensors are
// staged through arena buffers, as a checkpointing step would do.
//
// Usage: fsdprt-write-example OUT.safetensors
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/fsdprt.h"
#include "fsdp/rt/math/Half.h"

#include <cstdio>
#include <vector>

static bool check(int32_t status, const char *what) {
  if (status == FSDPRT_OK)
    return true;
  std::fprintf(stderr, "fsdprt-write-example: %s failed: %s\n", what,
               fsdprt_last_error());
  return false;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.safetensors\n", argv[0]);
    return 2;
  }
  int64_t ctx, writer, buf;
  if (!check(fsdprt_context_create("cpu", 0, 1, 1 << 20, 1, &ctx), "context"))
    return 1;
  // weight[2,3] = 0.5 * i, written from an arena buffer.
  std::vector<float> weight{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f};
  const int64_t weightShape[2] = {2, 3};
  std::vector<uint16_t> bias;
  for (float v : {1.0f, -2.0f, 0.3f})
    bias.push_back(fsdp::rt::floatToBf16(v));
  const int64_t biasShape[1] = {3};
  std::vector<uint16_t> half;
  for (float v : {0.5f, -1.5f, 65504.0f, 5.9604644775390625e-8f})
    half.push_back(fsdp::rt::floatToF16(v));
  const int64_t halfShape[2] = {2, 2};
  std::vector<int64_t> ids{0, 1, -7, int64_t(1) << 40};
  const int64_t idsShape[1] = {4};
  std::vector<int32_t> counts{3, -4};
  const int64_t countsShape[1] = {2};
  bool ok =
      check(fsdprt_buffer_alloc(ctx, 24, &buf), "alloc") &&
      check(fsdprt_copy_from_host(ctx, FSDPRT_DEFAULT_STREAM, buf, 0,
                                  weight.data(), 24),
            "copy") &&
      check(fsdprt_ckpt_writer_create(argv[1], &writer), "writer") &&
      check(fsdprt_ckpt_writer_add_buffer(writer, ctx, "layers.0.weight",
                                          FSDPRT_F32, 2, weightShape, buf, 0),
            "add weight") &&
      check(fsdprt_ckpt_writer_add(writer, "layers.0.bias", FSDPRT_BF16, 1,
                                   biasShape, bias.data()),
            "add bias") &&
      check(fsdprt_ckpt_writer_add(writer, "half", FSDPRT_F16, 2, halfShape,
                                   half.data()),
            "add half") &&
      check(fsdprt_ckpt_writer_add(writer, "ids", FSDPRT_I64, 1, idsShape,
                                   ids.data()),
            "add ids") &&
      check(fsdprt_ckpt_writer_add(writer, "counts", FSDPRT_I32, 1, countsShape,
                                   counts.data()),
            "add counts") &&
      check(fsdprt_ckpt_writer_set_metadata(writer, "step", "3"), "metadata") &&
      check(fsdprt_ckpt_writer_finish(writer), "finish");
  check(fsdprt_context_destroy(ctx), "destroy");
  return ok ? 0 : 1;
}
