//===- Generate.h - Sampling text from an eval program ---------*- C++ -*-===//
//
// `fsdp-run EVAL --generate N`: a causal language model's eval program that
// returns "logits" [B, T, V] (the root forward names them) continues a
// prompt by N tokens. Each new token recomputes the forward over the last T
// tokens of the context (a decode step with a KV cache, KvCache.h, computes
// each position once instead; generateTokens takes that path for one), the
// window left-aligned in row s of micro-batch 0 and padded with id 0 after
// it, which a causal model never reads; the next token is drawn from the
// logits at the window's last position (Sampler.h). Sharded programs gather
// their units as in evaluation; every rank feeds the same rows, so every
// rank draws the same tokens and rank 0 prints them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_GENERATE_H
#define FSDP_DRIVER_GENERATE_H

#include "runner/RankRuntime.h"
#include "runner/RunOptions.h"
#include "runner/Sampler.h"
#include "runner/StepProgram.h"
#include "fsdp/rt/Comm.h"

#include <vector>

namespace fsdp {
namespace driver {

/// What generation needs of an eval program: token ids in, logits out.
struct LanguageModelShape {
  const InputInfo *tokens = nullptr;  // input 0 of micro-batch 0: [B, T]
  const OutputInfo *logits = nullptr; // [B, T, V]
  int64_t rows = 0, window = 0, vocab = 0;
};

/// Throws std::runtime_error naming what is missing when `p` cannot
/// generate (not eval, no logits, inputs that are not token ids).
LanguageModelShape languageModelShape(const Program &p);

/// Row `row` of the logits (their bytes) at position `position`, widened
/// to f32.
std::vector<float> logitsRow(const std::vector<uint8_t> &bytes,
                             const LanguageModelShape &lm, int64_t row,
                             int64_t position);

/// `numSamples` copies of `prompt`, each continued by `newTokens` tokens
/// drawn from the logits at its window's last position, running the eval
/// program `p` through `step` on `buffers` (its inputs zeroed first).
std::vector<std::vector<int64_t>>
generateTokens(RankRuntime &rt, StepFn step, const StateBuffers &buffers,
               const Program &p, const std::vector<int64_t> &prompt,
               int64_t numSamples, int64_t newTokens,
               const SamplingOptions &sampling, uint64_t seed, int rank);

/// Throws std::runtime_error for a program that cannot generate (not eval,
/// no logits, inputs that are not token ids), too many samples, or a prompt
/// outside the vocabulary.
void generate(const RunOptions &o, StepProgram &program,
              const rt::LaunchInfo &launch);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_GENERATE_H
