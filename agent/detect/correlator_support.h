// The correlator's private helpers, shared by its .cpp files: the order of
// actions, when evidence is new, detection ids.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "correlator_impl.h"
#include "gpuguard/common/ip_address.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/netintel/stratum.h"

namespace gpuguard::agent {

using rules::CorrelationRule;
using rules::EvidenceField;

// The agent's probes of suspected pools: peers asked for per process, and
// the answers kept (ProcessEvidence::probes_asked, ::probes).
inline constexpr size_t kMaxProbesPerProcess = 2;
inline constexpr size_t kMaxProbesKept = 8;

// Strength order of actions, for "from_signatures": the strongest wins.
inline int action_rank(std::string_view action) {
    static constexpr std::string_view kOrder[] = {"alert",    "pause", "block_ip",
                                                  "deny_gpu", "kill",  "kill_now"};
    for (size_t i = 0; i < std::size(kOrder); ++i) {
        if (kOrder[i] == action) return static_cast<int>(i);
    }
    return 0;
}

// Evidence of these kinds is new when its value is (each signature hit,
// each file changed, each module loaded); of others once per field (an
// event or a telemetry condition, whose numbers change every sample).
inline bool evidence_by_value(std::string_view kind, std::string_view event_type,
                              std::string_view field) {
    return kind == "signature" || kind == "yara" || event_type == "file_change" ||
           event_type == "gpu_fault" || field == "module";
}

inline std::string basename_of(std::string_view path) {
    const auto slash = path.rfind('/');
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// FNV-1a: detection ids must be the same live and in replay, on any host.
inline uint64_t fnv1a(std::string_view text, uint64_t hash = 1469598103934665603ull) {
    for (unsigned char c : text) {
        hash ^= c;
        hash *= 1099511628211ull;
    }
    return hash;
}

inline std::string detection_id(const std::string& rule_id, uint32_t pid, uint64_t first_ns) {
    const uint64_t hash =
        fnv1a(rule_id + "/" + std::to_string(pid) + "/" + std::to_string(first_ns));
    std::string text(16, '0');  // "%016" PRIx64
    for (int i = 15, shift = 0; i >= 0; --i, shift += 4) {
        text[i] = "0123456789abcdef"[(hash >> shift) & 0xf];
    }
    return text;
}

}  // namespace gpuguard::agent
