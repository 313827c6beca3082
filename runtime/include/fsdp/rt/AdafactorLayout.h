//===- AdafactorLayout.h - Adafactor's flat layout of a unit -----*- C++
//-*-===//
//
// What fsdp.adafactor_stats / _factor / _apply's `layout` says about a flat
// parameter (FSDPAdafactorOps.td): per parameter [flat offset, numel, rows,
// cols], rows = cols = 0 when it is not factored. Header-only: the
// compiler's verifiers and fsdp-shard, and the runtime's entry points read
// it, so the state's and the statistics' layouts are written once.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_ADAFACTORLAYOUT_H
#define FSDP_RT_ADAFACTORLAYOUT_H

#include "fsdp/rt/math/Hd.h"

#include <cstdint>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {

/// One parameter of a flat parameter, as Adafactor sees it.
struct AdafactorParam {
  int64_t flatOffset = 0, numel = 0;
  int64_t rows = 0, cols = 0; // the last two sizes; 0, 0: not factored
  /// Its entries in the state: batch·rows row means then batch·cols column
  /// means, or numel elementwise means.
  int64_t stateOffset = 0;

  FSDPRT_HD bool factored() const { return rows > 0; }
  /// The product of the leading dimensions of a factored parameter.
  FSDPRT_HD int64_t batch() const {
    return factored() ? numel / (rows * cols) : 1;
  }
  FSDPRT_HD int64_t stateSize() const {
    return factored() ? batch() * (rows + cols) : numel;
  }
};

/// A parameter of shape [shape, shape + rank) at `flatOffset`, factored
/// over its last two dimensions when it has two (torch's grad.dim() > 1).
inline AdafactorParam adafactorParamOf(const int64_t *shape, int64_t rank,
                                       int64_t flatOffset) {
  AdafactorParam p;
  p.flatOffset = flatOffset;
  p.numel = 1;
  for (int64_t d = 0; d < rank; ++d)
    p.numel *= shape[d];
  if (rank >= 2)
    p.rows = shape[rank - 2], p.cols = shape[rank - 1];
  return p;
}

/// A flat parameter's parameters, with the sizes of its state and its
/// statistics (Σ param² per parameter, then the state's layout of Σ grad²).
struct AdafactorLayout {
  std::vector<AdafactorParam> params;
  int64_t stateSize = 0;

  /// Appends `p` (the 4 integers parse() reads) to `values`.
  static void append(const AdafactorParam &p, std::vector<int64_t> &values) {
    values.insert(values.end(), {p.flatOffset, p.numel, p.rows, p.cols});
  }

  int64_t statsSize() const {
    return static_cast<int64_t>(params.size()) + stateSize;
  }

  /// Calls f(index, param, first, count, local) for each parameter's part
  /// of the n elements from flat element flatBegin: its elements [first,
  /// first + count), the part's first element at `local` among the n.
  template <typename F>
  void forEachPart(int64_t flatBegin, int64_t n, F f) const {
    for (size_t i = 0; i < params.size(); ++i) {
      const AdafactorParam &p = params[i];
      int64_t lo = p.flatOffset > flatBegin ? p.flatOffset : flatBegin;
      int64_t end = p.flatOffset + p.numel;
      int64_t hi = end < flatBegin + n ? end : flatBegin + n;
      if (lo < hi)
        f(static_cast<int64_t>(i), p, lo - p.flatOffset, hi - lo,
          lo - flatBegin);
    }
  }

  /// The layout of `values` (4 per parameter), or why it is invalid:
  /// offsets increasing without overlap, numel > 0, and rows, cols > 0
  /// dividing numel or both 0.
  static std::string parse(const int64_t *values, int64_t count,
                           AdafactorLayout &out) {
    if (count <= 0 || count % 4 != 0)
      return "layout must hold 4 integers per parameter, got " +
             std::to_string(count);
    out = AdafactorLayout();
    int64_t end = 0;
    for (int64_t i = 0; i < count; i += 4) {
      AdafactorParam p;
      p.flatOffset = values[i], p.numel = values[i + 1];
      p.rows = values[i + 2], p.cols = values[i + 3];
      std::string which = "parameter " + std::to_string(i / 4);
      if (p.flatOffset < end || p.numel <= 0)
        return which + ": offsets must increase without overlap and numel be "
                       "positive";
      bool factored =
          p.rows > 0 && p.cols > 0 && p.numel % (p.rows * p.cols) == 0;
      if (!factored && (p.rows != 0 || p.cols != 0))
        return which + ": rows and cols must both be 0 or divide numel " +
               std::to_string(p.numel);
      p.stateOffset = out.stateSize;
      out.stateSize += p.stateSize();
      end = p.flatOffset + p.numel;
      out.params.push_back(p);
    }
    return "";
  }
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_ADAFACTORLAYOUT_H
