//===- Sampler.cpp - Choosing the next token from logits ------------------===//

#include "runner/Sampler.h"

#include "fsdp/rt/math/Philox.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fsdp {
namespace driver {

int64_t sampleToken(const float *logits, int64_t vocab,
                    const SamplingOptions &options, int64_t sample,
                    int64_t position) {
  if (options.temperature == 0)
    return std::max_element(logits, logits + vocab) - logits;
  // The candidates, best first (ties by id, so the order is deterministic).
  std::vector<int64_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  int64_t keep = options.topK > 0 ? std::min(options.topK, vocab) : vocab;
  auto better = [&](int64_t a, int64_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), better);
  ids.resize(keep);
  // softmax(logits / T) over the kept ids, in double.
  std::vector<double> weights(keep);
  double top = double(logits[ids[0]]) / options.temperature, total = 0;
  for (int64_t i = 0; i < keep; ++i)
    total += weights[i] =
        std::exp(double(logits[ids[i]]) / options.temperature - top);
  // One 53-bit uniform per (sample, position).
  rt::Philox4x32 bits =
      rt::philoxBlock(options.seed, uint64_t(position), uint64_t(sample), 0);
  uint64_t word = (uint64_t(bits.v[0]) << 32) | bits.v[1];
  double u = double(word >> 11) * 0x1.0p-53 * total;
  for (int64_t i = 0; i < keep; ++i) {
    u -= weights[i];
    if (u < 0)
      return ids[i];
  }
  return ids[keep - 1]; // rounding left u at the very end
}

std::vector<int64_t> byteTokens(const std::string &text, int64_t vocab) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < text.size(); ++i) {
    int64_t id = static_cast<unsigned char>(text[i]);
    if (id >= vocab)
      throw std::invalid_argument("byte " + std::to_string(i) +
                                  " of the prompt is " + std::to_string(id) +
                                  ", outside the model's vocabulary of " +
                                  std::to_string(vocab) + " tokens");
    ids.push_back(id);
  }
  return ids;
}

std::vector<int64_t> parseTokenIds(const std::string &list, int64_t vocab) {
  std::vector<int64_t> ids;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos)
      end = list.size();
    std::string entry = list.substr(start, end - start);
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(entry, &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (entry.empty() || used != entry.size())
      throw std::invalid_argument("token " + std::to_string(ids.size()) +
                                  " of the prompt ids is '" + entry +
                                  "', not an integer");
    if (id < 0 || id >= vocab)
      throw std::invalid_argument(
          "token " + std::to_string(ids.size()) + " of the prompt ids is " +
          std::to_string(id) + ", outside the model's vocabulary of " +
          std::to_string(vocab) + " tokens");
    ids.push_back(id);
    start = end + 1;
  }
  return ids;
}

} // namespace driver
} // namespace fsdp
