//===- StoreServer.cpp - Rank 0's rendezvous server -----------------------===//
#include "StoreServer.h"
#include "StoreProtocol.h"

#include "fsdp/rt/Error.h"

#include <cstdio>

namespace fsdp {
namespace rt {
namespace comm {

using nlohmann::json;

// Idle connections wait for their next request indefinitely (shutdown()
// wakes them); this only bounds a single read.
static Deadline idleDeadline() { return deadlineIn(std::chrono::hours(24)); }

StoreServer::StoreServer(const std::string &bindHost, int port,
                         std::string jobId)
    : StoreServer(Socket::listen(bindHost, port), std::move(jobId)) {}

StoreServer::StoreServer(Socket listener, std::string jobId)
    : jobId_(std::move(jobId)), listener_(std::move(listener)),
      port_(listener_.localPort()) {
  acceptThread_ = std::thread([this] { acceptLoop(); });
}

StoreServer::~StoreServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (Connection &c : connections_)
      c.socket->shutdown();
  }
  changed_.notify_all();
  listener_.shutdown();
  acceptThread_.join();
  for (Connection &c : connections_)
    c.thread.join();
}

void StoreServer::acceptLoop() {
  for (;;) {
    Socket s = listener_.accept();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!s.valid() || stopping_)
      return;
    auto socket = std::make_shared<Socket>(std::move(s));
    connections_.push_back(
        Connection{socket, std::thread([this, socket] { serve(socket); })});
  }
}

void StoreServer::serve(std::shared_ptr<Socket> socket) {
  try {
    for (;;) {
      std::optional<json> request = readFrame(*socket, idleDeadline());
      if (!request)
        return;
      bool close = false;
      json reply = handle(*request, close);
      writeFrame(*socket, reply, deadlineIn(std::chrono::seconds(60)));
      if (close)
        return;
    }
  } catch (const Error &e) {
    // Malformed frames and dead clients end only their own connection.
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_ && e.status() == Status::Format)
      std::fprintf(stderr, "fsdprt store: dropped a connection: %s\n",
                   e.what());
  } catch (const std::exception &) {
  }
  socket->shutdown();
}

static json errorReply(const std::string &message) {
  return json{{"ok", false}, {"error", message}};
}

json StoreServer::handle(const json &request, bool &close) {
  close = true; // Any rejected request also ends the connection.
  auto job = request.find("job");
  if (job == request.end() || !job->is_string())
    return errorReply("request without a job id");
  if (job->get<std::string>() != jobId_)
    return errorReply("request for job '" + job->get<std::string>() +
                      "' reached the store of job '" + jobId_ + "'");
  auto op = request.find("op");
  auto key = request.find("key");
  if (op == request.end() || !op->is_string() || key == request.end() ||
      !key->is_string() || key->get_ref<const std::string &>().empty() ||
      key->get_ref<const std::string &>().size() > kMaxKeyLength)
    return errorReply("request without a valid op and key");
  const std::string &name = op->get_ref<const std::string &>();
  const std::string &k = key->get_ref<const std::string &>();

  std::unique_lock<std::mutex> lock(mutex_);
  if (name == "set") {
    auto value = request.find("value");
    if (value == request.end() || !value->is_binary())
      return errorReply("set without a binary value");
    const auto &bin = value->get_binary();
    data_[k] = std::vector<char>(bin.begin(), bin.end());
    changed_.notify_all();
    close = false;
    return json{{"ok", true}};
  }
  if (name == "check") {
    close = false;
    return json{{"ok", true}, {"found", data_.count(k) > 0}};
  }
  if (name == "add") {
    auto n = request.find("n");
    if (n == request.end() || !n->is_number_integer())
      return errorReply("add without an integer n");
    int64_t current = 0;
    auto it = data_.find(k);
    if (it != data_.end())
      current = std::stoll(std::string(it->second.begin(), it->second.end()));
    current += n->get<int64_t>();
    std::string text = std::to_string(current);
    data_[k] = std::vector<char>(text.begin(), text.end());
    changed_.notify_all();
    close = false;
    return json{{"ok", true}, {"n", current}};
  }
  if (name == "get") {
    auto wait = request.find("wait_ms");
    if (wait == request.end() || !wait->is_number_integer() ||
        wait->get<int64_t>() < 0 || wait->get<int64_t>() > 24 * 3600 * 1000)
      return errorReply("get without a wait_ms in [0, 1 day]");
    auto until = deadlineIn(std::chrono::milliseconds(wait->get<int64_t>()));
    changed_.wait_until(lock, until,
                        [&] { return stopping_ || data_.count(k) > 0; });
    close = false;
    auto it = data_.find(k);
    if (it == data_.end())
      return json{{"ok", true}, {"found", false}};
    return json{{"ok", true},
                {"found", true},
                {"value", json::binary(std::vector<uint8_t>(
                              it->second.begin(), it->second.end()))}};
  }
  return errorReply("unknown op '" + name + "'");
}

} // namespace comm
} // namespace rt
} // namespace fsdp
