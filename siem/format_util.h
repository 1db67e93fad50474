// Helpers the formatters share: UTF-8 repair, timestamps, severity scales.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gpuguard/common/severity.h"

namespace gpuguard::siem {

// `text` with every invalid UTF-8 sequence replaced by U+FFFD (one per
// maximal invalid subpart, as the Unicode standard recommends).
std::string sanitize_utf8(std::string_view text);

// RFC 3339 UTC with microseconds: "2024-05-01T12:00:00.123456Z".
std::string rfc3339_utc(int64_t unix_ns);

// Milliseconds since the epoch (CEF rt, LEEF devTime, OCSF time).
inline int64_t unix_ms(int64_t unix_ns) { return unix_ns / 1000000; }

// OCSF severity_id: 1 informational .. 5 critical, 6 fatal.
int ocsf_severity_id(Severity severity);
const char* ocsf_severity_name(Severity severity);

// ECS event.risk_score 0..100.
int risk_score(Severity severity);

}  // namespace gpuguard::siem
