// The correlator's private helpers, shared by correlator.cpp (observe,
// evaluate), correlator_conditions.cpp (telemetry and policy conditions)
// and correlator_detections.cpp (raising and refreshing detections).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include <fnmatch.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/detect/correlator.h"
#include "gpuguard/netintel/stratum.h"

namespace gpuguard::agent {

using rules::CorrelationRule;
using rules::EvidenceField;

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
           field == "module";
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

// The protocol of a connection's first message, from its first bytes:
// "tls" (a handshake record), "http", "ssh", "json" (JSON-RPC, Stratum's
// family: judged by net_intel), else "opaque".
inline std::string first_bytes_protocol(std::string_view data) {
    if (data.size() >= 3 && data[0] == 0x16 && data[1] == 0x03) return "tls";
    if (data.starts_with("SSH-")) return "ssh";
    if (!data.empty() && (data.front() == '{' || data.front() == '[')) return "json";
    for (std::string_view method : {"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "PATCH ",
                                    "OPTIONS ", "CONNECT ", "PRI * HTTP/2"}) {
        if (data.starts_with(method)) return "http";
    }
    return "opaque";
}

inline std::string gib(uint64_t bytes) {
    char text[32];
    snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1ull << 30));
    return text;
}

inline bool user_matches(const std::vector<std::string>& users, const ProcessInfo& info) {
    const std::string uid = std::to_string(info.uid);
    return std::any_of(users.begin(), users.end(), [&](const std::string& user) {
        return user == uid || (!info.user.empty() && user == info.user);
    });
}

inline bool group_matches(const std::vector<std::string>& groups, const ProcessInfo& info) {
    const std::string gid = std::to_string(info.gid);
    return std::any_of(groups.begin(), groups.end(), [&](const std::string& group) {
        return group == gid || (!info.group.empty() && group == info.group);
    });
}

// Globs over the container id and its "runtime://id" form; host processes match none.
inline bool container_matches(const std::vector<std::string>& globs, const ProcessInfo& info) {
    if (!info.container) return false;
    const std::string qualified = info.container->runtime + "://" + info.container->id;
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
        return fnmatch(glob.c_str(), info.container->id.c_str(), 0) == 0 ||
               fnmatch(glob.c_str(), qualified.c_str(), 0) == 0;
    });
}

inline bool in_scope(const rules::ScopeCondition& scope, const ProcessInfo& info) {
    if (!scope.users.empty() && !user_matches(scope.users, info)) return false;
    if (user_matches(scope.not_users, info)) return false;
    if (!scope.groups.empty() && !group_matches(scope.groups, info)) return false;
    if (group_matches(scope.not_groups, info)) return false;
    if (!scope.container_ids.empty() && !container_matches(scope.container_ids, info)) {
        return false;
    }
    if (container_matches(scope.not_container_ids, info)) return false;
    const auto name_matches = [&](const std::vector<std::string>& globs) {
        return !info.container_details.name.empty() &&
               std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
                   return fnmatch(glob.c_str(), info.container_details.name.c_str(), 0) == 0;
               });
    };
    if (!scope.container_names.empty() && !name_matches(scope.container_names)) return false;
    if (name_matches(scope.not_container_names)) return false;
    if (std::any_of(scope.not_comm.begin(), scope.not_comm.end(), [&](const std::string& glob) {
            return fnmatch(glob.c_str(), info.comm.c_str(), 0) == 0;
        })) {
        return false;
    }
    switch (scope.containers) {
        case rules::ContainerScope::kAny:
            return true;
        case rules::ContainerScope::kHost:
            return !info.container.has_value();
        case rules::ContainerScope::kContainer:
            return info.container.has_value();
    }
    return true;
}

}  // namespace gpuguard::agent
