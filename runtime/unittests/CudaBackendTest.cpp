//===- CudaBackendTest.cpp - The "cuda" backend registers and fails cleanly
//===//
//
// Runs on every machine of a CUDA-enabled build: with a usable GPU the
// context is created (the GPU suites live in fsdprt_cuda_unittests); without
// one, creation must fail with FSDPRT_ERR_UNSUPPORTED and say why, never
// crash.
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/fsdprt.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(CudaBackend, IsRegisteredByName) {
  int64_t ctx = 0;
  EXPECT_EQ(fsdprt_context_create("no-such-backend", 0, 1, 1024, 1, &ctx),
            FSDPRT_ERR_UNSUPPORTED);
  std::string msg = fsdprt_last_error();
  EXPECT_NE(msg.find("cuda"), std::string::npos)
      << "expected 'cuda' among the available backends in: " << msg;
}

TEST(CudaBackend, ContextCreationSucceedsOrFailsCleanly) {
  int64_t ctx = 0;
  int32_t status =
      fsdprt_context_create("cuda", 0, 1, int64_t(1) << 20, 1, &ctx);
  if (status == FSDPRT_OK) {
    EXPECT_EQ(fsdprt_context_destroy(ctx), FSDPRT_OK) << fsdprt_last_error();
    return;
  }
  std::string msg = fsdprt_last_error();
  EXPECT_EQ(status, FSDPRT_ERR_UNSUPPORTED) << msg;
  EXPECT_NE(msg.find("cuda backend: no"), std::string::npos)
      << "expected a 'no usable CUDA device' message, got: " << msg;
}

} // namespace
