//===- TensorDataset.h - a dataset of tensors in a safetensors file -*- C++ -*-===//
//
// `--data FILE.safetensors`: one tensor per model input, named
// "input.<index>" (the input's position in the model's forward), shaped
// [N, *per-sample shape] in the input's dtype; sample g of the run is row
// g mod N. It is how exact batches are shared with another framework (the
// PyTorch oracle) and how users bring pre-processed data.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_TENSORDATASET_H
#define FSDP_DRIVER_TENSORDATASET_H

#include "runner/Program.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

class TensorDataset {
public:
  /// Reads and validates every "input.<index>" the inputs need (dtype,
  /// per-sample shape, ids below max_id); throws std::runtime_error naming
  /// the file and the tensor.
  TensorDataset(const std::string &path, const std::vector<InputInfo> &inputs);

  /// Bytes of sample `g` of model input `index` (row g mod N).
  const uint8_t *sample(int64_t index, int64_t g) const;
  int64_t numSamples() const { return numSamples_; }

private:
  struct Column {
    std::vector<uint8_t> bytes;
    int64_t rowBytes = 0;
  };
  std::map<int64_t, Column> columns_;
  int64_t numSamples_ = 0;
};

} // namespace driver
} // namespace fsdp

#endif
