//===- Metrics.cpp - Per-step training metrics ----------------------------===//
#include "runner/Metrics.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace fsdp {
namespace driver {

using nlohmann::json;

/// nlohmann writes NaN and infinities as null too, but say so explicitly:
/// the file must stay valid JSON whatever the numbers are.
static json number(double v) { return std::isfinite(v) ? json(v) : json(); }

std::string metricsJson(const StepMetrics &m) {
  // An ordered object keeps the keys in the documented order for readers
  // who look at the file with their eyes.
  nlohmann::ordered_json j;
  j["step"] = m.step;
  j["loss"] = number(m.loss);
  j["step_time_s"] = number(m.stepTimeS);
  j["tokens_per_s"] = number(m.tokensPerS);
  j["peak_bytes"] = m.peakBytes;
  if (m.devicePeakBytes >= 0)
    j["device_peak_bytes"] = m.devicePeakBytes;
  if (m.gemmWorkspaceBytes >= 0)
    j["gemm_workspace_bytes"] = m.gemmWorkspaceBytes;
  if (m.scratchReserveBytes >= 0)
    j["scratch_reserve_bytes"] = m.scratchReserveBytes;
  if (m.commDeviceBytes >= 0)
    j["comm_device_bytes"] = m.commDeviceBytes;
  j["comm_exposed_s"] = number(m.commExposedS);
  if (!std::isnan(m.lr))
    j["lr"] = number(m.lr);
  if (!std::isnan(m.gradNorm))
    j["grad_norm"] = number(m.gradNorm);
  if (!std::isnan(m.lossScale)) {
    j["loss_scale"] = number(m.lossScale);
    j["skipped"] = m.skipped;
    j["skipped_steps"] = m.skippedSteps;
  }
  if (!std::isnan(m.valLoss))
    j["val_loss"] = number(m.valLoss);
  return j.dump();
}

namespace {
/// The lines of the metrics file at `path` whose step is at most `last`.
std::string linesThrough(const std::string &path, int64_t last) {
  std::ifstream in(path);
  std::string kept, line;
  while (std::getline(in, line)) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("step") && j["step"].is_number_integer() &&
        j["step"].get<int64_t>() <= last)
      kept += line + "\n";
  }
  return kept;
}
} // namespace

MetricsWriter::MetricsWriter(const std::string &path, int64_t keepThroughStep)
    : path_(path) {
  std::string kept =
      keepThroughStep >= 0 ? linesThrough(path, keepThroughStep) : "";
  out_.open(path, std::ios::out | std::ios::trunc);
  out_ << kept;
  if (!out_)
    throw std::runtime_error("cannot open metrics file '" + path +
                             "' for writing: " + std::strerror(errno));
}

void MetricsWriter::write(const StepMetrics &m) {
  out_ << metricsJson(m) << '\n';
  out_.flush();
  if (!out_)
    throw std::runtime_error("cannot write to metrics file '" + path_ + "'");
}

std::string formatBytes(int64_t bytes) {
  static const char *const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  char buf[64];
  if (bytes < 1024 && bytes > -1024) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
    return buf;
  }
  double v = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (std::fabs(v) >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  std::snprintf(buf, sizeof(buf), "%.2f %s", v, kUnits[unit]);
  return buf;
}

std::string describeDeviceReserve(const StepMetrics &m,
                                  const std::string &scratchOp) {
  std::string line = "device memory beside the arena, held from the first "
                     "step on: GEMM workspace " +
                     formatBytes(m.gemmWorkspaceBytes) + ", per-call scratch " +
                     formatBytes(m.scratchReserveBytes);
  if (!scratchOp.empty())
    line += " (sized by " + scratchOp + ")";
  if (m.commDeviceBytes > 0)
    line += ", communicators (NCCL) " + formatBytes(m.commDeviceBytes);
  return line;
}

std::string formatProgressLine(const StepMetrics &m, int64_t totalSteps) {
  // The step column is as wide as the total (at least 4), so successive
  // lines stay aligned.
  int width = std::max<int>(4, std::to_string(totalSteps).size());
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "step %*lld/%lld  loss %.4f  %.2e tok/s  step %.3f s  peak %s"
                "  exposed comm %.3f s",
                width, static_cast<long long>(m.step),
                static_cast<long long>(totalSteps), m.loss, m.tokensPerS,
                m.stepTimeS, formatBytes(m.peakBytes).c_str(), m.commExposedS);
  std::string line = buf;
  if (m.devicePeakBytes >= 0) // after "peak ...": the device's, scratch too
    line.insert(line.find("  exposed comm"),
                " (device " + formatBytes(m.devicePeakBytes) + ")");
  if (!std::isnan(m.lr)) {
    std::snprintf(buf, sizeof(buf), "  lr %.2e", m.lr);
    line += buf;
  }
  if (!std::isnan(m.gradNorm)) {
    std::snprintf(buf, sizeof(buf), "  grad norm %.4f", m.gradNorm);
    line += buf;
  }
  if (!std::isnan(m.lossScale)) {
    std::snprintf(buf, sizeof(buf), "  scale %.2e (skipped %lld)%s",
                  m.lossScale, static_cast<long long>(m.skippedSteps),
                  m.skipped ? " skipped this step" : "");
    line += buf;
  }
  if (!std::isnan(m.valLoss)) {
    std::snprintf(buf, sizeof(buf), "  val loss %.4f", m.valLoss);
    line += buf;
  }
  return line;
}

} // namespace driver
} // namespace fsdp
