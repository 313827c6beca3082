//===- Sampler.h - Choosing the next token from logits ---------*- C++ -*-===//
//
// nanoGPT's sample.py rule: logits / temperature, keep the top k, softmax,
// draw one. Temperature 0 is greedy (argmax, the first on ties). Every draw
// is a pure function of (seed, sample, position): Philox, as dropout and
// initialisation, so a sample does not depend on the world size.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_SAMPLER_H
#define FSDP_DRIVER_SAMPLER_H

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

struct SamplingOptions {
  double temperature = 1.0; // 0: greedy
  int64_t topK = 0;         // 0: the whole vocabulary
  uint64_t seed = 0;
};

/// The token drawn for sample `sample` at context position `position` from
/// one row of `vocab` logits.
int64_t sampleToken(const float *logits, int64_t vocab,
                    const SamplingOptions &options, int64_t sample,
                    int64_t position);

/// Token ids of `text` for a byte-level vocabulary (each byte an id, as the
/// runner reads text data); throws std::invalid_argument naming the first
/// byte at or above `vocab`.
std::vector<int64_t> byteTokens(const std::string &text, int64_t vocab);

/// Ids of a comma-separated list ("3,17,5"), each in [0, vocab); throws
/// std::invalid_argument naming the bad entry.
std::vector<int64_t> parseTokenIds(const std::string &list, int64_t vocab);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_SAMPLER_H
