//===- Backend.cpp - Backend defaults and the backend registry ------------===//
#include "fsdp/rt/backend/Backend.h"
#include "Arena.h"
#include "backends/Builtin.h"
#include "fsdp/rt/Error.h"

#include <cstdlib>

#include <map>
#include <mutex>

namespace fsdp {
namespace rt {

Backend::~Backend() = default;

void *Backend::allocateHost(int64_t bytes) {
  void *p = std::aligned_alloc(Arena::kAlignment, Arena::roundUp(bytes));
  if (!p)
    fail(Status::OutOfMemory, "cannot allocate a ", bytes,
         "-byte host buffer");
  return p;
}
void Backend::deallocateHost(void *ptr) { std::free(ptr); }

// Without step graphs: each entry refuses (graphBegin first, so the others
// are never reached through a Context).
[[noreturn]] static void refuseGraphs(const Backend &b) {
  fail(Status::Unsupported, "the ", b.name(),
       " backend has no step graphs (CUDA graphs)");
}
void *Backend::graphBegin(int64_t) { refuseGraphs(*this); }
void Backend::graphJoin() {}
void Backend::graphLeave() {}
int64_t Backend::graphEnd() { refuseGraphs(*this); }
void Backend::graphLaunch(int64_t, const void *, int64_t) {
  refuseGraphs(*this);
}
void Backend::graphDestroy(int64_t) {}

namespace {
struct Registry {
  std::mutex mutex;
  std::map<std::string, BackendFactory> factories;
  // The backends this library was built with (backends/Builtin.cpp);
  // others (the tests' host emulation of the CUDA backend) call
  // registerBackend.
  Registry() { registerBuiltinBackends(factories); }
};
} // namespace

// Built on first use so that registration from other static initialisers
// (future backends) cannot run before the map exists.
static Registry &registry() {
  static Registry r;
  return r;
}

bool registerBackend(const std::string &name, BackendFactory factory) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  return registry().factories.emplace(name, std::move(factory)).second;
}

std::vector<std::string> registeredBackends() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  std::vector<std::string> names;
  for (auto &entry : registry().factories)
    names.push_back(entry.first);
  return names;
}

std::unique_ptr<Backend> createBackend(const std::string &name,
                                       int numThreads) {
  BackendFactory factory;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    auto it = registry().factories.find(name);
    if (it != registry().factories.end())
      factory = it->second;
  }
  if (!factory) {
    std::string known;
    for (const std::string &n : registeredBackends())
      known += (known.empty() ? "" : ", ") + n;
    fail(Status::Unsupported, "unknown backend '", name,
         "' (available: ", known, ")");
  }
  return factory(numThreads);
}

} // namespace rt
} // namespace fsdp
