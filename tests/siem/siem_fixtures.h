// Records and helpers the siem tests share: a typical miner detection, an
// enforcement outcome, a host, a hostile command line, and a gate for tests
// that need an external tool (rsyslogd, openssl).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "gpuguard/common/detection.h"
#include "tests/support/privileged.h"

namespace gpuguard::testing {

inline HostInfo test_host(const std::string& name = "gpu-node-7") {
    return HostInfo{name, "6f1c9a0e-0b2d-4c53-9b57-7d1f2c3a4b5c", "6.18.0-1-amd64", "0.1.0"};
}

// 2024-05-01T12:00:00.250Z
inline constexpr int64_t kTestTimeNs = 1714564800250000000;

inline Detection test_detection(const std::string& id = "d-0001") {
    Detection d;
    d.id = id;
    d.rule_id = "miner.xmrig.cmdline";
    d.rule_name = "XMRig miner started";
    d.ruleset = "gpuguard-correlation";
    d.description = "xmrig command line and stratum connect from a GPU process";
    d.severity = Severity::kCritical;
    d.confidence = 0.95;
    d.mitre_technique_id = "T1496";
    d.mitre_technique_name = "Resource Hijacking";
    d.mitre_tactic = "Impact";
    d.first_seen_ns = 1000;
    d.last_seen_ns = 2000;
    d.time_unix_ns = kTestTimeNs;
    d.process.pid = 4242;
    d.process.ppid = 1;
    d.process.uid = 1000;
    d.process.gid = 1000;
    d.process.comm = "xmrig";
    d.process.executable = "/tmp/.x/xmrig";
    d.process.argv = {"/tmp/.x/xmrig", "-o", "stratum+tcp://pool.example:3333"};
    d.process.command_line = "/tmp/.x/xmrig -o stratum+tcp://pool.example:3333";
    d.process.user = "alice";
    d.process.container_id = std::string(64, 'a');
    d.process.container_runtime = "containerd";
    DetectionGpu gpu;
    gpu.major = 195;
    gpu.minor = 0;
    gpu.device = "/dev/nvidia0";
    gpu.index = 0;
    gpu.vendor = "nvidia";
    gpu.utilization_percent = 99.5;
    gpu.memory_used_bytes = 1ull << 30;
    d.gpus.push_back(gpu);
    d.peer = DetectionPeer{"203.0.113.7", 3333, "pool.example", "stratum1"};
    d.signature_ids = {"cmdline.xmrig", "pool.port.3333"};
    d.evidence.push_back({1000, "signature", "", "cmdline.xmrig", "cmdline", "xmrig -o"});
    d.action = "kill";
    return d;
}

inline EnforcementOutcome test_outcome(const std::string& id = "e-0001") {
    EnforcementOutcome o;
    o.id = id;
    o.detection_id = "d-0001";
    o.rule_id = "miner.xmrig.cmdline";
    o.action = "kill";
    o.outcome = "success";
    o.reason = "SIGKILL after 5 s";
    o.severity = Severity::kError;
    o.ts_ns = 3000;
    o.time_unix_ns = kTestTimeNs;
    o.process = test_detection().process;
    o.latency_ns = 1500000;
    return o;
}

// A command line built to break naive formatters: every delimiter of every
// format, line breaks, a quote, invalid UTF-8, and 64 KiB of it.
inline std::string hostile_command_line() {
    std::string text = "miner --pool=a|b \\ c ] \" \n\r\tline2 key=value \xff\xfe\xc3 end";
    while (text.size() < 64 * 1024) text += " |=\\\n" + std::to_string(text.size());
    return text;
}

// Path of a tool, or "" when it is not installed.
inline std::string find_tool(const std::string& name) {
    for (const char* dir : {"/usr/sbin", "/usr/bin", "/sbin", "/bin", "/usr/local/bin"}) {
        const auto path = std::filesystem::path(dir) / name;
        if (std::filesystem::exists(path)) return path.string();
    }
    return "";
}

}  // namespace gpuguard::testing

// Skips when `tool` is missing, or fails under GPUGUARD_REQUIRE_PRIVILEGED=1
// (CI), where scripts/install-deps.sh installs it.
#define GG_REQUIRE_TOOL(tool)                                                          \
    do {                                                                               \
        if (::gpuguard::testing::find_tool(tool).empty()) {                            \
            if (::gpuguard::testing::privileged_required()) {                          \
                FAIL() << "GPUGUARD_REQUIRE_PRIVILEGED=1 but " << tool                 \
                       << " is not installed (scripts/install-deps.sh)";               \
            }                                                                          \
            GTEST_SKIP() << tool                                                       \
                         << " is not installed (set GPUGUARD_REQUIRE_PRIVILEGED=1 to " \
                            "fail instead)";                                           \
        }                                                                              \
    } while (0)
