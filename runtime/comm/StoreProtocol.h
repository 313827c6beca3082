//===- StoreProtocol.h - Wire format of the rendezvous store ----*- C++ -*-===//
//
// A frame is a 4-byte magic "FSK1", a 4-byte big-endian payload length
// (at most kMaxPayload) and a CBOR map (nlohmann::json's CBOR codec, which
// carries binary values without base64). The magic and the length bound
// make a stray client (a port scanner, an HTTP request, another job's
// different protocol version) fail fast instead of making the server
// allocate or wait for garbage.
//
// Request:  {"job": str, "op": "set"|"get"|"check"|"add", "key": str,
//            "value": bytes (set), "n": int (add), "wait_ms": int (get)}
// Reply:    {"ok": true, "value": bytes?, "n": int?, "found": bool?}
//           {"ok": false, "error": str}
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RT_COMM_STOREPROTOCOL_H
#define FSDP_RT_COMM_STOREPROTOCOL_H

#include "Socket.h"

#include <nlohmann/json.hpp>

#include <optional>

namespace fsdp {
namespace rt {
namespace comm {

constexpr uint32_t kMaxPayload = 64u << 20;
constexpr size_t kMaxKeyLength = 4096;

void writeFrame(Socket &socket, const nlohmann::json &message,
                Deadline deadline);
/// Returns nullopt on a clean close before the frame; throws Error(Format)
/// on a bad magic, an oversized length or a payload that is not a CBOR map.
std::optional<nlohmann::json> readFrame(Socket &socket, Deadline deadline);

} // namespace comm
} // namespace rt
} // namespace fsdp

#endif // FSDP_RT_COMM_STOREPROTOCOL_H
