//===- Data.h - The inputs of each training step ----------------*- C++ -*-===//
//
// A step consumes a global batch of G = batchPerRank x worldSize x
// microBatches samples; sample j of step s is global sample g = s*G + j.
// Rank r takes samples j = r, r+W, r+2W, ... (torch DistributedSampler's
// interleaving) and puts its k-th one in micro-batch k / batchPerRank, row
// k % batchPerRank. What a sample contains depends only on g, never on the
// world size, so runs at different world sizes see the same global batches.
//
// Sources:
//  - "synthetic": every element a function of (seed, input index, g,
//    element): floats N(0,1), integers uniform in [0, max_id).
//  - a token file, for language models (inputs 0 = tokens and 1 = targets,
//    both integer [B, T]): `.bin` holds uint16 ids (nanoGPT), `.u32` and
//    `.bin32` uint32 ids, anything else is text whose bytes are the ids. The
//    stream is cut into numWindows = (len-1)/T windows; epoch e = g /
//    numWindows visits them in the order of a permutation seeded by (seed, e)
//    (Fisher-Yates on Philox numbers), so sample g reads window
//    perm_e(g mod numWindows): tokens = ids[start, start+T), targets =
//    ids[start+1, start+T+1) with start = window * T. The file is read into
//    memory and every id is checked against the vocabulary when opened.
//  - a `.safetensors` tensor dataset (TensorDataset.h): sample g is row
//    g mod N of "input.<index>", for any model.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_DATA_H
#define FSDP_DRIVER_DATA_H

#include "runner/Program.h"
#include "runner/TensorDataset.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fsdp {
namespace driver {

class DataSource {
public:
  /// `source` is "synthetic" or a file path. Throws std::runtime_error for
  /// unreadable or malformed files, ids outside the vocabulary, a file too
  /// short for one window, or a file given to a model that is not a
  /// language model.
  DataSource(const std::string &source, const Program &program,
             uint64_t seed);

  /// One host byte vector per entry of program.inputs (same order), in the
  /// entry's dtype and shape: this rank's share of step `step`.
  void fill(int64_t step, int rank, int worldSize,
            std::vector<std::vector<uint8_t>> &inputBytes);

  /// Global samples (G) per step, times T for a language model.
  int64_t tokensPerStep() const;

  /// Inputs 0 and 1 are integer [B, T] tokens and next-token targets.
  bool isLanguageModel() const { return lm_; }
  bool isSynthetic() const { return synthetic_; }
  /// Token ids in the file (0 when synthetic).
  int64_t numTokens() const;
  /// Windows of T tokens per epoch (0 when synthetic).
  int64_t numWindows() const { return numWindows_; }

private:
  void loadFile(const std::string &path);
  void checkVocabulary(const std::string &path) const;
  uint32_t tokenAt(int64_t i) const;
  const std::vector<int64_t> &permutation(int64_t epoch);
  void fillEntry(const InputInfo &in, int64_t step, int rank, int worldSize,
                 std::vector<uint8_t> &bytes);

  std::vector<InputInfo> inputs_;
  int64_t batch_ = 0;
  int64_t microBatches_ = 1;
  int worldSize_ = 1;
  uint64_t seed_ = 0;
  bool synthetic_ = true;
  bool lm_ = false;
  int64_t seqLen_ = 0;   // T (language models)
  int64_t vocab_ = -1;   // smallest max_id of inputs 0 and 1; -1: unknown
  std::vector<uint8_t> raw_; // the file's bytes
  int tokenBytes_ = 1;       // 1 (text), 2 (.bin) or 4 (.u32, .bin32)
  int64_t numWindows_ = 0;
  std::map<int64_t, std::vector<int64_t>> perms_; // a few recent epochs
  std::unique_ptr<TensorDataset> tensors_;        // --data FILE.safetensors
};

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_DATA_H
