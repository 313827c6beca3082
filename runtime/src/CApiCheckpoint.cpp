//===- CApiCheckpoint.cpp - C ABI: safetensors checkpoints ----------------===//
#include "CApiSupport.h"

#include "fsdp/rt/Safetensors.h"
#include "fsdp/rt/fsdprt.h"

#include <cstring>
#include <mutex>

using namespace fsdp::rt;
using namespace fsdp::rt::capi;

namespace {

struct Writer {
  std::string path;
  SafetensorsWriter writer;
  std::mutex mutex;
};

std::mutex tablesMutex;
HandleTable<Writer> &writers() {
  static HandleTable<Writer> table("checkpoint writer");
  return table;
}
HandleTable<SafetensorsReader> &readers() {
  static HandleTable<SafetensorsReader> table("checkpoint reader");
  return table;
}

std::shared_ptr<Writer> getWriter(int64_t h) {
  std::lock_guard<std::mutex> lock(tablesMutex);
  return writers().get(h);
}
std::shared_ptr<SafetensorsReader> getReader(int64_t h) {
  std::lock_guard<std::mutex> lock(tablesMutex);
  return readers().get(h);
}

void copyString(const std::string &s, char *buf, int64_t len) {
  requireOut(buf, "buf");
  if (len < static_cast<int64_t>(s.size()) + 1)
    fail(Status::OutOfRange, "buffer of ", len, " bytes cannot hold ",
         s.size() + 1, " bytes");
  std::memcpy(buf, s.c_str(), s.size() + 1);
}

} // namespace

extern "C" {

int32_t fsdprt_ckpt_writer_create(const char *path, int64_t *out_writer) {
  return guarded(__func__, [&] {
    requireOut(path, "path");
    requireOut(out_writer, "out_writer");
    auto w = std::make_shared<Writer>();
    w->path = path;
    std::lock_guard<std::mutex> lock(tablesMutex);
    *out_writer = writers().insert(std::move(w));
  });
}

int32_t fsdprt_ckpt_writer_add(int64_t writer, const char *name, int32_t dtype,
                               int32_t rank, const int64_t *shape,
                               const void *data) {
  return guarded(__func__, [&] {
    auto w = getWriter(writer);
    requireOut(name, "name");
    DType dt = dtypeFromCode(dtype, "dtype");
    Shape s = shapeFromAbi(rank, shape, "shape");
    std::lock_guard<std::mutex> lock(w->mutex);
    w->writer.add(name, dt, s, data);
  });
}

int32_t fsdprt_ckpt_writer_add_buffer(int64_t writer, int64_t ctx,
                                      const char *name, int32_t dtype,
                                      int32_t rank, const int64_t *shape,
                                      int64_t buf, int64_t buf_off) {
  return guarded(__func__, [&] {
    auto w = getWriter(writer);
    auto c = getContext(ctx);
    requireOut(name, "name");
    DType dt = dtypeFromCode(dtype, "dtype");
    Shape s = shapeFromAbi(rank, shape, "shape");
    int64_t bytes = mul(numelOf(s), dtypeSize(dt));
    void *src = c->resolve(buf, buf_off, bytes, "buf");
    c->synchronizeAll();
    std::vector<char> host(bytes);
    c->backend().copy(host.data(), src, bytes, CopyKind::DeviceToHost);
    std::lock_guard<std::mutex> lock(w->mutex);
    w->writer.add(name, dt, s, host.data());
  });
}

int32_t fsdprt_ckpt_writer_set_metadata(int64_t writer, const char *key,
                                        const char *value) {
  return guarded(__func__, [&] {
    auto w = getWriter(writer);
    requireOut(key, "key");
    requireOut(value, "value");
    std::lock_guard<std::mutex> lock(w->mutex);
    w->writer.setMetadata(key, value);
  });
}

int32_t fsdprt_ckpt_writer_finish(int64_t writer) {
  return guarded(__func__, [&] {
    std::shared_ptr<Writer> w;
    {
      std::lock_guard<std::mutex> lock(tablesMutex);
      w = writers().remove(writer);
    }
    std::lock_guard<std::mutex> lock(w->mutex);
    w->writer.write(w->path);
  });
}

int32_t fsdprt_ckpt_writer_discard(int64_t writer) {
  return guarded(__func__, [&] {
    std::lock_guard<std::mutex> lock(tablesMutex);
    writers().remove(writer);
  });
}

int32_t fsdprt_ckpt_reader_open(const char *path, int64_t *out_reader) {
  return guarded(__func__, [&] {
    requireOut(path, "path");
    requireOut(out_reader, "out_reader");
    auto r = std::make_shared<SafetensorsReader>(path);
    std::lock_guard<std::mutex> lock(tablesMutex);
    *out_reader = readers().insert(std::move(r));
  });
}

int32_t fsdprt_ckpt_reader_close(int64_t reader) {
  return guarded(__func__, [&] {
    std::lock_guard<std::mutex> lock(tablesMutex);
    readers().remove(reader);
  });
}

int32_t fsdprt_ckpt_reader_num_tensors(int64_t reader, int64_t *out) {
  return guarded(__func__, [&] {
    requireOut(out, "out");
    *out = static_cast<int64_t>(getReader(reader)->names().size());
  });
}

int32_t fsdprt_ckpt_reader_tensor_name(int64_t reader, int64_t index, char *buf,
                                       int64_t buf_len) {
  return guarded(__func__, [&] {
    auto r = getReader(reader);
    if (index < 0 || index >= static_cast<int64_t>(r->names().size()))
      fail(Status::OutOfRange, "tensor index ", index, " is not in [0, ",
           r->names().size(), ")");
    copyString(r->names()[index], buf, buf_len);
  });
}

int32_t fsdprt_ckpt_reader_tensor_info(int64_t reader, const char *name,
                                       int32_t *out_dtype, int32_t *out_rank,
                                       int64_t *shape) {
  return guarded(__func__, [&] {
    auto r = getReader(reader);
    requireOut(name, "name");
    requireOut(out_dtype, "out_dtype");
    requireOut(out_rank, "out_rank");
    const TensorInfo &t = r->info(name);
    if (t.shape.size() > FSDPRT_MAX_RANK)
      fail(Status::Unsupported, "tensor '", name, "' has rank ", t.shape.size(),
           ", more than FSDPRT_MAX_RANK");
    if (!t.shape.empty())
      requireOut(shape, "shape");
    *out_dtype = static_cast<int32_t>(t.dtype);
    *out_rank = static_cast<int32_t>(t.shape.size());
    std::copy(t.shape.begin(), t.shape.end(), shape);
  });
}

int32_t fsdprt_ckpt_reader_read(int64_t reader, const char *name, void *dst,
                                int64_t bytes) {
  return guarded(__func__, [&] {
    auto r = getReader(reader);
    requireOut(name, "name");
    if (bytes > 0)
      requireOut(dst, "dst");
    r->read(name, dst, bytes);
  });
}

int32_t fsdprt_ckpt_reader_read_to_buffer(int64_t reader, const char *name,
                                          int64_t ctx, int64_t buf,
                                          int64_t buf_off) {
  return guarded(__func__, [&] {
    auto r = getReader(reader);
    auto c = getContext(ctx);
    requireOut(name, "name");
    const TensorInfo &t = r->info(name);
    int64_t bytes = t.end - t.begin;
    void *dst = c->resolve(buf, buf_off, bytes, "buf");
    std::vector<char> host(bytes);
    r->read(name, host.data(), bytes);
    c->synchronizeAll();
    c->backend().copy(dst, host.data(), bytes, CopyKind::HostToDevice);
  });
}

int32_t fsdprt_ckpt_reader_metadata(int64_t reader, const char *key, char *buf,
                                    int64_t buf_len) {
  return guarded(__func__, [&] {
    auto r = getReader(reader);
    requireOut(key, "key");
    auto it = r->metadata().find(key);
    if (it == r->metadata().end())
      fail(Status::InvalidArgument, "no metadata key '", key, "'");
    copyString(it->second, buf, buf_len);
  });
}

} // extern "C"
