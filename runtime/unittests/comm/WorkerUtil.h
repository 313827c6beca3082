//===- WorkerUtil.h - Helpers of the multi-process comm worker --*- C++ -*-===//
//
// Each rank of a multi-process test is one fsdprt_comm_worker process. It
// can compute every rank's input itself (inputOf is a pure function of rank
// and index), so it checks its results against a straightforward float64
// reference without talking to anyone but the runtime under test.
//
// Exit codes: 0 pass, 1 a check failed (message on stderr, "FAIL: ..."),
// 3 an expected runtime error happened ("ERROR: <fsdprt_last_error()>").
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_UNITTESTS_COMM_WORKERUTIL_H
#define FSDP_RT_UNITTESTS_COMM_WORKERUTIL_H

#include "fsdp/rt/fsdprt.h"

#include <cstdint>
#include <string>
#include <vector>

namespace worker {

constexpr int kExitFail = 1;
constexpr int kExitRuntimeError = 3;

[[noreturn]] void failCheck(const std::string &message);
/// Exits with kExitRuntimeError and the runtime's message unless OK.
void rt(int32_t status, const char *call);
#define RT(call) ::worker::rt((call), #call)

/// Small integers (|x| <= 8): exact in bf16 and f16, and sums of a few ranks
/// stay exact, so sum/max results must match the reference bit for bit.
double inputOf(int32_t rank, int64_t index, uint32_t salt);

int64_t dtypeBytes(int32_t dtype);
std::vector<uint8_t> encode(int32_t dtype, const std::vector<double> &values);
std::vector<double> decode(int32_t dtype, const std::vector<uint8_t> &bytes);
/// Relative tolerance: half an ulp of the storage type for one rounding,
/// doubled for the one extra rounding of a division.
double tolerance(int32_t dtype);
const char *dtypeLabel(int32_t dtype);

void expectNear(const std::vector<double> &got, const std::vector<double> &want,
                double rtol, const std::string &what);

/// One rank's runtime: context, default stream, helpers to move data.
struct Rank {
  Rank(int32_t rank, int32_t worldSize);
  ~Rank();
  int64_t upload(const std::vector<uint8_t> &bytes);
  int64_t alloc(int64_t bytes);
  std::vector<uint8_t> download(int64_t buf, int64_t bytes);
  void sync();

  int32_t rank, worldSize;
  int64_t ctx = 0;
  static constexpr int64_t stream = FSDPRT_DEFAULT_STREAM;
};

int32_t envInt(const char *name, int32_t fallback);

} // namespace worker

#endif // FSDP_RT_UNITTESTS_COMM_WORKERUTIL_H
