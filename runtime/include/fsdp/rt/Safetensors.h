//===- Safetensors.h - Checkpoint files in safetensors format ---*- C++ -*-===//
//
// Layout (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON mapping tensor names to
// {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the
// data section) plus an optional "__metadata__" string map, then the data.
// Files written here are loadable by the `safetensors` package; files read
// here are validated completely before any tensor is handed out, so a
// truncated or corrupted file is an Error(Format) naming the problem.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_SAFETENSORS_H
#define FSDP_RT_SAFETENSORS_H

#include "fsdp/rt/DType.h"
#include "fsdp/rt/backend/Shape.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fsdp {
namespace rt {

/// Headers above this are rejected before being read (the safetensors
/// package uses the same 100 MB bound).
constexpr uint64_t kMaxSafetensorsHeader = 100ull * 1000 * 1000;

struct TensorInfo {
  DType dtype;
  Shape shape;
  int64_t begin; // byte offsets within the data section
  int64_t end;
};

/// Streams a file whose tensors are all declared up front: the header goes
/// out first and each tensor's bytes go straight to its place in the file
/// as they come (in any order), so the writer holds no tensor. A full
/// checkpoint's rank 0 thus holds one gathered unit at a time, not the
/// model (with AdamW, 12 bytes a parameter).
class SafetensorsFileWriter {
public:
  struct Tensor {
    std::string name;
    DType dtype;
    Shape shape;
  };
  /// Writes the header into a temporary file beside `path`.
  SafetensorsFileWriter(const std::string &path,
                        const std::vector<Tensor> &tensors,
                        const std::map<std::string, std::string> &metadata);
  /// Removes the temporary file unless commit() ran.
  ~SafetensorsFileWriter();
  SafetensorsFileWriter(const SafetensorsFileWriter &) = delete;
  SafetensorsFileWriter &operator=(const SafetensorsFileWriter &) = delete;

  /// Writes a declared tensor's bytes (its size), once.
  void put(const std::string &name, const void *data);
  /// Every tensor put: fsync, rename over `path` (atomic), fsync of the
  /// directory.
  void commit();

private:
  struct Slot {
    int64_t begin, bytes;
    bool written = false;
  };
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t dataStart_ = 0;
  std::map<std::string, Slot> slots_;
};

/// Buffers its tensors (each copied on add) and writes them at once.
class SafetensorsWriter {
public:
  /// Copies the tensor bytes (numel(shape) * dtypeSize(dtype)).
  void add(const std::string &name, DType dtype, const Shape &shape,
           const void *data);
  void setMetadata(const std::string &key, const std::string &value);
  /// Writes `path` atomically: a temporary file in the same directory,
  /// fsync, rename over `path`, fsync of the directory.
  void write(const std::string &path) const;

private:
  struct Entry {
    DType dtype;
    Shape shape;
    std::vector<char> bytes;
  };
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

class SafetensorsReader {
public:
  /// Parses and validates the header; throws Error(IO) or Error(Format).
  explicit SafetensorsReader(const std::string &path);

  /// Names in sorted order.
  const std::vector<std::string> &names() const { return names_; }
  const TensorInfo &info(const std::string &name) const;
  /// Copies a tensor's bytes; `bytes` must equal its size.
  void read(const std::string &name, void *dst, int64_t bytes) const;
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

private:
  std::string path_;
  uint64_t dataStart_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_SAFETENSORS_H
