//===- PackedAttention.h - contiguous copies of strided q, k, v -*- C++ -*-===//
//
// Attention reads q, k and v (and writes dq, dk, dv) as token-strided
// slices when they are the thirds of one packed projection [B, T, (H +
// 2·Hkv)·D] (nn.packed_attention: no split or concat copies). cuDNN's
// fused kernels take the strides; a backend's other attention kernels run
// on contiguous copies made here. `Rows` says where the copies live and how
// rows move:
//   Buffer allocate(int64_t bytes);  // Buffer is movable, has data()
//   void copyRows(void *dst, int64_t dstPitch, const void *src,
//                 int64_t srcPitch, int64_t rowBytes, int64_t rows);
// (the CPU's host vectors and memcpy; the CUDA backend's stream-ordered
// scratch and slab copies, queued on the call's stream).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_PACKEDATTENTION_H
#define FSDP_RT_PACKEDATTENTION_H

#include "fsdp/rt/backend/Backend.h"

#include <utility>
#include <vector>

namespace fsdp {
namespace rt {

template <typename Rows> class ContiguousAttention {
public:
  ContiguousAttention(Rows rows, DType dt, const AttentionDims &d)
      : rows_(std::move(rows)), es_(dtypeSize(dt)), strided_(d),
        contiguous_(d) {
    contiguous_.qRow = contiguous_.kvRow = 0;
  }
  ContiguousAttention(const ContiguousAttention &) = delete;
  ContiguousAttention &operator=(const ContiguousAttention &) = delete;

  /// The dims of the copies (contiguous rows).
  const AttentionDims &dims() const { return contiguous_; }
  /// A contiguous copy of q (of k or v); null stays null.
  const void *q(const void *p) { return copyIn(p, slab(true)); }
  const void *kv(const void *p) { return copyIn(p, slab(false)); }
  /// Contiguous scratch for dq (dk, dv), copied into p by finish().
  void *dq(void *p) { return scratchFor(p, slab(true)); }
  void *dkv(void *p) { return scratchFor(p, slab(false)); }
  /// Copies the results written to the scratch into their strided places.
  void finish() {
    for (Result &r : results_)
      rows_.copyRows(r.dst, r.slab.pitch, r.buffer.data(), r.slab.width,
                     r.slab.width, r.slab.rows);
  }

private:
  using Buffer = decltype(std::declval<Rows &>().allocate(0));
  /// A strided operand: rows of `width` bytes, `pitch` bytes apart.
  struct Slab {
    int64_t rows, width, pitch;
  };
  struct Result {
    void *dst;
    Slab slab;
    Buffer buffer;
  };

  Slab slab(bool query) const {
    const AttentionDims &d = strided_;
    return query ? Slab{d.batch * d.tq, d.heads * d.headDim * es_,
                        d.qRowStride() * es_}
                 : Slab{d.batch * d.tk, d.kvHeads * d.headDim * es_,
                        d.kvRowStride() * es_};
  }
  const void *copyIn(const void *p, Slab s) {
    if (!p)
      return nullptr;
    inputs_.push_back(rows_.allocate(s.rows * s.width));
    rows_.copyRows(inputs_.back().data(), s.width, p, s.pitch, s.width,
                   s.rows);
    return inputs_.back().data();
  }
  void *scratchFor(void *p, Slab s) {
    if (!p)
      return nullptr;
    results_.push_back(Result{p, s, rows_.allocate(s.rows * s.width)});
    return results_.back().buffer.data();
  }

  Rows rows_;
  int64_t es_;
  AttentionDims strided_, contiguous_;
  std::vector<Buffer> inputs_;
  std::vector<Result> results_;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_PACKEDATTENTION_H
