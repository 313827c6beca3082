//===- Context.cpp - One rank's runtime state -----------------------------===//
#include "fsdp/rt/Context.h"

#include <algorithm>

namespace fsdp {
namespace rt {

static int64_t checkedArenaBytes(int64_t bytes) {
  if (bytes <= 0)
    fail(Status::InvalidArgument, "arena size must be positive, got ", bytes);
  return bytes;
}

Context::Context(const std::string &backend, int32_t rank, int32_t worldSize,
                 int64_t arenaBytes, int numThreads)
    : rank_(rank), worldSize_(worldSize),
      delays_(DelayConfig::fromEnvironment()),
      arena_(checkedArenaBytes(arenaBytes)) {
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
  backend_->deallocate(base_);
}

int64_t Context::allocate(int64_t bytes) {
  DeviceMarkers waits;
  int64_t offset = arena_.allocate(bytes, &waits);
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_.insert(
      std::make_shared<Buffer>(Buffer{offset, bytes, std::move(waits)}));
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
  std::lock_guard<std::mutex> lock(mutex_);
  return buffers_.insert(
      std::make_shared<Buffer>(Buffer{offset, bytes, std::move(waits)}));
}

void Context::free(int64_t buffer, int64_t streamHandle) {
  std::shared_ptr<Stream> s = stream(streamHandle);
  std::shared_ptr<Buffer> b;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    b = buffers_.remove(buffer);
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
  return base_ + bOffset + offset;
}

int64_t Context::createStream() {
  auto s = std::make_shared<Stream>(trace_, "", backend_->deviceOrdering());
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_.insert(std::move(s));
}

void Context::destroyStream(int64_t handle) {
  if (handle == FSDPRT_DEFAULT_STREAM)
    fail(Status::InvalidArgument, "the default stream cannot be destroyed");
  std::shared_ptr<Stream> s;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    s = streams_.remove(handle);
  }
  s->synchronize(); // Reports a pending failure instead of losing it.
}

std::shared_ptr<Stream> Context::stream(int64_t handle) const {
  if (handle == FSDPRT_DEFAULT_STREAM)
    return defaultStream_;
  std::lock_guard<std::mutex> lock(mutex_);
  return streams_.get(handle);
}

void Context::synchronizeAll() {
  std::vector<std::shared_ptr<Stream>> all{defaultStream_};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams_.forEach(
        [&](const std::shared_ptr<Stream> &s) { all.push_back(s); });
  }
  std::optional<Error> first;
  for (const std::shared_ptr<Stream> &s : all) {
    try {
      s->synchronize();
    } catch (const Error &e) {
      if (!first)
        first = e;
    }
  }
  if (first)
    throw *first;
}

int64_t Context::addCommunicator(std::shared_ptr<Communicator> comm) {
  std::lock_guard<std::mutex> lock(mutex_);
  return comms_.insert(std::move(comm));
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

} // namespace rt
} // namespace fsdp
