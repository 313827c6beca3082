//===- Bootstrap.cpp - Backend registry and the world rendezvous ----------===//
#include "fsdp/rt/Comm.h"

#include "backends/Builtin.h"
#include "InProcessStore.h"

#include "fsdp/rt/Error.h"

#include <map>
#include <mutex>
#include <sstream>

namespace fsdp {
namespace rt {

namespace {
std::mutex registryMutex;
// Built on first use, with the backends compiled into this library, so that
// registration from other static initialisers never sees an empty map.
std::map<std::string, CommFactory> &registry() {
  static std::map<std::string, CommFactory> factories = [] {
    std::map<std::string, CommFactory> m;
    registerBuiltinCommunicators(m);
    return m;
  }();
  return factories;
}
} // namespace

bool registerCommBackend(const std::string &name, CommFactory factory) {
  std::lock_guard<std::mutex> lock(registryMutex);
  return registry().emplace(name, std::move(factory)).second;
}

std::vector<std::string> commBackendNames() {
  std::lock_guard<std::mutex> lock(registryMutex);
  std::vector<std::string> names;
  for (const auto &entry : registry())
    names.push_back(entry.first);
  return names;
}

static std::vector<char> bytesOf(const std::string &s) {
  return std::vector<char>(s.begin(), s.end());
}

/// Every rank announces itself, then waits for all others. A second process
/// claiming the same rank, a rank started with another world size, and ranks
/// that never come are errors that name them.
static void join(Store &store, const LaunchInfo &launch,
                 std::chrono::milliseconds timeout) {
  std::string self = std::to_string(launch.rank);
  if (store.add("claim/" + self, 1) != 1)
    fail(Status::InvalidArgument, "rendezvous of job '", launch.jobId,
         "': rank ", launch.rank,
         " was claimed by another process (duplicate RANK?)");
  store.set("join/" + self, bytesOf(std::to_string(launch.worldSize)));
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (int32_t r = 0; r < launch.worldSize; ++r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    std::vector<char> size;
    try {
      size = store.get("join/" + std::to_string(r),
                       std::max(left, std::chrono::milliseconds(0)));
    } catch (const Error &e) {
      // Rank r is missing. List the later ones too while the store still
      // answers (rank 0 gives up at about the same time and takes the
      // store with it).
      std::ostringstream missing;
      missing << r;
      try {
        for (int32_t m = r + 1; m < launch.worldSize; ++m)
          if (!store.check("join/" + std::to_string(m)))
            missing << ", " << m;
      } catch (const Error &) {
      }
      fail(Status::IO, "rendezvous of job '", launch.jobId, "' failed after ",
           timeout.count(), " ms on rank ", launch.rank, ": rank(s) ",
           missing.str(), " of ", launch.worldSize, " never joined (", e.what(),
           ")");
    }
    if (std::string(size.begin(), size.end()) !=
        std::to_string(launch.worldSize))
      fail(Status::InvalidArgument, "rendezvous of job '", launch.jobId,
           "': rank ", r, " was started with world size ",
           std::string(size.begin(), size.end()), ", rank ", launch.rank,
           " with ", launch.worldSize);
  }
}

std::unique_ptr<Communicator> createCommunicator(const std::string &backend,
                                                 const LaunchInfo &launch,
                                                 const CommOptions &options) {
  CommFactory factory;
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    auto it = registry().find(backend);
    if (it == registry().end()) {
      std::ostringstream known;
      for (const auto &entry : registry())
        known << " " << entry.first;
      fail(Status::Unsupported, "unknown communicator backend '", backend,
           "' (built:", known.str(), ")");
    }
    factory = it->second;
  }
  if (launch.worldSize < 1 || launch.rank < 0 ||
      launch.rank >= launch.worldSize)
    fail(Status::InvalidArgument, "rank ", launch.rank,
         " is not in [0, world size ", launch.worldSize, ")");
  if (options.collectiveTimeout.count() <= 0 ||
      options.rendezvousTimeout.count() <= 0)
    fail(Status::InvalidArgument, "timeouts must be positive");

  std::shared_ptr<Store> store;
  if (launch.worldSize == 1) {
    store = std::make_shared<comm::InProcessStore>();
  } else if (launch.agentStore) {
    // torchrun's store: shared with the agent, and kept across restarts of
    // the group, so each attempt's keys live apart. The leading "/" is the
    // one torch's own clients put before every key: from Python these are
    // store.get("fsdprt/<job>/attempt_<n>/...").
    store = std::make_shared<PrefixStore>(
        "/fsdprt/" + launch.jobId + "/attempt_" +
            std::to_string(launch.restartCount),
        std::make_shared<C10dStore>(launch.masterAddr, launch.masterPort,
                                    options.rendezvousTimeout));
  } else {
    TcpStoreOptions storeOptions;
    storeOptions.host = launch.masterAddr;
    storeOptions.port = launch.masterPort;
    storeOptions.bindHost = options.storeBindAddress;
    storeOptions.jobId = launch.jobId;
    storeOptions.isServer = launch.rank == 0;
    storeOptions.listenFd = launch.rank == 0 ? launch.storeFd : -1;
    storeOptions.timeout = options.rendezvousTimeout;
    store = std::make_shared<TcpStore>(storeOptions);
  }
  join(*store, launch, options.rendezvousTimeout);

  CommSetup setup;
  setup.store = std::make_shared<PrefixStore>("world", store);
  setup.group.name = "world";
  for (int32_t r = 0; r < launch.worldSize; ++r)
    setup.group.ranks.push_back(r);
  setup.globalRank = launch.rank;
  setup.launch = launch;
  setup.options = options;
  return factory(setup);
}

} // namespace rt
} // namespace fsdp
