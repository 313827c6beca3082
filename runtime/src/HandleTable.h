//===- HandleTable.h - Generation-checked int64 handles ---------*- C++ -*-===//
//
// Generated code holds plain int64 handles, so a stale or forged handle must
// be detected, not dereferenced: a handle packs (generation << 32 | slot+1)
// and a slot's generation changes whenever its object goes away. Handle 0 is
// never issued. Not thread-safe by itself; owners lock around it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_HANDLETABLE_H
#define FSDP_RT_HANDLETABLE_H

#include "fsdp/rt/Error.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace fsdp {
namespace rt {

template <typename T> class HandleTable {
public:
  explicit HandleTable(const char *kind) : kind_(kind) {}

  int64_t insert(std::shared_ptr<T> object) {
    uint32_t index;
    if (!freeSlots_.empty()) {
      index = freeSlots_.back();
      freeSlots_.pop_back();
    } else {
      index = static_cast<uint32_t>(slots_.size());
      slots_.push_back(Slot{});
    }
    Slot &slot = slots_[index];
    slot.object = std::move(object);
    return static_cast<int64_t>((static_cast<uint64_t>(slot.generation) << 32) |
                                (index + 1));
  }

  /// Throws Error(InvalidHandle) naming the handle kind and value.
  std::shared_ptr<T> get(int64_t handle) const {
    return slots_[check(handle)].object;
  }

  std::shared_ptr<T> remove(int64_t handle) {
    uint32_t index = check(handle);
    Slot &slot = slots_[index];
    std::shared_ptr<T> object = std::move(slot.object);
    slot.object.reset();
    // Generations start at 1 so that small integers are never valid.
    slot.generation = slot.generation == UINT32_MAX ? 1 : slot.generation + 1;
    freeSlots_.push_back(index);
    return object;
  }

  /// Calls f(const std::shared_ptr<T> &) for every live object.
  template <typename F> void forEach(F &&f) const {
    for (const Slot &slot : slots_)
      if (slot.object)
        f(slot.object);
  }

private:
  struct Slot {
    uint32_t generation = 1;
    std::shared_ptr<T> object;
  };

  uint32_t check(int64_t handle) const {
    uint64_t h = static_cast<uint64_t>(handle);
    uint64_t index = (h & 0xffffffffu) - 1;
    uint32_t generation = static_cast<uint32_t>(h >> 32);
    if (handle <= 0 || index >= slots_.size() || !slots_[index].object ||
        slots_[index].generation != generation)
      fail(Status::InvalidHandle, "invalid ", kind_, " handle ", handle,
           " (never created, destroyed or freed)");
    return static_cast<uint32_t>(index);
  }

  const char *kind_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> freeSlots_;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_HANDLETABLE_H
