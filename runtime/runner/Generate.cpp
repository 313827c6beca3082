//===- Generate.cpp - Sampling text from an eval program ------------------===//

#include "runner/Generate.h"

#include "fsdp/rt/fsdprt.h"
#include "runner/KvCache.h"
#include "runner/RankRuntime.h"
#include "runner/Sampler.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <stdexcept>

namespace fsdp {
namespace driver {

LanguageModelShape languageModelShape(const Program &p) {
  auto fail = [](const std::string &why) {
    throw std::runtime_error("--generate: " + why);
  };
  if (p.mode != "eval")
    fail("this is a training program; compile the model with mode=eval "
         "(fsdp-pipeline) to generate from a checkpoint");
  LanguageModelShape lm;
  lm.logits = p.output("logits");
  if (!lm.logits)
    fail("the program returns no \"logits\": name them in the root "
         "forward's return (fsdp.return {names = [\"loss\", \"logits\"]} "
         "...), as the gpt2 and llama builders do");
  for (const InputInfo &in : p.inputs)
    if (in.index == 0 && in.microBatch == 0)
      lm.tokens = &in;
  const std::vector<int64_t> &shape = lm.logits->shape;
  if (lm.logits->dtype != "f32" && lm.logits->dtype != "bf16")
    fail("logits in " + lm.logits->dtype + "; f32 or bf16 are read");
  if (!lm.tokens || lm.tokens->shape.size() != 2 ||
      (lm.tokens->dtype != "i64" && lm.tokens->dtype != "i32"))
    fail("the model's first input must be integer token ids [batch, T]");
  if (shape.size() != 3 || shape[0] != lm.tokens->shape[0] ||
      shape[1] != lm.tokens->shape[1])
    fail("the logits must be [batch, T, vocab] for tokens [batch, T]");
  lm.rows = shape[0];
  lm.window = shape[1];
  lm.vocab = shape[2];
  return lm;
}

namespace {

std::vector<int64_t> promptIds(const RunOptions &o, int64_t vocab) {
  try {
    if (o.promptIds)
      return parseTokenIds(*o.promptIds, vocab);
    return byteTokens(o.prompt.value_or("\n"), vocab);
  } catch (const std::invalid_argument &e) {
    throw std::runtime_error(std::string("--generate: ") + e.what());
  }
}

} // namespace

std::vector<float> logitsRow(const std::vector<uint8_t> &bytes,
                             const LanguageModelShape &lm, int64_t row,
                             int64_t position) {
  std::vector<float> out(lm.vocab);
  int64_t first = (row * lm.window + position) * lm.vocab;
  if (lm.logits->dtype == "f32") {
    std::memcpy(out.data(), bytes.data() + first * 4, lm.vocab * 4);
    return out;
  }
  for (int64_t v = 0; v < lm.vocab; ++v) {
    uint16_t half;
    std::memcpy(&half, bytes.data() + (first + v) * 2, 2);
    uint32_t word = uint32_t(half) << 16;
    std::memcpy(&out[v], &word, 4);
  }
  return out;
}

namespace {

/// The text of byte-level ids, else the ids separated by spaces.
std::string render(const std::vector<int64_t> &ids, bool bytes) {
  std::string out;
  for (int64_t id : ids)
    out += bytes ? std::string(1, char(id))
                 : (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

/// Runs the program on token rows (lm.rows x lm.window ids, in its token
/// dtype, as bytes) and fills `logits` (their bytes).
using ForwardTokens = std::function<void(const std::vector<uint8_t> &rows,
                                         std::vector<uint8_t> &logits)>;

/// `numSamples` copies of `prompt`, each continued by `newTokens` tokens
/// drawn from the logits at its window's last position.
std::vector<std::vector<int64_t>>
continueContexts(const LanguageModelShape &lm,
                 const std::vector<int64_t> &prompt, int64_t numSamples,
                 int64_t newTokens, const SamplingOptions &sampling,
                 const ForwardTokens &forward) {
  std::vector<std::vector<int64_t>> contexts(numSamples, prompt);
  int64_t tokenBytes = dtypeBytes(lm.tokens->dtype);
  std::vector<uint8_t> rows(size_t(lm.rows * lm.window * tokenBytes));
  std::vector<uint8_t> logits(
      size_t(tensorBytes(lm.logits->shape, lm.logits->dtype)));
  for (int64_t t = 0; t < newTokens; ++t) {
    // Row s holds sample s's last T tokens (rows past the samples repeat
    // sample 0), padded after them with id 0.
    std::fill(rows.begin(), rows.end(), 0);
    for (int64_t r = 0; r < lm.rows; ++r) {
      const std::vector<int64_t> &ctx = contexts[r < numSamples ? r : 0];
      int64_t n = std::min<int64_t>(int64_t(ctx.size()), lm.window);
      for (int64_t i = 0; i < n; ++i) {
        int64_t id = ctx[ctx.size() - n + i];
        std::memcpy(
            rows.data() + (r * lm.window + i) * tokenBytes, &id,
            size_t(tokenBytes)); // little-endian: i32 takes the low half
      }
    }
    forward(rows, logits);
    for (int64_t s = 0; s < numSamples; ++s) {
      std::vector<int64_t> &ctx = contexts[s];
      int64_t last = std::min<int64_t>(int64_t(ctx.size()), lm.window) - 1;
      std::vector<float> row = logitsRow(logits, lm, s, last);
      ctx.push_back(
          sampleToken(row.data(), lm.vocab, sampling, s, int64_t(ctx.size())));
    }
  }
  return contexts;
}

} // namespace

std::vector<std::vector<int64_t>>
generateTokens(RankRuntime &rt, StepFn step, const StateBuffers &buffers,
               const Program &p, const std::vector<int64_t> &prompt,
               int64_t numSamples, int64_t newTokens,
               const SamplingOptions &sampling, uint64_t seed, int rank) {
  if (std::optional<KvCacheShape> kv = kvCacheShape(p))
    return generateCached(rt, step, buffers, p, *kv, prompt, numSamples,
                          newTokens, sampling, seed, rank);
  LanguageModelShape lm = languageModelShape(p);
  int64_t s = rt.streams[0];
  // Inputs other than the tokens (targets, later micro-batches) stay zero:
  // id 0 is in every vocabulary and nothing reads their effect.
  for (const InputInfo &in : p.inputs) {
    std::vector<uint8_t> zeros(size_t(tensorBytes(in.shape, in.dtype)), 0);
    check(fsdprt_copy_from_host(rt.ctx, s, buffers.persistent, in.offset,
                                zeros.data(), int64_t(zeros.size())),
          "zeroing an input");
    // The copy is queued: `zeros` must outlive it.
    check(fsdprt_stream_synchronize(rt.ctx, s), "zeroing an input");
  }
  return continueContexts(
      lm, prompt, numSamples, newTokens, sampling,
      [&](const std::vector<uint8_t> &rows, std::vector<uint8_t> &logits) {
        check(fsdprt_copy_from_host(rt.ctx, s, buffers.persistent,
                                    lm.tokens->offset, rows.data(),
                                    int64_t(rows.size())),
              "copying the tokens");
        rt.runStep(step, buffers, 0, seed, rank);
        check(fsdprt_copy_to_host(rt.ctx, s, logits.data(), buffers.persistent,
                                  lm.logits->offset, int64_t(logits.size())),
              "reading the logits");
        check(fsdprt_stream_synchronize(rt.ctx, s), "reading the logits");
      });
}

void generate(const RunOptions &o, StepProgram &program,
              const rt::LaunchInfo &launch) {
  const Program &p = program.program();
  LanguageModelShape lm = languageModelShape(p);
  if (o.numSamples > lm.rows)
    throw std::runtime_error("--num-samples " + std::to_string(o.numSamples) +
                             " is more than the " + std::to_string(lm.rows) +
                             " rows the program takes per rank");
  std::vector<int64_t> prompt = promptIds(o, lm.vocab);
  if (prompt.empty())
    throw std::runtime_error("--generate: the prompt is empty");
  if (std::optional<KvCacheShape> kv = kvCacheShape(p))
    checkCacheFits(*kv, int64_t(prompt.size()), o.generate);
  SamplingOptions sampling{o.temperature, o.topK, o.seed};
  int rank = launch.rank;

  RankRuntime rt;
  rt.setUp(o, p, launch);
  rt.initWeights(o, p, rank);
  auto start = std::chrono::steady_clock::now();
  std::vector<std::vector<int64_t>> contexts =
      generateTokens(rt, program.step(), rt.buffers(), p, prompt,
                     o.numSamples, o.generate, sampling, o.seed, rank);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (rank != 0)
    return;
  bool bytes = !o.promptIds && lm.vocab <= 256;
  std::unique_ptr<std::ofstream> metrics;
  if (!o.metrics.empty())
    metrics = std::make_unique<std::ofstream>(o.metrics);
  for (int64_t s = 0; s < o.numSamples; ++s) {
    std::vector<int64_t> tokens(contexts[s].begin() + prompt.size(),
                                contexts[s].end());
    std::cout << "sample " << s + 1 << "/" << o.numSamples << ":\n"
              << render(contexts[s], bytes) << "\n";
    if (metrics)
      *metrics << nlohmann::json{{"sample", s},
                                 {"prompt", prompt},
                                 {"tokens", tokens},
                                 {"seconds", seconds}}
                      .dump()
               << "\n";
  }
  std::cout << std::flush;
}

} // namespace driver
} // namespace fsdp
