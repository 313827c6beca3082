//===- ProgramKeys.h - The program description's keys -----------*- C++ -*-===//
//
// program_keys::<object>_<key> is "<key>" for every row of ProgramKeys.def:
// the writer and the parser spell a key only through these, so a key
// renamed or removed in the table changes (or breaks the build of) both.
// Outside namespace fsdp: the compiler, which includes this, has its own
// mlir::fsdp.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_PROGRAMKEYS_H
#define FSDP_RT_PROGRAMKEYS_H

namespace fsdprt {
namespace program_keys {

#define FSDPRT_PROGRAM_KEY(object, key, presence)                              \
  inline constexpr char object##_##key[] = #key;
#include "fsdp/rt/ProgramKeys.def"

enum class Presence { REQUIRED, OPTIONAL };

/// One row of the table.
struct Row {
  const char *object;
  const char *key;
  Presence presence;
};
inline constexpr Row kRows[] = {
#define FSDPRT_PROGRAM_KEY(object, key, presence)                              \
  {#object, #key, Presence::presence},
#include "fsdp/rt/ProgramKeys.def"
};

} // namespace program_keys
} // namespace fsdprt

#endif // FSDP_RT_PROGRAMKEYS_H
