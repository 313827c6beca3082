//===- TcpStore.cpp - Client side of the rendezvous store -----------------===//
#include "fsdp/rt/CommStore.h"

#include "Socket.h"
#include "StoreProtocol.h"
#include "StoreServer.h"

#include "fsdp/rt/Error.h"

namespace fsdp {
namespace rt {

using nlohmann::json;

Store::~Store() = default;

struct TcpStore::Reply {
  json body;
};

TcpStore::TcpStore(const TcpStoreOptions &options)
    : options_(options), port_(options.port) {
  if (options.jobId.empty())
    fail(Status::InvalidArgument, "rendezvous job id must not be empty");
  if (options.port < 0 || options.port > 65535 ||
      (options.port == 0 && !options.isServer))
    fail(Status::InvalidArgument, "rendezvous port ", options.port,
         " is not in [1, 65535]");
  if (options.isServer) {
    const std::string &bind =
        options.bindHost.empty() ? options.host : options.bindHost;
    server_ = options.listenFd >= 0
                  ? std::make_unique<comm::StoreServer>(
                        comm::Socket(options.listenFd), options.jobId)
                  : std::make_unique<comm::StoreServer>(bind, options.port,
                                                        options.jobId);
    port_ = server_->port();
  }
  try {
    conn_ = std::make_unique<comm::Socket>(comm::Socket::connect(
        options.host, port_, comm::deadlineIn(options.timeout)));
  } catch (const Error &e) {
    fail(Status::IO, "rendezvous store of job '", options.jobId, "' at ",
         options.host, ":", port_, " not reachable within ",
         options.timeout.count(), " ms: ", e.what());
  }
}

TcpStore::~TcpStore() {
  conn_.reset(); // Close our connection before the server joins its threads.
  server_.reset();
}

TcpStore::Reply TcpStore::request(const char *op, const std::string &key,
                                  const std::vector<char> *value,
                                  int64_t number,
                                  std::chrono::milliseconds wait) {
  json message{{"job", options_.jobId}, {"op", op}, {"key", key}};
  if (value)
    message["value"] =
        json::binary(std::vector<uint8_t>(value->begin(), value->end()));
  if (std::string(op) == "add")
    message["n"] = number;
  if (std::string(op) == "get")
    message["wait_ms"] = static_cast<int64_t>(wait.count());
  std::lock_guard<std::mutex> lock(mutex_);
  // The server answers a get after at most `wait`; the margin covers the
  // round trip, and a dead server still ends the call.
  comm::Deadline deadline = comm::deadlineIn(wait + options_.timeout);
  std::optional<json> reply;
  try {
    comm::writeFrame(*conn_, message, deadline);
    reply = comm::readFrame(*conn_, deadline);
  } catch (const Error &e) {
    fail(Status::IO, "rendezvous store ", options_.host, ":", port_, " (", op,
         " '", key, "'): ", e.what());
  }
  if (!reply)
    fail(Status::IO, "rendezvous store ", options_.host, ":", port_,
         " closed the connection (", op, " '", key, "'): has rank 0 exited?");
  auto ok = reply->find("ok");
  if (ok == reply->end() || !ok->is_boolean())
    fail(Status::Format, "rendezvous store sent a malformed reply");
  if (!ok->get<bool>()) {
    auto error = reply->find("error");
    fail(Status::InvalidArgument, "rendezvous store rejected ", op, " '", key,
         "': ",
         error != reply->end() && error->is_string()
             ? error->get<std::string>()
             : std::string("(no reason)"));
  }
  return Reply{std::move(*reply)};
}

void TcpStore::set(const std::string &key, const std::vector<char> &value) {
  request("set", key, &value, 0, std::chrono::milliseconds(0));
}

std::vector<char> TcpStore::get(const std::string &key,
                                std::chrono::milliseconds timeout) {
  Reply r = request("get", key, nullptr, 0, timeout);
  auto found = r.body.find("found");
  if (found == r.body.end() || !found->is_boolean() || !found->get<bool>())
    fail(Status::IO, "rendezvous of job '", options_.jobId,
         "' timed out after ", timeout.count(), " ms waiting for key '", key,
         "'");
  auto value = r.body.find("value");
  if (value == r.body.end() || !value->is_binary())
    fail(Status::Format, "rendezvous store sent a malformed reply");
  const auto &bin = value->get_binary();
  return std::vector<char>(bin.begin(), bin.end());
}

bool TcpStore::check(const std::string &key) {
  Reply r = request("check", key, nullptr, 0, std::chrono::milliseconds(0));
  auto found = r.body.find("found");
  return found != r.body.end() && found->is_boolean() && found->get<bool>();
}

int64_t TcpStore::add(const std::string &key, int64_t delta) {
  Reply r = request("add", key, nullptr, delta, std::chrono::milliseconds(0));
  auto n = r.body.find("n");
  if (n == r.body.end() || !n->is_number_integer())
    fail(Status::Format, "rendezvous store sent a malformed reply");
  return n->get<int64_t>();
}

} // namespace rt
} // namespace fsdp
