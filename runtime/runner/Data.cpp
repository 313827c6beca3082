//===- Data.cpp - The inputs of each training step ------------------------===//
#include "runner/Data.h"
#include "runner/TensorDataset.h"

#include "fsdp/rt/math/Half.h"
#include "fsdp/rt/math/Philox.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <sstream>
#include <stdexcept>

namespace fsdp {
namespace driver {
namespace {

constexpr double kPi = 3.14159265358979323846;
/// Philox counter word that separates the epoch permutations from the
/// synthetic samples (whose words 2-3 are the global sample index).
constexpr uint32_t kPermStream = 0x5045524du; // "PERM"

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool isIntDType(const std::string &d) { return d == "i32" || d == "i64"; }

int64_t numelOf(const std::vector<int64_t> &shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1},
                         std::multiplies<int64_t>());
}

std::string describeInputs(const std::vector<InputInfo> &inputs) {
  std::ostringstream os;
  for (const InputInfo &in : inputs) {
    if (in.microBatch != 0)
      continue;
    os << (os.tellp() > 0 ? ", " : "") << in.index << ": " << in.dtype << " [";
    for (size_t i = 0; i < in.shape.size(); ++i)
      os << (i ? ", " : "") << in.shape[i];
    os << "]";
  }
  return os.str();
}

/// Inputs 0 and 1 (and nothing else) are integer ids of one [B, T] shape.
bool looksLikeLanguageModel(const std::vector<InputInfo> &inputs) {
  std::set<int64_t> indices;
  for (const InputInfo &in : inputs) {
    indices.insert(in.index);
    if (!isIntDType(in.dtype) || in.shape.size() != 2 ||
        in.shape != inputs.front().shape)
      return false;
  }
  return indices == std::set<int64_t>{0, 1};
}

/// 64 random bits -> an integer in [0, n) by multiply-shift (bias below
/// n / 2^64).
uint64_t below(uint64_t bits, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * n) >>
                               64);
}

uint64_t bits64(const rt::Philox4x32 &r, int lane) {
  return (static_cast<uint64_t>(r.v[lane]) << 32) | r.v[lane + 1];
}

/// The random block of one element of one synthetic sample.
rt::Philox4x32 sampleBits(uint64_t seed, int64_t input, int64_t sample,
                          int64_t element) {
  rt::Philox4x32 ctr{{static_cast<uint32_t>(element),
                      static_cast<uint32_t>(input),
                      static_cast<uint32_t>(sample),
                      static_cast<uint32_t>(static_cast<uint64_t>(sample) >>
                                            32)}};
  return rt::philox4x32_10(ctr, static_cast<uint32_t>(seed),
                           static_cast<uint32_t>(seed >> 32));
}

/// Standard normal by Box-Muller in double (53-bit uniforms).
double standardNormal(const rt::Philox4x32 &r) {
  double u1 = 1.0 - static_cast<double>(bits64(r, 0) >> 11) * 0x1.0p-53;
  double u2 = static_cast<double>(bits64(r, 2) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
}

void storeInt(const std::string &dtype, int64_t v, uint8_t *dst) {
  if (dtype == "i64") {
    std::memcpy(dst, &v, 8);
  } else {
    int32_t w = static_cast<int32_t>(v);
    std::memcpy(dst, &w, 4);
  }
}

void storeFloat(const std::string &dtype, double v, uint8_t *dst) {
  float f = static_cast<float>(v);
  if (dtype == "f32") {
    std::memcpy(dst, &f, 4);
    return;
  }
  uint16_t h = dtype == "bf16" ? rt::floatToBf16(f) : rt::floatToF16(f);
  std::memcpy(dst, &h, 2);
}

} // namespace

DataSource::DataSource(const std::string &source, const Program &program,
                       uint64_t seed)
    : inputs_(program.inputs), batch_(program.batchPerRank()),
      microBatches_(program.microBatches), worldSize_(program.worldSize),
      seed_(seed), synthetic_(source == "synthetic"),
      lm_(looksLikeLanguageModel(program.inputs)) {
  if (batch_ <= 0)
    throw std::runtime_error("data: the step has no batched inputs");
  for (const InputInfo &in : inputs_) {
    if (in.index <= 1 && in.maxId > 0)
      vocab_ = vocab_ < 0 ? in.maxId : std::min(vocab_, in.maxId);
    if (synthetic_ && isIntDType(in.dtype) && in.maxId <= 0)
      throw std::runtime_error(
          "synthetic data: integer input " + std::to_string(in.index) +
          " has no known range (max_id), so its ids cannot be generated");
  }
  if (lm_)
    seqLen_ = inputs_.front().shape[1];
  if (synthetic_)
    return;
  if (endsWith(source, ".safetensors")) {
    tensors_ = std::make_unique<TensorDataset>(source, inputs_);
    return;
  }
  if (!lm_)
    throw std::runtime_error(
        "--data FILE needs a model whose inputs are token ids and next-token "
        "targets (two integer [batch, seq] inputs); this model's inputs are " +
        describeInputs(inputs_) + "; use --data synthetic");
  loadFile(source);
}

void DataSource::loadFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw std::runtime_error("data file '" + path +
                             "' cannot be opened: " + std::strerror(errno));
  raw_.assign(std::istreambuf_iterator<char>(file),
              std::istreambuf_iterator<char>());
  if (file.bad())
    throw std::runtime_error("data file '" + path + "': read error");
  tokenBytes_ = endsWith(path, ".bin")                               ? 2
                : endsWith(path, ".u32") || endsWith(path, ".bin32") ? 4
                                                                     : 1;
  if (raw_.size() % tokenBytes_ != 0)
    throw std::runtime_error(
        "data file '" + path + "': " + std::to_string(raw_.size()) +
        " bytes is not a whole number of uint" +
        std::to_string(8 * tokenBytes_) + " token ids");
  if (numTokens() < seqLen_ + 1)
    throw std::runtime_error(
        "data file '" + path + "' has " + std::to_string(numTokens()) +
        " tokens; a window of " + std::to_string(seqLen_) +
        " tokens and its shifted targets need at least " +
        std::to_string(seqLen_ + 1));
  checkVocabulary(path);
  numWindows_ = (numTokens() - 1) / seqLen_;
}

void DataSource::checkVocabulary(const std::string &path) const {
  if (vocab_ < 0)
    return;
  for (int64_t i = 0, n = numTokens(); i < n; ++i) {
    uint32_t id = tokenAt(i);
    if (id >= static_cast<uint64_t>(vocab_))
      throw std::runtime_error("data file " + path + ": token id " +
                               std::to_string(id) + " at position " +
                               std::to_string(i) +
                               " is out of range for a vocabulary of " +
                               std::to_string(vocab_));
  }
}

int64_t DataSource::numTokens() const {
  return static_cast<int64_t>(raw_.size()) / tokenBytes_;
}

uint32_t DataSource::tokenAt(int64_t i) const {
  const uint8_t *p = raw_.data() + i * tokenBytes_;
  // Little-endian, as numpy's tofile writes on every machine we target.
  uint32_t id = 0;
  for (int b = tokenBytes_ - 1; b >= 0; --b)
    id = (id << 8) | p[b];
  return id;
}

const std::vector<int64_t> &DataSource::permutation(int64_t epoch) {
  auto it = perms_.find(epoch);
  if (it != perms_.end())
    return it->second;
  if (perms_.size() >= 4)
    perms_.erase(perms_.begin()); // epochs only move forward
  std::vector<int64_t> &perm = perms_[epoch];
  perm.resize(numWindows_);
  std::iota(perm.begin(), perm.end(), int64_t{0});
  for (int64_t i = numWindows_ - 1; i > 0; --i) {
    rt::Philox4x32 r = rt::philoxBlock(seed_, static_cast<uint64_t>(epoch),
                                       kPermStream, static_cast<uint64_t>(i));
    std::swap(perm[i], perm[below(bits64(r, 0), i + 1)]);
  }
  return perm;
}

void DataSource::fillEntry(const InputInfo &in, int64_t step, int rank,
                           int worldSize, std::vector<uint8_t> &bytes) {
  int64_t esize = dtypeBytes(in.dtype);
  int64_t rowNumel = numelOf(in.shape) / batch_;
  int64_t globalBatch = batch_ * worldSize * microBatches_;
  bytes.assign(numelOf(in.shape) * esize, 0);
  for (int64_t row = 0; row < batch_; ++row) {
    int64_t k = in.microBatch * batch_ + row; // this rank's k-th sample
    int64_t g = step * globalBatch + rank + k * worldSize;
    uint8_t *dst = bytes.data() + row * rowNumel * esize;
    if (tensors_) {
      std::memcpy(dst, tensors_->sample(in.index, g), rowNumel * esize);
      continue;
    }
    if (!synthetic_) {
      const std::vector<int64_t> &perm = permutation(g / numWindows_);
      // Input 1 (targets) is input 0 (tokens) shifted by one.
      int64_t start = perm[g % numWindows_] * seqLen_ + in.index;
      for (int64_t t = 0; t < rowNumel; ++t)
        storeInt(in.dtype, tokenAt(start + t), dst + t * esize);
      continue;
    }
    for (int64_t e = 0; e < rowNumel; ++e) {
      rt::Philox4x32 r = sampleBits(seed_, in.index, g, e);
      if (isIntDType(in.dtype))
        storeInt(in.dtype,
                 static_cast<int64_t>(below(bits64(r, 0), in.maxId)),
                 dst + e * esize);
      else
        storeFloat(in.dtype, standardNormal(r), dst + e * esize);
    }
  }
}

void DataSource::fill(int64_t step, int rank, int worldSize,
                      std::vector<std::vector<uint8_t>> &inputBytes) {
  if (step < 0 || worldSize < 1 || rank < 0 || rank >= worldSize)
    throw std::runtime_error("data: step " + std::to_string(step) +
                             " for rank " + std::to_string(rank) + " of " +
                             std::to_string(worldSize) + " is invalid");
  inputBytes.resize(inputs_.size());
  for (size_t i = 0; i < inputs_.size(); ++i)
    fillEntry(inputs_[i], step, rank, worldSize, inputBytes[i]);
}

int64_t DataSource::tokensPerStep() const {
  int64_t samples = batch_ * worldSize_ * microBatches_;
  return lm_ ? samples * seqLen_ : samples;
}

} // namespace driver
} // namespace fsdp
