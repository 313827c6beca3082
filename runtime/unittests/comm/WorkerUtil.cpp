//===- WorkerUtil.cpp - Helpers of the multi-process comm worker ----------===//
#include "WorkerUtil.h"

#include "fsdp/rt/math/Half.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace worker {

void failCheck(const std::string &message) {
  std::fprintf(stderr, "FAIL: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(kExitFail);
}

void rt(int32_t status, const char *call) {
  if (status == FSDPRT_OK)
    return;
  std::fprintf(stderr, "ERROR: %s\n", fsdprt_last_error());
  std::fprintf(stderr, "(from %s, status %d)\n", call, status);
  std::fflush(stderr);
  std::_Exit(kExitRuntimeError);
}

double inputOf(int32_t rank, int64_t index, uint32_t salt) {
  uint64_t h = (static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(index) * 0xC2B2AE3D27D4EB4Full) ^
               (static_cast<uint64_t>(salt) * 0x165667B19E3779F9ull);
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  h ^= h >> 32;
  return static_cast<double>(static_cast<int64_t>(h % 17) - 8);
}

int64_t dtypeBytes(int32_t dtype) { return dtype == FSDPRT_F32 ? 4 : 2; }

const char *dtypeLabel(int32_t dtype) {
  return dtype == FSDPRT_F32 ? "f32" : dtype == FSDPRT_BF16 ? "bf16" : "f16";
}

std::vector<uint8_t> encode(int32_t dtype, const std::vector<double> &values) {
  std::vector<uint8_t> out(values.size() * dtypeBytes(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    float f = static_cast<float>(values[i]);
    if (dtype == FSDPRT_F32) {
      std::memcpy(&out[i * 4], &f, 4);
    } else {
      uint16_t h = dtype == FSDPRT_BF16 ? fsdp::rt::floatToBf16(f)
                                        : fsdp::rt::floatToF16(f);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

std::vector<double> decode(int32_t dtype, const std::vector<uint8_t> &bytes) {
  size_t n = bytes.size() / dtypeBytes(dtype);
  std::vector<double> out(n);
  for (size_t i = 0; i < n; ++i) {
    if (dtype == FSDPRT_F32) {
      float f;
      std::memcpy(&f, &bytes[i * 4], 4);
      out[i] = f;
    } else {
      uint16_t h;
      std::memcpy(&h, &bytes[i * 2], 2);
      out[i] = dtype == FSDPRT_BF16 ? fsdp::rt::bf16ToFloat(h)
                                    : fsdp::rt::f16ToFloat(h);
    }
  }
  return out;
}

double tolerance(int32_t dtype) {
  return dtype == FSDPRT_F32    ? 2 * 0x1p-24
         : dtype == FSDPRT_BF16 ? 2 * 0x1p-9
                                : 2 * 0x1p-12;
}

void expectNear(const std::vector<double> &got, const std::vector<double> &want,
                double rtol, const std::string &what) {
  if (got.size() != want.size()) {
    std::ostringstream os;
    os << what << ": expected " << want.size() << " elements, got "
       << got.size();
    failCheck(os.str());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    double bound = rtol * std::max(1.0, std::fabs(want[i]));
    if (!(std::fabs(got[i] - want[i]) <= bound)) {
      std::ostringstream os;
      os << what << ": element " << i << " of " << got.size() << ": expected "
         << want[i] << ", got " << got[i];
      failCheck(os.str());
    }
  }
}

Rank::Rank(int32_t rank, int32_t worldSize) : rank(rank), worldSize(worldSize) {
  RT(fsdprt_context_create("cpu", rank, worldSize, int64_t(64) << 20, 1, &ctx));
}

Rank::~Rank() {
  if (ctx)
    RT(fsdprt_context_destroy(ctx));
}

int64_t Rank::alloc(int64_t bytes) {
  int64_t buf = 0;
  RT(fsdprt_buffer_alloc(ctx, bytes > 0 ? bytes : 1, &buf));
  return buf;
}

int64_t Rank::upload(const std::vector<uint8_t> &bytes) {
  int64_t buf = alloc(static_cast<int64_t>(bytes.size()));
  if (!bytes.empty())
    RT(fsdprt_copy_from_host(ctx, stream, buf, 0, bytes.data(),
                             static_cast<int64_t>(bytes.size())));
  sync(); // `bytes` must outlive the stream's copy.
  return buf;
}

std::vector<uint8_t> Rank::download(int64_t buf, int64_t bytes) {
  std::vector<uint8_t> out(bytes);
  if (bytes > 0)
    RT(fsdprt_copy_to_host(ctx, stream, out.data(), buf, 0, bytes));
  sync();
  return out;
}

void Rank::sync() { RT(fsdprt_stream_synchronize(ctx, stream)); }

int32_t envInt(const char *name, int32_t fallback) {
  const char *v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

} // namespace worker
