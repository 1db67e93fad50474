// Syslog severities (RFC 5424 order, most severe first), shared by the
// signature pack, correlation rules, detections and every output format.
#pragma once

#include <optional>
#include <string_view>

namespace gpuguard {

enum class Severity { kEmergency, kAlert, kCritical, kError, kWarning, kNotice, kInfo, kDebug };

inline constexpr Severity kAllSeverities[] = {
    Severity::kEmergency, Severity::kAlert,  Severity::kCritical, Severity::kError,
    Severity::kWarning,   Severity::kNotice, Severity::kInfo,     Severity::kDebug};

// "emergency", "alert", "critical", "error", "warning", "notice", "info", "debug"
inline const char* to_string(Severity severity) {
    switch (severity) {
        case Severity::kEmergency:
            return "emergency";
        case Severity::kAlert:
            return "alert";
        case Severity::kCritical:
            return "critical";
        case Severity::kError:
            return "error";
        case Severity::kWarning:
            return "warning";
        case Severity::kNotice:
            return "notice";
        case Severity::kInfo:
            return "info";
        case Severity::kDebug:
            return "debug";
    }
    return "unknown";
}

inline std::optional<Severity> parse_severity(std::string_view name) {
    for (Severity severity : kAllSeverities) {
        if (name == to_string(severity)) return severity;
    }
    return std::nullopt;
}

// The syslog level number (0 emergency .. 7 debug).
inline int syslog_level(Severity severity) { return static_cast<int>(severity); }

// At least as severe as `threshold` (kError passes a kWarning threshold).
inline bool at_least(Severity severity, Severity threshold) {
    return static_cast<int>(severity) <= static_cast<int>(threshold);
}

}  // namespace gpuguard
