//===- KvCache.cpp - Generation with a KV cache --------------------------===//

#include "runner/KvCache.h"

#include "fsdp/rt/fsdprt.h"
#include "runner/RankRuntime.h"

#include <cstring>
#include <sstream>
#include <stdexcept>

namespace fsdp {
namespace driver {

namespace {

constexpr int64_t kFirstCacheInput = 3;

[[noreturn]] void fail(const std::string &why) {
  throw std::runtime_error("--generate: the decode step " + why);
}

const InputInfo *input(const Program &p, int64_t index) {
  for (const InputInfo &in : p.inputs)
    if (in.index == index && in.microBatch == 0)
      return &in;
  return nullptr;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

} // namespace

int64_t KvCacheShape::bytes() const {
  int64_t total = 0;
  for (const Tensor &t : tensors)
    total += tensorBytes(t.cache->shape, t.cache->dtype);
  return total;
}

std::optional<KvCacheShape> kvCacheShape(const Program &p) {
  if (!p.output("cache.0"))
    return std::nullopt;
  KvCacheShape kv;
  kv.lm = languageModelShape(p);
  if (p.microBatches != 1)
    fail("must have one micro-batch");
  if (kv.lm.window != 1)
    fail("takes one token per row, not " + std::to_string(kv.lm.window));
  kv.positions = input(p, 2);
  if (!kv.positions || kv.positions->dtype != "i64" ||
      kv.positions->shape != std::vector<int64_t>{kv.lm.rows, 1})
    fail("must take the positions [batch, 1] in i64 as input 2");
  for (int64_t j = 0;; ++j) {
    const OutputInfo *row = p.output("cache." + std::to_string(j));
    if (!row)
      break;
    const InputInfo *cache = input(p, kFirstCacheInput + j);
    if (!cache)
      fail("returns \"cache." + std::to_string(j) + "\" but takes no input " +
           std::to_string(kFirstCacheInput + j) + " to hold it");
    const std::vector<int64_t> &c = cache->shape;
    if (c.size() != 3 || c[0] != kv.lm.rows || cache->dtype != row->dtype ||
        row->shape != std::vector<int64_t>{c[0], 1, c[2]} ||
        (j && c[1] != kv.length))
      fail("returns \"cache." + std::to_string(j) + "\" " +
           shapeText(row->shape) + " " + row->dtype + " for a cache input " +
           shapeText(c) + " " + cache->dtype +
           "; they must be [batch, 1, W] and [batch, S, W], one S for all");
    kv.length = c[1];
    kv.tensors.push_back({cache, row});
  }
  return kv;
}

std::string kvCacheReport(const Program &p) {
  std::optional<KvCacheShape> kv = kvCacheShape(p);
  if (!kv)
    return "";
  const InputInfo &first = *kv->tensors.front().cache;
  std::ostringstream out;
  out << "kv cache: " << kv->tensors.size() << " tensors of "
      << shapeText(first.shape) << " " << first.dtype << " (keys and values, "
      << kv->length << " positions), " << kv->bytes()
      << " bytes per rank in the persistent buffer\n";
  return out.str();
}

void checkCacheFits(const KvCacheShape &kv, int64_t promptTokens,
                    int64_t newTokens) {
  if (promptTokens > kv.length)
    throw std::runtime_error(
        "--generate: the prompt has " + std::to_string(promptTokens) +
        " tokens, more than the " + std::to_string(kv.length) +
        " positions of the compiled context (the KV cache's length)");
  // The last new token is drawn but never fed back: P + N - 1 positions.
  if (promptTokens + newTokens - 1 > kv.length)
    throw std::runtime_error(
        "--generate: " + std::to_string(promptTokens) + " prompt tokens and " +
        std::to_string(newTokens) + " new ones need " +
        std::to_string(promptTokens + newTokens - 1) +
        " positions, but the KV cache holds " + std::to_string(kv.length) +
        "; at most " + std::to_string(kv.length - promptTokens + 1) +
        " new tokens fit");
}

std::vector<std::vector<int64_t>>
generateCached(RankRuntime &rt, StepFn step, const StateBuffers &buffers,
               const Program &p, const KvCacheShape &kv,
               const std::vector<int64_t> &prompt, int64_t numSamples,
               int64_t newTokens, const SamplingOptions &sampling,
               uint64_t seed, int rank) {
  checkCacheFits(kv, int64_t(prompt.size()), newTokens);
  int64_t s = rt.streams[0];
  int64_t buffer = buffers.persistent;
  // Empty caches, zero targets.
  for (const InputInfo &in : p.inputs) {
    std::vector<uint8_t> zeros(size_t(tensorBytes(in.shape, in.dtype)), 0);
    check(fsdprt_copy_from_host(rt.ctx, s, buffer, in.offset, zeros.data(),
                                int64_t(zeros.size())),
          "zeroing an input");
    check(fsdprt_stream_synchronize(rt.ctx, s), "zeroing an input");
  }

  const LanguageModelShape &lm = kv.lm;
  std::vector<std::vector<int64_t>> contexts(numSamples, prompt);
  int64_t tokenBytes = dtypeBytes(lm.tokens->dtype);
  std::vector<uint8_t> ids(size_t(lm.rows * tokenBytes));
  std::vector<int64_t> positions(size_t(lm.rows));
  std::vector<uint8_t> logits(
      size_t(tensorBytes(lm.logits->shape, lm.logits->dtype)));
  int64_t last = int64_t(prompt.size()) + newTokens - 1;
  for (int64_t t = 0; t < last; ++t) {
    // Row r feeds sample r's token at position t (rows past the samples
    // repeat sample 0).
    for (int64_t r = 0; r < lm.rows; ++r) {
      int64_t id = contexts[r < numSamples ? r : 0][size_t(t)];
      std::memcpy(ids.data() + r * tokenBytes, &id,
                  size_t(tokenBytes)); // little-endian: i32 takes the low half
    }
    std::fill(positions.begin(), positions.end(), t);
    check(fsdprt_copy_from_host(rt.ctx, s, buffer, lm.tokens->offset,
                                ids.data(), int64_t(ids.size())),
          "copying the tokens");
    check(fsdprt_copy_from_host(rt.ctx, s, buffer, kv.positions->offset,
                                positions.data(),
                                int64_t(positions.size() * 8)),
          "copying the positions");
    rt.runStep(step, buffers, 0, seed, rank);
    for (const KvCacheShape::Tensor &c : kv.tensors) {
      int64_t rowBytes = c.cache->shape[2] * dtypeBytes(c.cache->dtype);
      for (int64_t r = 0; r < lm.rows; ++r)
        check(fsdprt_copy(rt.ctx, s, buffer,
                          c.cache->offset + (r * kv.length + t) * rowBytes,
                          buffer, c.row->offset + r * rowBytes, rowBytes),
              "writing the KV cache");
    }
    if (t + 1 < int64_t(prompt.size()))
      continue; // prefill: the next token is the prompt's
    check(fsdprt_copy_to_host(rt.ctx, s, logits.data(), buffer,
                              lm.logits->offset, int64_t(logits.size())),
          "reading the logits");
    check(fsdprt_stream_synchronize(rt.ctx, s), "reading the logits");
    for (int64_t r = 0; r < numSamples; ++r) {
      std::vector<float> row = logitsRow(logits, lm, r, 0);
      std::vector<int64_t> &ctx = contexts[r];
      ctx.push_back(
          sampleToken(row.data(), lm.vocab, sampling, r, int64_t(ctx.size())));
    }
  }
  check(fsdprt_stream_synchronize(rt.ctx, s), "writing the KV cache");
  return contexts;
}

} // namespace driver
} // namespace fsdp
