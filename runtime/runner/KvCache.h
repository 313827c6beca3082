//===- KvCache.h - Generation with a KV cache ------------------*- C++ -*-===//
//
// `fsdp-run DECODE --generate N` where DECODE is a decode step (the gpt2 and
// llama builders' kv_cache=True, python/fsdp_mlir/models/kv_cache.py): one
// token per row at a run-time position p attends to the keys and values of
// positions 0..p-1, which the program reads from cache inputs in its
// persistent buffer (the arena) and extends by its own. The contract:
//
//   inputs   0 token ids [B, 1], 1 targets [B, 1] (zero), 2 positions
//            [B, 1] (p, i64), 3 + j cache tensor j [B, S, W]
//   outputs  "logits" [B, 1, V], "cache.j" [B, 1, W]: this token's key or
//            value, written here into row p of input 3 + j after the step
//
// Each context position is one step (the prompt too: prefill is the decode
// step over the prompt's tokens), so a context of P + N - 1 positions must
// fit in the S cache rows; nothing slides. Positions 0..p-1 are computed
// once, where the eval program's recompute path (Generate.h) runs the whole
// window again for every token. Every rank feeds the same rows and writes
// the same cache rows, so every rank draws the same tokens.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_KVCACHE_H
#define FSDP_DRIVER_KVCACHE_H

#include "runner/Generate.h"
#include "runner/RankRuntime.h"
#include "runner/Sampler.h"
#include "runner/StepProgram.h"

#include <optional>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

/// A decode step's inputs and outputs (the contract above).
struct KvCacheShape {
  struct Tensor {
    const InputInfo *cache = nullptr; // [B, S, W]
    const OutputInfo *row = nullptr;  // [B, 1, W]: "cache.j"
  };
  LanguageModelShape lm; // tokens [B, 1], logits [B, 1, V]
  const InputInfo *positions = nullptr;
  std::vector<Tensor> tensors;
  int64_t length = 0; // S: the positions the cache holds
  /// Bytes of all cache tensors on one rank.
  int64_t bytes() const;
};

/// The decode-step shape of `p`, or nullopt for a program that returns no
/// "cache.0" (an eval program: the recompute path). Throws
/// std::runtime_error naming what breaks the contract.
std::optional<KvCacheShape> kvCacheShape(const Program &p);

/// The report line of the cache's memory, for a decode step; empty for
/// other programs.
std::string kvCacheReport(const Program &p);

/// Throws std::runtime_error, before anything runs, when a prompt of
/// `promptTokens` and `newTokens` more do not fit in the cache.
void checkCacheFits(const KvCacheShape &kv, int64_t promptTokens,
                    int64_t newTokens);

/// `numSamples` copies of `prompt`, each continued by `newTokens` tokens
/// drawn from the decode step `p`'s logits, the keys and values in the
/// cache (its inputs zeroed first).
std::vector<std::vector<int64_t>>
generateCached(RankRuntime &rt, StepFn step, const StateBuffers &buffers,
               const Program &p, const KvCacheShape &kv,
               const std::vector<int64_t> &prompt, int64_t numSamples,
               int64_t newTokens, const SamplingOptions &sampling,
               uint64_t seed, int rank);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_KVCACHE_H
