/*===- CHeaderSmoke.c - fsdprt.h is usable from C ------------------------===*\
|* Generated code is not C++: this file compiles the C ABI header as strict  *|
|* C99 and drives a few calls, the way a lowered step does.                  *|
\*===----------------------------------------------------------------------===*/
#include "fsdp/rt/fsdprt.h"

/* The backend the conformance binary runs (cpu, cuda, cuda_emu). */
#ifndef FSDPRT_CONFORMANCE_BACKEND
#define FSDPRT_CONFORMANCE_BACKEND "cpu"
#endif

int fsdprtCHeaderSmoke(void) {
  int64_t ctx = 0, buf = 0;
  float in[4] = {1.0f, -2.0f, 3.0f, 0.5f}, out[4] = {0, 0, 0, 0};
  int i;
  if (fsdprt_context_create(FSDPRT_CONFORMANCE_BACKEND, 0, 1, 1 << 16, 1,
                            &ctx) != FSDPRT_OK)
    return 1;
  if (fsdprt_buffer_alloc(ctx, sizeof(in), &buf) != FSDPRT_OK ||
      fsdprt_copy_from_host(ctx, FSDPRT_DEFAULT_STREAM, buf, 0, in,
                            sizeof(in)) != FSDPRT_OK ||
      fsdprt_scale_forward(ctx, FSDPRT_DEFAULT_STREAM, FSDPRT_F32, buf, 0, buf,
                           0, 4, 2.0) != FSDPRT_OK ||
      fsdprt_copy_to_host(ctx, FSDPRT_DEFAULT_STREAM, out, buf, 0,
                          sizeof(out)) != FSDPRT_OK ||
      fsdprt_stream_synchronize(ctx, FSDPRT_DEFAULT_STREAM) != FSDPRT_OK)
    return 2;
  for (i = 0; i < 4; ++i)
    if (out[i] != 2.0f * in[i])
      return 3;
  return fsdprt_context_destroy(ctx) == FSDPRT_OK ? 0 : 4;
}
