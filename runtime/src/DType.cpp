//===- DType.cpp - Element types ------------------------------------------===//
#include "fsdp/rt/DType.h"
#include "fsdp/rt/Error.h"

namespace fsdp {
namespace rt {

int64_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I64:
    return 8;
  }
  fail(Status::InvalidArgument, "unknown dtype code ", static_cast<int>(t));
}

bool isFloat(DType t) {
  return t == DType::F32 || t == DType::BF16 || t == DType::F16;
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "F32";
  case DType::BF16:
    return "BF16";
  case DType::F16:
    return "F16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  }
  return "?";
}

std::optional<DType> dtypeFromName(const std::string &name) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64})
    if (name == dtypeName(t))
      return t;
  return std::nullopt;
}

DType dtypeFromCode(int32_t code, const char *what) {
  if (code < FSDPRT_F32 || code > FSDPRT_I64)
    fail(Status::InvalidArgument, what, ": unknown dtype code ", code,
         " (expected 0=F32, 1=BF16, 2=F16, 3=I32, 4=I64)");
  return static_cast<DType>(code);
}

DType floatDTypeFromCode(int32_t code, const char *what) {
  DType t = dtypeFromCode(code, what);
  if (!isFloat(t))
    fail(Status::InvalidArgument, what, ": dtype ", dtypeName(t),
         " is not a floating-point type (F32, BF16 or F16)");
  return t;
}

} // namespace rt
} // namespace fsdp
