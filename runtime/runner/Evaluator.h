//===- Evaluator.h - An eval program beside the training program -*- C++ -*-===//
//
// `fsdp-run TRAIN --eval-program EVAL --eval-every K --eval-data VAL`: the
// eval program (mode=eval, same model and mesh) runs in the training rank's
// context between steps, when the training step's transients are free. Its
// planned buffers are placed after the training program's persistent
// buffer (fsdprt_context_set_arena_base); its persistent buffer exists only
// during an evaluation and receives the training weights by device copies,
// unit shard by unit shard, so nothing is gathered beyond what its forward
// gathers. A unit must have the same flat layout in both programs (names,
// shapes, offsets, shard size): true unless a training unit keeps frozen
// parameters in a flat parameter of their own.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_EVALUATOR_H
#define FSDP_DRIVER_EVALUATOR_H

#include "runner/Data.h"
#include "runner/RankRuntime.h"
#include "runner/Sampler.h"
#include "runner/StepProgram.h"

#include <cstdint>
#include <functional>
#include <vector>

namespace fsdp {
namespace driver {

class Evaluator {
public:
  /// Checks that `eval` evaluates `train`'s model on its mesh with the same
  /// flat layouts; throws std::runtime_error naming what differs.
  Evaluator(const RunOptions &o, const Program &train, StepProgram &eval);

  /// The arena the training context needs for the evaluation to fit, with
  /// the scratch the weights of whole eval units are gathered through.
  int64_t arenaBytes() const;

  /// The mean loss over the ranks and --eval-batches batches (the same
  /// batches every time, from the data's start) of the weights in
  /// `rt` now. Collective: every rank calls it.
  double evaluate(RankRuntime &rt, int rank, int worldSize);
  /// The same on one batch the caller gives (a byte vector per entry of
  /// the eval program's inputs): the in-process session's evaluate().
  double evaluateOn(RankRuntime &rt, int rank,
                    const std::vector<std::vector<uint8_t>> &batch);
  const Program &program() const { return eval_; }
  /// `numSamples` copies of `prompt` continued by `newTokens` tokens each
  /// with the weights in `rt` now, as fsdprt-run --generate continues them
  /// (Generate.h; the eval program must return "logits"). Collective.
  std::vector<std::vector<int64_t>>
  generate(RankRuntime &rt, int rank, const std::vector<int64_t> &prompt,
           int64_t numSamples, int64_t newTokens,
           const SamplingOptions &sampling);

private:
  /// Runs `body` with the eval program's persistent buffer holding the
  /// training weights, in the arena after the training program's.
  void withWeights(RankRuntime &rt,
                   const std::function<void(StateBuffers &)> &body);
  using BatchFill =
      std::function<void(int64_t, std::vector<std::vector<uint8_t>> &)>;
  double run(RankRuntime &rt, int rank, int64_t batches,
             const BatchFill &fill);
  struct Copy {
    int64_t from, to, bytes; // training and eval image offsets
  };
  /// A unit whose weights the eval program keeps whole (compiled no-shard,
  /// or fsdp-fit-memory-budget's choice for a decode step) where the
  /// training program shards them: one all-gather per unit per call.
  struct Gather {
    const UnitInfo *train; // the sharded unit
    int64_t to;            // the eval image offset of the whole flat weights
  };
  const Program &train_, &eval_;
  StepFn step_;
  std::vector<Copy> copies_;
  std::vector<Gather> gathers_;
  std::vector<const UnitInfo *> gatheredUnits() const;
  DataSource data_;
  int64_t base_;
  int64_t batches_;
  uint64_t seed_;
};

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_EVALUATOR_H
