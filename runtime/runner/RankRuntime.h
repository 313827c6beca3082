//===- RankRuntime.h - One rank's runtime for a compiled program -*- C++ -*-===//
//
// What every runner mode (training, evaluation, generation) sets up before
// calling the step: the context with the program's arena, the job's
// communicators, the step's streams (StepAbi.def), the persistent buffer at
// arena offset 0 holding the weights (initialised or loaded).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_RANKRUNTIME_H
#define FSDP_DRIVER_RANKRUNTIME_H

#include "runner/Checkpoint.h"
#include "runner/Program.h"
#include "runner/RunOptions.h"
#include "fsdp/rt/Comm.h"
#include "fsdp/rt/StepAbi.h"

#include <cstdint>
#include <string>

namespace fsdp {
namespace driver {

/// Throws with fsdprt_last_error() when a runtime call failed.
void check(int32_t status, const char *what);
inline void check(int32_t status, const std::string &what) {
  check(status, what.c_str());
}

struct RankRuntime {
  int64_t ctx = 0, world = 0, shard = 0, replicate = 0, persistent = 0;
  int64_t postForward = 0; // reshard_after_forward = N's group (0: none)
  /// The step's stream arguments, in StepAbi.def's order; [0] is the
  /// compute stream. The CPU offload streams are made on first use (0
  /// until then, and without offload).
  static constexpr int kNumStreams = 0
#define FSDPRT_STEP_STREAM(name, label, placement) +1
#include "fsdp/rt/StepAbi.def"
      ;
  int64_t streams[kNumStreams] = {};
  /// CPU offload: the host buffer (0 without).
  int64_t host = 0;
  StateBuffers buffers() const { return {persistent, host}; }
  RankRuntime() = default;
  RankRuntime(const RankRuntime &) = delete;
  RankRuntime &operator=(const RankRuntime &) = delete;
  ~RankRuntime();

  /// Creates the context (an arena of at least `minArenaBytes`), joins the
  /// job, names the streams and allocates the persistent buffer, as program
  /// `p` describes them.
  void setUp(const RunOptions &o, const Program &p,
             const rt::LaunchInfo &launch, int64_t minArenaBytes = 0);
  /// Fills the persistent buffer: from --load when given (returning what the
  /// checkpoint says), else with the seeded initialisation.
  LoadResult initWeights(const RunOptions &o, const Program &p, int rank);
  /// Calls the step on this rank's streams with its buffers and waits
  /// for it.
  void runStep(StepFn step, const StateBuffers &buffers, int64_t stepCount,
               uint64_t seed, int rank);
  /// The training step, as one CUDA graph where setUp enabled them: run
  /// eagerly once (cuDNN plans, cuBLASLt heuristics, workspaces), captured
  /// at its second call and launched from then on with each step's count,
  /// lr factor and loss scale. The ranks agree on it: a step that cannot be
  /// captured on some rank is run eagerly on every rank, now and later,
  /// after one line saying why.
  void runTrainingStep(StepFn step, int64_t stepCount, uint64_t seed,
                       int rank);

private:
  /// Calls the step on this rank's streams; its status (nothing waited for).
  int32_t issueStep(StepFn step, const StateBuffers &buffers,
                    int64_t stepCount, uint64_t seed, int rank);

  /// Whether `flag` holds on any rank (an all-reduce over the world, on
  /// the compute stream, between steps; none at one rank).
  bool onAnyRank(bool flag);
  /// Captures the step into graph_; why it could not be, "" if it was.
  std::string capture(StepFn step, int64_t stepCount, uint64_t seed, int rank);

  enum class Graphs { Off, Warmup, Capture, Ready };
  Graphs graphs_ = Graphs::Off;
  int64_t graph_ = 0;
  int32_t worldSize_ = 1;
  bool quiet_ = false;
  bool madeOffloadStreams_ = false;
};

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_RANKRUNTIME_H
