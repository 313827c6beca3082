//===- Metrics.h - Per-step training metrics --------------------*- C++ -*-===//
//
// What fsdp-run reports for each optimizer step: a JSON-lines file (one
// object per step, flushed as it is written, so a crashed or still-running
// job can be read and plotted) and a one-line human summary on rank 0.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_METRICS_H
#define FSDP_DRIVER_METRICS_H

#include <cstdint>
#include <fstream>
#include <limits>
#include <string>

namespace fsdp {
namespace driver {

struct StepMetrics {
  int64_t step = 0;        // 1-based optimizer step
  double loss = 0;         // mean over ranks and micro-batches
  double stepTimeS = 0;    // wall time of the step
  double tokensPerS = 0;   // global tokens (or samples) per second
  int64_t peakBytes = 0;   // arena high water of this rank
  // The device memory held at once (arena + per-call scratch), largest
  // over ranks; -1 where the backend does not track it (CPU).
  int64_t devicePeakBytes = -1;
  // Of that, what this rank's backend holds beside the arena between calls,
  // each counted once: GEMM workspaces and per-call scratch reserves; -1
  // where not tracked (CPU).
  int64_t gemmWorkspaceBytes = -1;
  int64_t scratchReserveBytes = -1;
  // The communicators' device memory (NCCL's buffers; in the device peak
  // too); -1 where the device is not tracked (CPU).
  int64_t commDeviceBytes = -1;
  double commExposedS = 0; // compute stream blocked on communication
  double gradNorm = std::numeric_limits<double>::quiet_NaN(); // NaN: absent
  double lr = std::numeric_limits<double>::quiet_NaN(); // NaN: no optimizer
  // Dynamic loss scaling: the scale this step used (NaN: no scaler), whether
  // it skipped its update, and the steps skipped so far.
  double lossScale = std::numeric_limits<double>::quiet_NaN();
  bool skipped = false;
  int64_t skippedSteps = 0;
  // --eval-every: the mean loss of the eval program on --eval-data after
  // this step (NaN: not evaluated at this step).
  double valLoss = std::numeric_limits<double>::quiet_NaN();
};

/// The JSON object of one step, on one line without the newline. Keys:
/// step, loss, step_time_s, tokens_per_s, peak_bytes, then on a device
/// device_peak_bytes, gemm_workspace_bytes and scratch_reserve_bytes,
/// comm_exposed_s, then
/// lr and grad_norm unless they are NaN, and with a loss scaler loss_scale,
/// skipped (this step) and skipped_steps (so far), and val_loss after an
/// evaluation. A non-finite loss (a diverged run) is
/// written as null: JSON has no NaN or infinity.
std::string metricsJson(const StepMetrics &m);

/// Appends metricsJson lines to a file it creates or truncates.
class MetricsWriter {
public:
  /// Throws std::runtime_error naming the path if it cannot be opened.
  /// With keepThroughStep >= 0 (a resumed run) the file's lines of steps up
  /// to it stay and the run appends; the later ones (steps the interrupted
  /// run took after its last checkpoint) go.
  explicit MetricsWriter(const std::string &path, int64_t keepThroughStep = -1);
  /// Writes and flushes one line; throws std::runtime_error on failure.
  void write(const StepMetrics &m);
  const std::string &path() const { return path_; }

private:
  std::string path_;
  std::ofstream out_;
};

/// "512 B", "1.50 KiB", "1.25 MiB", "3.00 GiB", ... (binary units).
std::string formatBytes(int64_t bytes);

/// The line rank 0 prints after its first step on a device: what the
/// device's peak holds beside the arena (the plan's), e.g. "device memory
/// beside the arena, held from the first step on: GEMM workspace 32.00 MiB,
/// per-call scratch 192.38 MiB (sized by attention_backward)".
std::string describeDeviceReserve(const StepMetrics &m,
                                  const std::string &scratchOp);

/// Rank 0's progress line, e.g.
/// "step    3/100  loss 3.4512  2.31e+04 tok/s  step 0.089 s  peak 1.25 MiB
///  exposed comm 0.004 s" (one line), with "  lr 3.00e-04" and
/// "  grad norm 0.8123" appended when present, and with a loss scaler
/// "  scale 6.55e+04 (skipped 1)" (" skipped this step" when it was), and
/// "  val loss 2.3456" after an evaluation.
std::string formatProgressLine(const StepMetrics &m, int64_t totalSteps);

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_METRICS_H
