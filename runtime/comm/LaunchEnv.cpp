//===- LaunchEnv.cpp - Launcher environment conventions -------------------===//
//
// The variables users already set for torchrun, mpirun and srun, so that the
// same binary runs under any of them (and under fsdp-run, which sets
// torchrun's). A malformed value is an error naming the variable: a typo
// must not silently turn N ranks into N single-process jobs.
//
//===----------------------------------------------------------------------===//
#include "fsdp/rt/Comm.h"

#include "fsdp/rt/Error.h"

#include <cstdlib>

namespace fsdp {
namespace rt {

using GetEnv = std::function<const char *(const char *)>;

static const char *value(const GetEnv &env, const char *name) {
  const char *v = env(name);
  return v && *v ? v : nullptr;
}

static int64_t integer(const GetEnv &env, const char *name, int64_t min,
                       int64_t max) {
  const char *v = value(env, name);
  char *end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < min || n > max)
    fail(Status::InvalidArgument, name, "='", v, "' is not an integer in [",
         min, ", ", max, "]");
  return n;
}

static int64_t durationMs(const char *name, int64_t fallback) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n <= 0 || n > 7 * 24 * 3600 * 1000LL)
    fail(Status::InvalidArgument, name, "='", v,
         "' is not a positive timeout in milliseconds");
  return n;
}

namespace {
struct Convention {
  const char *launcher, *rank, *size, *localRank, *localSize;
};
} // namespace

// In order of precedence: torchrun's names also serve fsdp-run and any
// launcher that exports them on top of its own.
static const Convention kConventions[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"mpirun", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
     "SLURM_NTASKS_PER_NODE"},
};

LaunchInfo LaunchInfo::fromEnvironment(const GetEnv &env) {
  LaunchInfo info;
  for (const Convention &c : kConventions) {
    bool hasRank = value(env, c.rank), hasSize = value(env, c.size);
    if (!hasRank && !hasSize)
      continue;
    if (!hasRank || !hasSize)
      fail(Status::InvalidArgument, c.launcher,
           " environment is incomplete: ", hasRank ? c.size : c.rank,
           " is not set but ", hasRank ? c.rank : c.size, " is");
    info.launcher = c.launcher;
    info.worldSize = static_cast<int32_t>(integer(env, c.size, 1, 1 << 24));
    info.rank =
        static_cast<int32_t>(integer(env, c.rank, 0, info.worldSize - 1));
    // Without local variables every rank is assumed to be on one host.
    info.localWorldSize =
        value(env, c.localSize)
            ? static_cast<int32_t>(integer(env, c.localSize, 1, info.worldSize))
            : info.worldSize;
    info.localRank = value(env, c.localRank)
                         ? static_cast<int32_t>(integer(
                               env, c.localRank, 0, info.localWorldSize - 1))
                         : info.rank % info.localWorldSize;
    break;
  }
  if (const char *addr = value(env, "MASTER_ADDR"))
    info.masterAddr = addr;
  if (value(env, "MASTER_PORT"))
    info.masterPort =
        static_cast<int32_t>(integer(env, "MASTER_PORT", 1, 65535));
  if (value(env, "FSDPRT_STORE_FD"))
    info.storeFd = static_cast<int32_t>(integer(env, "FSDPRT_STORE_FD", 0, 1 << 20));
  if (const char *agent = value(env, "TORCHELASTIC_USE_AGENT_STORE"))
    info.agentStore = std::string(agent) == "True";
  if (value(env, "TORCHELASTIC_RESTART_COUNT"))
    info.restartCount = static_cast<int32_t>(
        integer(env, "TORCHELASTIC_RESTART_COUNT", 0, 1 << 30));
  for (const char *name :
       {"FSDPRT_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID"}) {
    if (const char *id = value(env, name)) {
      info.jobId = id;
      break;
    }
  }
  return info;
}

LaunchInfo LaunchInfo::fromEnvironment() {
  return fromEnvironment([](const char *name) { return std::getenv(name); });
}

CommOptions CommOptions::fromEnvironment() {
  CommOptions o;
  o.collectiveTimeout = std::chrono::milliseconds(
      durationMs("FSDPRT_COLLECTIVE_TIMEOUT_MS", o.collectiveTimeout.count()));
  o.rendezvousTimeout = std::chrono::milliseconds(
      durationMs("FSDPRT_RENDEZVOUS_TIMEOUT_MS", o.rendezvousTimeout.count()));
  o.heartbeatTimeout = std::chrono::milliseconds(
      durationMs("FSDPRT_HEARTBEAT_TIMEOUT_MS", o.heartbeatTimeout.count()));
  if (const char *h = std::getenv("FSDPRT_GLOO_HOSTNAME"); h && *h)
    o.glooHostname = h;
  for (const char *name : {"FSDPRT_GLOO_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    if (const char *i = std::getenv(name); i && *i) {
      o.glooInterface = i;
      break;
    }
  }
  if (const char *b = std::getenv("FSDPRT_STORE_BIND_ADDR"); b && *b)
    o.storeBindAddress = b;
  return o;
}

} // namespace rt
} // namespace fsdp
