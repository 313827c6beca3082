//===- TensorDataset.cpp - a dataset of tensors in a safetensors file -----===//
#include "runner/TensorDataset.h"

#include "fsdp/rt/DType.h"
#include "fsdp/rt/Safetensors.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace fsdp {
namespace driver {

namespace {

std::string dtypeOfInput(const std::string &ours) {
  // Program dtypes are MLIR's spelling; safetensors uses upper case.
  std::string name = ours;
  std::transform(name.begin(), name.end(), name.begin(), ::toupper);
  return name;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

} // namespace

TensorDataset::TensorDataset(const std::string &path,
                             const std::vector<InputInfo> &inputs) {
  auto fail = [&](const std::string &what) {
    throw std::runtime_error("data file '" + path + "': " + what);
  };
  std::unique_ptr<rt::SafetensorsReader> reader;
  try {
    reader = std::make_unique<rt::SafetensorsReader>(path);
  } catch (const std::exception &e) {
    fail(e.what());
  }
  for (const InputInfo &in : inputs) {
    if (columns_.count(in.index))
      continue; // another micro-batch of the same input
    std::string name = "input." + std::to_string(in.index);
    const auto &names = reader->names();
    if (std::find(names.begin(), names.end(), name) == names.end())
      fail("no tensor '" + name + "' (one per model input, [N, " +
           "*sample shape])");
    const rt::TensorInfo &info = reader->info(name);
    std::vector<int64_t> sample(in.shape.begin() + 1, in.shape.end());
    std::vector<int64_t> got(info.shape.begin() + (info.shape.empty() ? 0 : 1),
                             info.shape.end());
    if (info.shape.empty() || info.shape[0] < 1 || got != sample)
      fail("'" + name + "' has shape " + shapeText(info.shape) +
           "; the model's input " + std::to_string(in.index) + " needs [N, " +
           shapeText(sample).substr(1));
    if (dtypeOfInput(in.dtype) != rt::dtypeName(info.dtype))
      fail("'" + name + "' is " + rt::dtypeName(info.dtype) + ", the input is " +
           in.dtype);
    int64_t rows = info.shape[0];
    if (numSamples_ && rows != numSamples_)
      fail("'" + name + "' has " + std::to_string(rows) + " samples, another "
           "input " + std::to_string(numSamples_));
    numSamples_ = rows;
    Column &column = columns_[in.index];
    column.bytes.resize(info.end - info.begin);
    column.rowBytes = int64_t(column.bytes.size()) / rows;
    reader->read(name, column.bytes.data(), int64_t(column.bytes.size()));
    if (in.maxId < 0 || (info.dtype != rt::DType::I64 &&
                         info.dtype != rt::DType::I32))
      continue;
    int64_t n = int64_t(column.bytes.size()) / rt::dtypeSize(info.dtype);
    for (int64_t i = 0; i < n; ++i) {
      int64_t id = 0;
      if (info.dtype == rt::DType::I64)
        std::memcpy(&id, column.bytes.data() + 8 * i, 8);
      else {
        int32_t v;
        std::memcpy(&v, column.bytes.data() + 4 * i, 4);
        id = v;
      }
      if ((id < 0 || id >= in.maxId) && id != in.ignoreId)
        fail("'" + name + "' holds id " + std::to_string(id) + " at element " +
             std::to_string(i) + ", outside [0, " + std::to_string(in.maxId) +
             ")" +
             (in.ignoreId ? " and not the ignore_index " +
                                std::to_string(*in.ignoreId)
                          : std::string()));
    }
  }
}

const uint8_t *TensorDataset::sample(int64_t index, int64_t g) const {
  const Column &column = columns_.at(index);
  return column.bytes.data() + (g % numSamples_) * column.rowBytes;
}

} // namespace driver
} // namespace fsdp
