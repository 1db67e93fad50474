// The network-intelligence events (NetPayload, Stratum) in their other
// forms: the ring-buffer record (bpf/payload.h) and JSON (docs/events.md).
// Kept apart from event_decode.cpp/event_json.cpp/event_parse.cpp, which
// call these for the two types.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpuguard/events/event.h"
#include "gpuguard/common/result.h"

namespace gpuguard::agent {

// A GG_EVENT_NET_PAYLOAD record -> Event. kParse on a short record, a
// captured length beyond the record, or an unknown family/direction/syscall.
Result<Event> decode_net_payload_record(std::span<const std::byte> record);

nlohmann::ordered_json net_payload_to_json(const NetPayload& payload);
nlohmann::ordered_json stratum_to_json(const Stratum& stratum);

// Bodies of "net_payload" and "stratum" lines; kParse naming the field
// ("data: not base64").
Result<NetPayload> net_payload_from_json(const nlohmann::json& body);
Result<Stratum> stratum_from_json(const nlohmann::json& body);

// RFC 4648 base64 (the JSON form of captured bytes).
std::string base64_encode(std::string_view bytes);
Result<std::string> base64_decode(std::string_view text);

}  // namespace gpuguard::agent
