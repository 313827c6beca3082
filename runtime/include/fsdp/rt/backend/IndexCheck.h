//===- IndexCheck.h - The error of an index outside its range ---*- C++ -*-===//
//
// One wording for every backend's index checks (token ids, loss targets,
// routing entries, nn.id_range's ids), whether the host meets the index at
// once (cpu) or reads a device's verdict at the next synchronisation (cuda).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_BACKEND_INDEXCHECK_H
#define FSDP_RT_BACKEND_INDEXCHECK_H

#include "fsdp/rt/Error.h"

#include <cstdint>

namespace fsdp {
namespace rt {

/// What a check's indices are: the message's noun.
enum class IndexKind { TokenId, Target, Index };

/// The range a check allows: [0, limit), and ignoreIndex when hasIgnore.
struct IndexRange {
  int64_t limit = 0;
  bool hasIgnore = false;
  int64_t ignoreIndex = 0;

  bool allows(int64_t v) const {
    return (v >= 0 && v < limit) || (hasIgnore && v == ignoreIndex);
  }
};

/// Fails (OUT_OF_RANGE) naming `op`, the index and its position:
/// "<op>: target 7 at position 5 is outside [0, 5) and is not the ignore
/// index -100".
[[noreturn]] inline void failOnIndex(const char *op, IndexKind kind,
                                     const IndexRange &range, int64_t value,
                                     int64_t position) {
  const char *noun = kind == IndexKind::TokenId  ? "token id"
                     : kind == IndexKind::Target ? "target"
                                                 : "index";
  const char *within = kind == IndexKind::TokenId ? "the vocabulary " : "";
  std::ostringstream ignore;
  if (range.hasIgnore)
    ignore << " and is not the ignore index " << range.ignoreIndex;
  fail(Status::OutOfRange, op, ": ", noun, " ", value, " at position ",
       position, " is outside ", within, "[0, ", range.limit, ")",
       ignore.str());
}

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_BACKEND_INDEXCHECK_H
