//===- GlooStore.h - Our rendezvous store as Gloo's Store -------*- C++ -*-===//
//
// Gloo's rendezvous (connectFullMesh) exchanges every rank's listening
// address through a gloo::rendezvous::Store; Debian's Gloo snapshot ships
// only file/Redis/hash stores, so this adapts the TCP store. Waits are
// bounded by the rendezvous timeout even when Gloo calls the overload
// without one.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_COMM_GLOOSTORE_H
#define FSDP_RT_COMM_GLOOSTORE_H

#include "fsdp/rt/CommStore.h"

#include <gloo/rendezvous/store.h>

#include <memory>

namespace fsdp {
namespace rt {
namespace comm {

class GlooStore : public gloo::rendezvous::Store {
public:
  GlooStore(std::shared_ptr<rt::Store> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  void set(const std::string &key, const std::vector<char> &data) override {
    store_->set(key, data);
  }
  std::vector<char> get(const std::string &key) override {
    return store_->get(key, timeout_);
  }
  void wait(const std::vector<std::string> &keys) override {
    wait(keys, timeout_);
  }
  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &timeout) override {
    auto bound = std::min(timeout, timeout_);
    for (const std::string &key : keys)
      store_->get(key, bound);
  }

private:
  std::shared_ptr<rt::Store> store_;
  std::chrono::milliseconds timeout_;
};

} // namespace comm
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMM_GLOOSTORE_H
