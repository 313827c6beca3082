//===- CApiCore.cpp - C ABI: errors, contexts, buffers, streams, events ---===//
#include "CApiSupport.h"

#include "fsdp/rt/fsdprt.h"

#include <cmath>
#include <mutex>
#include <string>

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {
thread_local std::string lastError;
std::mutex contextsMutex;
HandleTable<Context> &contexts() {
  static HandleTable<Context> table("context");
  return table;
}
} // namespace

void capi::setLastError(const std::string &message) { lastError = message; }

std::shared_ptr<Context> capi::getContext(int64_t handle) {
  std::lock_guard<std::mutex> lock(contextsMutex);
  return contexts().get(handle);
}

int64_t capi::nonNegative(int64_t v, const char *what) {
  if (v < 0)
    fail(Status::InvalidArgument, what, " must be non-negative, got ", v);
  return v;
}

void capi::requirePositive(int64_t v, const char *what) {
  if (v <= 0)
    fail(Status::InvalidArgument, what, " must be positive, got ", v);
}

DType capi::indexDType(int32_t code, const char *what) {
  DType t = dtypeFromCode(code, what);
  if (t != DType::I32 && t != DType::I64)
    fail(Status::InvalidArgument, what,
         ": index dtype must be I32 or I64, got ", dtypeName(t));
  return t;
}

int32_t capi::normalizeDim(int64_t dim, size_t rank, const char *what) {
  int64_t r = static_cast<int64_t>(rank);
  if (dim < -r || dim >= r)
    fail(Status::InvalidArgument, what, " ", dim, " is out of range for rank ",
         rank);
  return static_cast<int32_t>(dim < 0 ? dim + r : dim);
}

int64_t capi::mul(int64_t a, int64_t b) {
  if (a != 0 && b > INT64_MAX / a)
    fail(Status::InvalidArgument, "size ", a, " x ", b, " overflows int64");
  return a * b;
}

Launch::Launch(int64_t ctx, int64_t stream, int32_t dtype, const char *op)
    : Launch(ctx, stream, op) {
  dtype_ = floatDTypeFromCode(dtype, "dtype");
}

Launch::Launch(int64_t ctx, int64_t stream, const char *op)
    : ctx_(getContext(ctx)), op_(op) {
  stream_ = ctx_->stream(stream);
  host_ = ctx_->isHostStream(stream);
}

void *Launch::operand(int64_t buf, int64_t off, int64_t numel,
                      const char *what) {
  return operand(buf, off, numel, dtype_, what);
}

void *Launch::operand(int64_t buf, int64_t off, int64_t numel, DType dt,
                      const char *what) {
  void *p = ctx_->resolve(buf, off, mul(numel, dtypeSize(dt)), what);
  if (host_ && !ctx_->backend().hostAccessible() && !ctx_->isHostBuffer(buf))
    fail(Status::InvalidArgument, what, ": buffer ", buf,
         " is in device memory, which an operation on a host stream cannot "
         "read; copy it to a host buffer first");
  return p;
}

void *Launch::optional(int64_t buf, int64_t off, int64_t numel,
                       const char *what) {
  return buf == 0 ? nullptr : operand(buf, off, numel, what);
}

void Launch::enqueue(std::function<void()> work) {
  stream_->enqueue(op_, std::move(work));
}

extern "C" {

const char *fsdprt_last_error(void) { return lastError.c_str(); }

int32_t fsdprt_context_create(const char *backend, int32_t rank,
                              int32_t world_size, int64_t arena_bytes,
                              int32_t num_threads, int64_t *out_ctx) {
  return guarded(__func__, [&] {
    requireOut(backend, "backend");
    requireOut(out_ctx, "out_ctx");
    auto ctx = std::make_shared<Context>(backend, rank, world_size, arena_bytes,
                                         num_threads);
    std::lock_guard<std::mutex> lock(contextsMutex);
    *out_ctx = contexts().insert(std::move(ctx));
  });
}

int32_t fsdprt_context_destroy(int64_t ctx) {
  return guarded(__func__, [&] {
    std::shared_ptr<Context> c;
    {
      std::lock_guard<std::mutex> lock(contextsMutex);
      c = contexts().remove(ctx);
    }
    // Report a stream failure nobody synchronised on, then tear down.
    c->synchronizeAll();
  });
}

int32_t fsdprt_context_rank(int64_t ctx, int32_t *out) {
  return guarded(__func__, [&] {
    requireOut(out, "out");
    *out = getContext(ctx)->rank();
  });
}

int32_t fsdprt_context_world_size(int64_t ctx, int32_t *out) {
  return guarded(__func__, [&] {
    requireOut(out, "out");
    *out = getContext(ctx)->worldSize();
  });
}

int32_t fsdprt_arena_high_water(int64_t ctx, int64_t *out_bytes,
                                int64_t *out_extent) {
  return guarded(__func__, [&] {
    requireOut(out_bytes, "out_bytes");
    requireOut(out_extent, "out_extent");
    auto c = getContext(ctx);
    *out_bytes = c->arena().highWaterBytes();
    *out_extent = c->arena().highWaterExtent();
  });
}

int32_t fsdprt_arena_in_use(int64_t ctx, int64_t *out_bytes) {
  return guarded(__func__, [&] {
    requireOut(out_bytes, "out_bytes");
    *out_bytes = getContext(ctx)->arena().bytesInUse();
  });
}

int32_t fsdprt_context_synchronize(int64_t ctx) {
  return guarded(__func__, [&] { getContext(ctx)->synchronizeAll(); });
}

int32_t fsdprt_arena_reset_high_water(int64_t ctx) {
  return guarded(__func__, [&] {
    auto c = getContext(ctx);
    c->arena().resetHighWater();
    c->backend().resetDeviceHighWater();
  });
}

int32_t fsdprt_device_high_water(int64_t ctx, int64_t *out_bytes) {
  return guarded(__func__, [&] {
    requireOut(out_bytes, "out_bytes");
    auto c = getContext(ctx);
    int64_t backend = c->backend().deviceHighWater();
    *out_bytes = backend < 0 ? -1 : backend + c->communicatorDeviceBytes();
  });
}

int32_t fsdprt_comm_device_bytes(int64_t ctx, int64_t *out_bytes) {
  return guarded(__func__, [&] {
    requireOut(out_bytes, "out_bytes");
    *out_bytes = getContext(ctx)->communicatorDeviceBytes();
  });
}

int32_t fsdprt_device_reserve(int64_t ctx, int64_t *out_gemm_workspace_bytes,
                              int64_t *out_scratch_bytes, const char **out_op) {
  return guarded(__func__, [&] {
    requireOut(out_gemm_workspace_bytes, "out_gemm_workspace_bytes");
    requireOut(out_scratch_bytes, "out_scratch_bytes");
    requireOut(out_op, "out_op");
    static thread_local std::string op;
    Backend::DeviceReserve r = getContext(ctx)->backend().deviceReserve();
    *out_gemm_workspace_bytes = r.gemmWorkspaceBytes;
    *out_scratch_bytes = r.scratchBytes;
    op = r.scratchOp;
    *out_op = op.c_str();
  });
}

int32_t fsdprt_context_set_arena_base(int64_t ctx, int64_t base) {
  return guarded(__func__, [&] { getContext(ctx)->setArenaBase(base); });
}

int32_t fsdprt_context_set_lr_factor(int64_t ctx, double factor) {
  return guarded(__func__, [&] {
    if (!std::isfinite(factor) || factor < 0)
      fail(Status::InvalidArgument,
           "the learning-rate factor must be finite and >= 0, got ", factor);
    getContext(ctx)->setLrFactor(factor);
  });
}

int32_t fsdprt_context_set_loss_scale(int64_t ctx, double scale) {
  return guarded(__func__, [&] {
    if (!std::isfinite(scale) || scale <= 0)
      fail(Status::InvalidArgument,
           "the loss scale must be finite and > 0, got ", scale);
    getContext(ctx)->setLossScale(scale);
  });
}

int32_t fsdprt_graph_begin(int64_t ctx, int64_t step_count) {
  return guarded(__func__,
                 [&] { getContext(ctx)->beginCapture(step_count); });
}

int32_t fsdprt_graph_supported(int64_t ctx, int32_t *out) {
  return guarded(__func__, [&] {
    requireOut(out, "out");
    *out = getContext(ctx)->backend().hasStepGraphs() ? 1 : 0;
  });
}

int32_t fsdprt_graph_end(int64_t ctx, int64_t *out_graph) {
  return guarded(__func__, [&] {
    requireOut(out_graph, "out_graph");
    *out_graph = getContext(ctx)->endCapture();
  });
}

int32_t fsdprt_graph_launch(int64_t ctx, int64_t stream, int64_t graph,
                            int64_t step_count) {
  return guarded(__func__, [&] {
    getContext(ctx)->launchGraph(graph, stream, step_count);
  });
}

int32_t fsdprt_graph_destroy(int64_t ctx, int64_t graph) {
  return guarded(__func__, [&] { getContext(ctx)->destroyGraph(graph); });
}

int32_t fsdprt_buffer_alloc(int64_t ctx, int64_t bytes, int64_t *out_buf) {
  return guarded(__func__, [&] {
    requireOut(out_buf, "out_buf");
    *out_buf = getContext(ctx)->allocate(bytes);
  });
}

int32_t fsdprt_buffer_alloc_at(int64_t ctx, int64_t offset, int64_t bytes,
                               int64_t *out_buf) {
  return guarded(__func__, [&] {
    requireOut(out_buf, "out_buf");
    *out_buf = getContext(ctx)->allocateAt(offset, bytes);
  });
}

int32_t fsdprt_buffer_alloc_host(int64_t ctx, int64_t bytes,
                                 int64_t *out_buf) {
  return guarded(__func__, [&] {
    requireOut(out_buf, "out_buf");
    *out_buf = getContext(ctx)->allocateHost(bytes);
  });
}

int32_t fsdprt_buffer_free(int64_t ctx, int64_t stream, int64_t buf) {
  return guarded(__func__, [&] { getContext(ctx)->free(buf, stream); });
}

int32_t fsdprt_buffer_size(int64_t ctx, int64_t buf, int64_t *out_bytes) {
  return guarded(__func__, [&] {
    requireOut(out_bytes, "out_bytes");
    *out_bytes = getContext(ctx)->bufferSize(buf);
  });
}

int32_t fsdprt_buffer_host_ptr(int64_t ctx, int64_t buf, int64_t offset,
                               void **out_ptr) {
  return guarded(__func__, [&] {
    requireOut(out_ptr, "out_ptr");
    auto c = getContext(ctx);
    if (!c->backend().hostAccessible())
      fail(Status::Unsupported, "backend '", c->backend().name(),
           "' memory is not host-addressable");
    *out_ptr = c->resolve(buf, offset, 0, "buf");
  });
}

int32_t fsdprt_copy_from_host(int64_t ctx, int64_t stream, int64_t dst,
                              int64_t dst_off, const void *src, int64_t bytes) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "copy_from_host");
    requireOut(src, "src");
    void *d =
        l.context().resolve(dst, dst_off, nonNegative(bytes, "bytes"), "dst");
    Backend &be = l.backend();
    CopyKind kind = l.context().isHostBuffer(dst) ? CopyKind::HostBuffer
                                                  : CopyKind::HostToDevice;
    l.enqueue([&be, d, src, bytes, kind] { be.copy(d, src, bytes, kind); });
  });
}

int32_t fsdprt_copy_to_host(int64_t ctx, int64_t stream, void *dst, int64_t src,
                            int64_t src_off, int64_t bytes) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "copy_to_host");
    requireOut(dst, "dst");
    void *s =
        l.context().resolve(src, src_off, nonNegative(bytes, "bytes"), "src");
    Backend &be = l.backend();
    CopyKind kind = l.context().isHostBuffer(src) ? CopyKind::HostBuffer
                                                  : CopyKind::DeviceToHost;
    l.enqueue([&be, dst, s, bytes, kind] { be.copy(dst, s, bytes, kind); });
  });
}

int32_t fsdprt_copy(int64_t ctx, int64_t stream, int64_t dst, int64_t dst_off,
                    int64_t src, int64_t src_off, int64_t bytes) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "copy");
    nonNegative(bytes, "bytes");
    void *d = l.context().resolve(dst, dst_off, bytes, "dst");
    void *s = l.context().resolve(src, src_off, bytes, "src");
    Backend &be = l.backend();
    // CPU offload's copies between host buffers and the device.
    CopyKind kind =
        l.context().isHostBuffer(dst) || l.context().isHostBuffer(src)
            ? CopyKind::Staged
            : CopyKind::DeviceToDevice;
    const DelayConfig &delays = l.context().delays();
    l.enqueue([&be, &delays, d, s, bytes, kind] {
      if (kind == CopyKind::Staged)
        delays.apply(DelayPoint::Offload);
      be.copy(d, s, bytes, kind);
    });
  });
}

int32_t fsdprt_fill(int64_t ctx, int64_t stream, int32_t dtype, int64_t dst,
                    int64_t dst_off, int64_t numel, double value) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "fill");
    DType dt = dtypeFromCode(dtype, "dtype");
    void *d = l.operand(dst, dst_off, nonNegative(numel, "numel"), dt, "dst");
    Backend &be = l.backend();
    l.enqueue([&be, dt, d, numel, value] { be.fill(dt, d, numel, value); });
  });
}

int32_t fsdprt_add_integer(int64_t ctx, int64_t stream, int32_t dtype,
                           int64_t dst, int64_t dst_off, int64_t numel,
                           int64_t value) {
  return guarded(__func__, [&] {
    Launch l(ctx, stream, "add_integer");
    DType dt = dtypeFromCode(dtype, "dtype");
    if (dt != DType::I32 && dt != DType::I64)
      fail(Status::InvalidArgument, "dtype must be I32 or I64, got ",
           dtypeName(dt));
    void *d = l.operand(dst, dst_off, nonNegative(numel, "numel"), dt, "dst");
    Backend &be = l.backend();
    l.enqueue(
        [&be, dt, d, numel, value] { be.addInteger(dt, d, numel, value); });
  });
}

int32_t fsdprt_stream_create(int64_t ctx, int64_t *out_stream) {
  return guarded(__func__, [&] {
    requireOut(out_stream, "out_stream");
    *out_stream = getContext(ctx)->createStream();
  });
}

int32_t fsdprt_stream_create_host(int64_t ctx, int64_t *out_stream) {
  return guarded(__func__, [&] {
    requireOut(out_stream, "out_stream");
    *out_stream = getContext(ctx)->createHostStream();
  });
}

int32_t fsdprt_stream_destroy(int64_t ctx, int64_t stream) {
  return guarded(__func__, [&] { getContext(ctx)->destroyStream(stream); });
}

int32_t fsdprt_stream_synchronize(int64_t ctx, int64_t stream) {
  return guarded(__func__,
                 [&] { getContext(ctx)->synchronizeStream(stream); });
}

int32_t fsdprt_event_create(int64_t ctx, int64_t *out_event) {
  return guarded(__func__, [&] {
    requireOut(out_event, "out_event");
    *out_event = getContext(ctx)->createEvent();
  });
}

int32_t fsdprt_event_destroy(int64_t ctx, int64_t event) {
  return guarded(__func__, [&] { getContext(ctx)->destroyEvent(event); });
}

int32_t fsdprt_event_record(int64_t ctx, int64_t event, int64_t stream) {
  return guarded(__func__, [&] {
    auto c = getContext(ctx);
    auto e = c->event(event);
    c->stream(stream)->record(std::move(e));
  });
}

int32_t fsdprt_stream_wait_event(int64_t ctx, int64_t stream, int64_t event) {
  return guarded(__func__, [&] {
    auto c = getContext(ctx);
    auto e = c->event(event);
    c->stream(stream)->wait(std::move(e));
  });
}

int32_t fsdprt_event_synchronize(int64_t ctx, int64_t event) {
  return guarded(__func__, [&] {
    auto e = getContext(ctx)->event(event);
    e->synchronize(e->lastTicket());
  });
}

int32_t fsdprt_event_query(int64_t ctx, int64_t event, int32_t *out_done) {
  return guarded(__func__, [&] {
    requireOut(out_done, "out_done");
    auto e = getContext(ctx)->event(event);
    *out_done = e->passed(e->lastTicket()) ? 1 : 0;
  });
}

} // extern "C"
