//===- InProcessStore.h - The store of a one-process job --------*- C++ -*-===//
//
// A job of one rank has nobody to rendezvous with; serving a TCP port for it
// would only make two single-process jobs on one machine collide on
// MASTER_PORT. Same semantics as the TCP store, in memory.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_COMM_INPROCESSSTORE_H
#define FSDP_RT_COMM_INPROCESSSTORE_H

#include "fsdp/rt/CommStore.h"
#include "fsdp/rt/Error.h"

#include <condition_variable>
#include <map>
#include <string>

namespace fsdp {
namespace rt {
namespace comm {

class InProcessStore : public Store {
public:
  void set(const std::string &key, const std::vector<char> &value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    data_[key] = value;
    changed_.notify_all();
  }
  std::vector<char> get(const std::string &key,
                        std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return data_.count(key); }))
      fail(Status::IO, "rendezvous timed out after ", timeout.count(),
           " ms waiting for key '", key, "'");
    return data_[key];
  }
  bool check(const std::string &key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return data_.count(key) > 0;
  }
  int64_t add(const std::string &key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<char> &v = data_[key];
    int64_t n = (v.empty() ? 0 : std::stoll(std::string(v.begin(), v.end()))) +
                delta;
    std::string text = std::to_string(n);
    v.assign(text.begin(), text.end());
    changed_.notify_all();
    return n;
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<char>> data_;
};

} // namespace comm
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMM_INPROCESSSTORE_H
