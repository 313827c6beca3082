//===- Staging.h - f32 views of a call's 16-bit operands --------*- C++ -*-===//
//
// Kernels that compute in f32 (all of the CPU's, the CUDA backend's staged
// ones) take their bf16 / f16 operands through one Staging per backend
// call: in() widens an operand into f32 scratch, out() gives f32 scratch
// for a result, inout() both, and commit() rounds every result into its
// storage type once the kernel has written it (round to nearest even, as
// everywhere). f32 operands are used in place; a null operand (an absent
// optional one) stays null. The scratch lives until the Staging is
// destroyed.
//
// `Memory` says where the scratch lives and how it converts:
//   Buffer allocate(int64_t n);  // n floats; Buffer is movable, data()
//   void convert(DType src, const void *from, DType dst, void *to,
//                int64_t n);
// (the CPU's pooled host arrays; the CUDA backend's stream-ordered device
// scratch, its conversions queued on the call's stream).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_STAGING_H
#define FSDP_RT_STAGING_H

#include "fsdp/rt/DType.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace fsdp {
namespace rt {

template <typename Memory> class Staging {
public:
  explicit Staging(Memory memory) : memory_(std::move(memory)) {}
  Staging(const Staging &) = delete;
  Staging &operator=(const Staging &) = delete;

  const float *in(DType dt, const void *ptr, int64_t n) {
    return view(dt, const_cast<void *>(ptr), n, /*load=*/true, false);
  }
  float *out(DType dt, void *ptr, int64_t n) {
    return view(dt, ptr, n, /*load=*/false, true);
  }
  /// Read, and written back where `update` (batch norm's running
  /// statistics, updated in training only).
  float *inout(DType dt, void *ptr, int64_t n, bool update = true) {
    return view(dt, ptr, n, /*load=*/true, update);
  }
  /// Rounds every out() / inout() view into its storage, in request order.
  void commit() {
    for (View &v : views_)
      if (v.written)
        memory_.convert(DType::F32, v.scratch.data(), v.dt, v.ptr, v.n);
  }

private:
  using Buffer = decltype(std::declval<Memory &>().allocate(0));
  struct View {
    DType dt;
    void *ptr;
    int64_t n;
    bool written;
    Buffer scratch;
  };

  float *view(DType dt, void *ptr, int64_t n, bool load, bool written) {
    if (!ptr || dt == DType::F32)
      return static_cast<float *>(ptr);
    views_.push_back(View{dt, ptr, n, written, memory_.allocate(n)});
    float *scratch = views_.back().scratch.data();
    if (load)
      memory_.convert(dt, ptr, DType::F32, scratch, n);
    return scratch;
  }

  Memory memory_;
  std::vector<View> views_;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_STAGING_H
