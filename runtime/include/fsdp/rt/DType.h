//===- DType.h - Element types ----------------------------------*- C++ -*-===//
#ifndef FSDP_RT_DTYPE_H
#define FSDP_RT_DTYPE_H

#include "fsdp/rt/fsdprt.h"

#include <cstdint>
#include <optional>
#include <string>

namespace fsdp {
namespace rt {

/// Values equal the C ABI codes (FSDPRT_F32, ...).
enum class DType : int32_t {
  F32 = FSDPRT_F32,
  BF16 = FSDPRT_BF16,
  F16 = FSDPRT_F16,
  I32 = FSDPRT_I32,
  I64 = FSDPRT_I64,
};

int64_t dtypeSize(DType t);
bool isFloat(DType t);
/// safetensors spelling: "F32", "BF16", "F16", "I32", "I64".
const char *dtypeName(DType t);
std::optional<DType> dtypeFromName(const std::string &name);
/// Validates a C ABI code; throws Error(INVALID_ARGUMENT) naming `what`.
DType dtypeFromCode(int32_t code, const char *what);
/// Like dtypeFromCode but also requires a floating-point type.
DType floatDTypeFromCode(int32_t code, const char *what);

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_DTYPE_H
