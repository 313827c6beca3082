//===- StoreProtocol.cpp - Wire format of the rendezvous store ------------===//
#include "StoreProtocol.h"

#include "fsdp/rt/Error.h"

#include <cstring>

namespace fsdp {
namespace rt {
namespace comm {

static const char kMagic[4] = {'F', 'S', 'K', '1'};

void writeFrame(Socket &socket, const nlohmann::json &message,
                Deadline deadline) {
  std::vector<uint8_t> payload = nlohmann::json::to_cbor(message);
  if (payload.size() > kMaxPayload)
    fail(Status::InvalidArgument, "store message of ", payload.size(),
         " bytes exceeds the limit of ", kMaxPayload);
  uint8_t header[8];
  std::memcpy(header, kMagic, 4);
  uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i)
    header[4 + i] = static_cast<uint8_t>(n >> (24 - 8 * i));
  socket.sendAll(header, sizeof(header), deadline);
  socket.sendAll(payload.data(), payload.size(), deadline);
}

std::optional<nlohmann::json> readFrame(Socket &socket, Deadline deadline) {
  uint8_t header[8];
  if (!socket.recvAll(header, sizeof(header), deadline))
    return std::nullopt;
  if (std::memcmp(header, kMagic, 4) != 0)
    fail(Status::Format, "not a store message (bad magic)");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i)
    n = (n << 8) | header[4 + i];
  if (n > kMaxPayload)
    fail(Status::Format, "store message length ", n, " exceeds the limit");
  std::vector<uint8_t> payload(n);
  if (n > 0 && !socket.recvAll(payload.data(), n, deadline))
    fail(Status::Format, "store message truncated");
  nlohmann::json message =
      nlohmann::json::from_cbor(payload, /*strict=*/true,
                                /*allow_exceptions=*/false);
  if (message.is_discarded() || !message.is_object())
    fail(Status::Format, "store message is not a CBOR map");
  return message;
}

} // namespace comm
} // namespace rt
} // namespace fsdp
