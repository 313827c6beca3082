//===- Context.cpp - One rank's runtime state -----------------------------===//
#include "Context.h"

#include <algorithm>

namespace fsdp {
namespace rt {

static int64_t checkedArenaBytes(int64_t bytes) {
  if (bytes <= 0)
    fail(Status::InvalidArgument, "arena size must be positive, got ", bytes);
  return bytes;
}

// How often the watchdog polls the device and NCCL: a failure ends the
// job within this of its detection; each poll costs microseconds.
constexpr std::chrono::milliseconds kWatchdogPeriod{20};

Context::Context(const std::string &backend, int32_t rank, int32_t worldSize,
                 int64_t arenaBytes, int numThreads)
    : rank_(rank), worldSize_(worldSize),
      delays_(DelayConfig::fromEnvironment()), numThreads_(numThreads),
      arena_(checkedArenaBytes(arenaBytes)),
      watchdog_(rank, kWatchdogPeriod) {
  if (worldSize < 1 || rank < 0 || rank >= worldSize)
    fail(Status::InvalidArgument, "rank ", rank, " is not in [0, world size ",
         worldSize, ")");
  backend_ = createBackend(backend, numThreads);
  base_ = static_cast<char *>(backend_->allocate(arenaBytes));
  defaultStream_ =
      std::make_shared<Stream>(trace_, "default", backend_->deviceOrdering());
}

Context::~Context() {
  // Stream destructors drain their queues, so every enqueued operation has
  // run before the arena memory goes away. Pending errors are dropped: a
  // destructor has nowhere to report them.
  defaultStream_.reset();
  streams_ = HandleTable<Stream>("stream");
  // A CUDA graph that captured NCCL collectives holds references on their
  // communicators, and ncclCommDestroy waits until every such graph is gone:
  // the graphs go before the members' destructors release the communicators
  // (a 2-rank run on an H200, 2026-11-28, hung at exit otherwise).
  graphs_.forEach([this](const std::shared_ptr<StepGraph> &g) {
    backend_->graphDestroy(g->backendId);
  });
  graphs_ = HandleTable<StepGraph>("graph");
  backend_->deallocate(base_);
}

int64_t Context::allocate(int64_t bytes) {
  DeviceMarkers waits;
  int64_t offset = arena_.allocate(bytes, &waits);
  return addBuffer(Buffer{offset, bytes, nullptr, std::move(waits)});
}

int64_t Context::addBuffer(Buffer b) {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_.insert(std::make_shared<Buffer>(std::move(b)));
}

void Context::setArenaBase(int64_t base) {
  if (base < 0 || base % Arena::kAlignment != 0)
    fail(Status::InvalidArgument, "arena base ", base,
         " is not a non-negative multiple of ", Arena::kAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  arenaBase_ = base;
}

int64_t Context::allocateAt(int64_t offset, int64_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    offset += arenaBase_;
  }
  DeviceMarkers waits;
  arena_.allocateAt(offset, bytes, &waits);
  return addBuffer(Buffer{offset, bytes, nullptr, std::move(waits)});
}

int64_t Context::allocateHost(int64_t bytes) {
  if (bytes <= 0)
    fail(Status::InvalidArgument, "host buffer size must be positive, got ",
         bytes);
  Backend *be = backend_.get();
  std::shared_ptr<char> memory(static_cast<char *>(be->allocateHost(bytes)),
                               [be](char *p) { be->deallocateHost(p); });
  return addBuffer(Buffer{0, bytes, std::move(memory), {}});
}

bool Context::isHostBuffer(int64_t buffer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_.get(buffer)->host != nullptr;
}

void Context::free(int64_t buffer, int64_t streamHandle) {
  std::shared_ptr<Stream> s = stream(streamHandle);
  std::shared_ptr<Buffer> b;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    b = buffers_.remove(buffer);
  }
  if (b->host) { // released when the stream gets here
    s->enqueue("buffer_free", [host = b->host] {}, /*alwaysRun=*/true);
    return;
  }
  arena_.markPending(b->offset);
  int64_t offset = b->offset;
  s->enqueue(
      "buffer_free",
      [this, offset] {
        delays_.apply(DelayPoint::Free);
        DeviceOrdering *device = backend_->deviceOrdering();
        arena_.release(offset, device ? device->record() : nullptr);
      },
      /*alwaysRun=*/true);
}

int64_t Context::bufferSize(int64_t buffer) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_.get(buffer)->size;
}

void *Context::resolve(int64_t buffer, int64_t offset, int64_t bytes,
                       const char *what) const {
  int64_t bOffset, bSize;
  char *base = base_;
  DeviceMarkers waits;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::shared_ptr<Buffer> b;
    try {
      b = buffers_.get(buffer);
    } catch (const Error &e) {
      fail(e.status(), what, ": ", e.what());
    }
    bOffset = b->offset;
    bSize = b->size;
    if (b->host)
      base = b->host.get();
    // Kept until the device has passed them (not only for the first use):
    // a call that fails after resolving must not lose them.
    auto &pending = b->reuseWaits;
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [](const auto &m) { return m->done(); }),
                  pending.end());
    waits = pending;
  }
  deferDeviceWaits(std::move(waits));
  if (offset < 0 || bytes < 0 || offset > bSize || bytes > bSize - offset)
    fail(Status::OutOfRange, what, ": bytes [", offset, ", ", offset + bytes,
         ") are outside buffer ", buffer, " of ", bSize, " bytes");
  return base + bOffset + offset;
}

int64_t Context::createStream() {
  auto s = std::make_shared<Stream>(trace_, "", backend_->deviceOrdering());
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_) // a stream made while capturing joins the capture
    joinCapture(*s);
  return streams_.insert(std::move(s));
}

int64_t Context::createHostStream() {
  auto s = std::make_shared<Stream>(trace_, "", nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  if (capture_)
    fail(Status::Unsupported, "a host stream cannot join a step graph");
  int64_t handle = streams_.insert(std::move(s));
  hostStreams_.insert(handle);
  return handle;
}

bool Context::isHostStream(int64_t handle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hostStreams_.count(handle) != 0;
}

Backend &Context::hostBackend() {
  if (backend_->hostAccessible())
    return *backend_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!hostBackend_)
    hostBackend_ = createBackend("cpu", numThreads_);
  return *hostBackend_;
}

void Context::destroyStream(int64_t handle) {
  if (handle == FSDPRT_DEFAULT_STREAM)
    fail(Status::InvalidArgument, "the default stream cannot be destroyed");
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = streams_.remove(handle);
    hostStreams_.erase(handle);
  }
  s->synchronize(); // Reports a pending failure instead of losing it.
}

std::shared_ptr<Stream> Context::stream(int64_t handle) const {
  if (handle == FSDPRT_DEFAULT_STREAM)
    return defaultStream_;
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_.get(handle);
}

std::vector<std::shared_ptr<Stream>> Context::allStreams() const {
  std::vector<std::shared_ptr<Stream>> all{defaultStream_};
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.forEach([&](const std::shared_ptr<Stream> &s) { all.push_back(s); });
  return all;
}

bool Context::capturing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return capture_ != nullptr;
}

void Context::synchronizeStream(int64_t handle) {
  std::shared_ptr<Stream> s = stream(handle);
  try {
    capturing() ? s->drain() : s->synchronize();
  } catch (const Error &) {
    watchdog_.check(); // the cause, where the stream failed from its abort
    throw;
  }
  watchdog_.check();
}

void Context::synchronizeAll() {
  bool issueOnly = capturing();
  std::optional<Error> first;
  for (const std::shared_ptr<Stream> &s : allStreams()) {
    try {
      issueOnly ? s->drain() : s->synchronize();
    } catch (const Error &e) {
      if (!first)
        first = e;
    }
  }
  watchdog_.check(); // the cause, where a stream failed from its abort
  if (first)
    throw *first;
}

int64_t Context::addCommunicator(std::shared_ptr<Communicator> comm) {
  if (comm->streamOrdered())
    watchdog_.addCommunicator(comm);
  std::lock_guard<std::mutex> lock(mutex_);
  return comms_.insert(std::move(comm));
}

int64_t Context::communicatorDeviceBytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t bytes = 0;
  comms_.forEach(
      [&](const std::shared_ptr<Communicator> &c) { bytes += c->deviceBytes(); });
  return bytes;
}

std::shared_ptr<Communicator> Context::communicator(int64_t handle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return comms_.get(handle);
}

void Context::destroyCommunicator(int64_t handle) {
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    comm = comms_.remove(handle);
  }
  watchdog_.removeCommunicator(comm.get());
  // Torn down outside the lock (closing connections takes time); work
  // still queued on streams holds its own reference.
  comm.reset();
}

int64_t Context::createEvent() {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.insert(std::make_shared<Event>());
}

void Context::destroyEvent(int64_t handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  events_.remove(handle);
}

std::shared_ptr<Event> Context::event(int64_t handle) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.get(handle);
}

void Context::beginCapture(int64_t stepCount) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (capture_)
      fail(Status::InvalidArgument, "a step graph is already being captured");
    // Its operations would run once, at the capture, not at each launch.
    if (!hostStreams_.empty())
      fail(Status::Unsupported,
           "a context with host streams (CPU offload's optimizer) cannot "
           "capture a step graph");
  }
  // Nothing in flight: every free marker from before is passed, and the
  // capture waits on none of them (a graph cannot wait outside itself).
  synchronizeAll();
  char *live = static_cast<char *>(backend_->graphBegin(kLiveBytes));
  std::lock_guard<std::mutex> lock(mutex_);
  capture_ = std::make_unique<StepGraph>(StepGraph{0, stepCount, 0, {}});
  captureLive_ = live;
  joinCapture(*defaultStream_);
  streams_.forEach([&](const std::shared_ptr<Stream> &s) { joinCapture(*s); });
}

void Context::joinCapture(Stream &s) {
  s.enqueue("graph_join", [this] { backend_->graphJoin(); }, true);
}

void *Context::liveValue(int64_t bytes, LiveRefresh refresh) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!capture_)
    return nullptr;
  int64_t offset = (capture_->liveBytes + 15) / 16 * 16;
  if (offset + bytes > kLiveBytes)
    fail(Status::Unsupported, "a captured step takes more than ", kLiveBytes,
         " bytes of per-step values");
  capture_->liveBytes = offset + bytes;
  capture_->values.push_back(LiveValue{offset, bytes, std::move(refresh)});
  return captureLive_ + offset;
}

int64_t Context::endCapture() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!capture_)
      fail(Status::InvalidArgument, "no step graph is being captured");
  }
  for (const std::shared_ptr<Stream> &s : allStreams())
    s->enqueue("graph_leave", [this] { backend_->graphLeave(); }, true);
  // Still capturing: waits for the issue only (the captured work has not
  // run), and returns the first stream error.
  std::optional<Error> first;
  try {
    synchronizeAll();
  } catch (const Error &e) {
    first = e;
  }
  std::shared_ptr<StepGraph> graph;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    graph = std::move(capture_);
    captureLive_ = nullptr;
  }
  try {
    graph->backendId = backend_->graphEnd();
  } catch (const Error &e) {
    if (!first)
      first = e;
  }
  // The markers recorded while capturing belong to the graph.
  arena_.forgetDeviceMarkers();
  std::lock_guard<std::mutex> lock(mutex_);
  buffers_.forEach(
      [](const std::shared_ptr<Buffer> &b) { b->reuseWaits.clear(); });
  if (first) {
    if (graph->backendId)
      backend_->graphDestroy(graph->backendId);
    throw *first;
  }
  return graphs_.insert(std::move(graph));
}

void Context::launchGraph(int64_t graphHandle, int64_t streamHandle,
                          int64_t stepCount) {
  std::shared_ptr<StepGraph> g;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    g = graphs_.get(graphHandle);
  }
  std::shared_ptr<Stream> s = stream(streamHandle);
  StepValues values{stepCount - g->stepCount, lrFactor_, lossScale_};
  auto live = std::make_shared<std::vector<char>>(g->liveBytes);
  for (const LiveValue &v : g->values)
    v.refresh(values, live->data() + v.offset);
  s->enqueue("step_graph", [this, g, live] {
    backend_->graphLaunch(g->backendId, live->data(),
                          static_cast<int64_t>(live->size()));
    // Its collectives are watched as one: the launch against the longest
    // collective timeout (the graph's own work adds little to it).
    DeviceOrdering *device = backend_->deviceOrdering();
    std::chrono::milliseconds timeout = watchdog_.longestTimeout();
    if (device && timeout.count() > 0) // 0: no communicator is watched
      watchdog_.watch(device->record(),
                      std::chrono::steady_clock::now() + timeout,
                      "the step graph (captured at step " +
                          std::to_string(g->stepCount + 1) + ")",
                      nullptr);
  });
}

void Context::destroyGraph(int64_t graphHandle) {
  std::shared_ptr<StepGraph> g;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    g = graphs_.remove(graphHandle);
  }
  synchronizeAll(); // its last launch has run
  backend_->graphDestroy(g->backendId);
}

} // namespace rt
} // namespace fsdp
