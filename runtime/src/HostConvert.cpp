//===- HostConvert.cpp - Element conversion on the host -------------------===//
#include "fsdp/rt/backend/HostConvert.h"

#include "fsdp/rt/Error.h"
#include "fsdp/rt/math/Half.h"

#include <cstring>
#include <vector>

namespace fsdp {
namespace rt {

namespace {

// Lambdas, not function pointers, so that the bodies inline and the loops
// vectorise.
template <typename Src, typename Dst, typename F>
void convertLoop(const void *src, void *dst, int64_t n, F f) {
  auto *s = static_cast<const Src *>(src);
  auto *d = static_cast<Dst *>(dst);
  for (int64_t i = 0; i < n; ++i)
    d[i] = f(s[i]);
}

/// To integer type Dst: floats truncate toward zero, integers wrap.
template <typename Dst>
void toInteger(DType srcType, const void *src, void *dst, int64_t n) {
  auto cast = [](auto v) { return static_cast<Dst>(v); };
  switch (srcType) {
  case DType::I32:
    return convertLoop<int32_t, Dst>(src, dst, n, cast);
  case DType::I64:
    return convertLoop<int64_t, Dst>(src, dst, n, cast);
  case DType::F32:
    return convertLoop<float, Dst>(src, dst, n, cast);
  case DType::BF16:
    return convertLoop<uint16_t, Dst>(src, dst, n, [](uint16_t h) {
      return static_cast<Dst>(bf16ToFloat(h));
    });
  case DType::F16:
    return convertLoop<uint16_t, Dst>(src, dst, n, [](uint16_t h) {
      return static_cast<Dst>(f16ToFloat(h));
    });
  }
}

} // namespace

void convertOnHost(DType srcType, const void *src, DType dstType, void *dst,
                   int64_t n) {
  if (srcType == dstType) {
    // An empty buffer may be null, which memmove does not accept even for 0
    // bytes.
    if (n > 0)
      std::memmove(dst, src, n * dtypeSize(srcType));
    return;
  }
  if (dstType == DType::I32)
    return toInteger<int32_t>(srcType, src, dst, n);
  if (dstType == DType::I64)
    return toInteger<int64_t>(srcType, src, dst, n);
  if (dstType == DType::F32) {
    switch (srcType) {
    case DType::BF16:
      return convertLoop<uint16_t, float>(
          src, dst, n, [](uint16_t h) { return bf16ToFloat(h); });
    case DType::F16:
      return convertLoop<uint16_t, float>(
          src, dst, n, [](uint16_t h) { return f16ToFloat(h); });
    case DType::I32:
      return convertLoop<int32_t, float>(
          src, dst, n, [](int32_t v) { return static_cast<float>(v); });
    case DType::I64:
      return convertLoop<int64_t, float>(
          src, dst, n, [](int64_t v) { return static_cast<float>(v); });
    case DType::F32:
      break;
    }
  }
  if (srcType == DType::F32 && dstType == DType::BF16)
    return convertLoop<float, uint16_t>(
        src, dst, n, [](float f) { return floatToBf16(f); });
  if (srcType == DType::F32)
    return convertLoop<float, uint16_t>(
        src, dst, n, [](float f) { return floatToF16(f); });
  // Any other pair goes through f32, which is exact for every 16-bit float
  // value and rounds integers exactly as a direct conversion would.
  std::vector<float> tmp(n);
  convertOnHost(srcType, src, DType::F32, tmp.data(), n);
  convertOnHost(DType::F32, tmp.data(), dstType, dst, n);
}

} // namespace rt
} // namespace fsdp
