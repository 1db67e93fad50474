// The agent's configuration: one YAML document (docs/configuration.md) with
// an embedded default. Loading validates everything and reports the first
// problem as "<file>:<line>:<column>: <key>: <what is wrong>".
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_devices.h"
#include "gpuguard/common/result.h"

namespace gpuguard::agent {

struct LogConfig {
    std::string level = "info";
};

struct SensorConfig {
    std::string btf_path;  // empty: /sys/kernel/btf/vmlinux
    uint32_t ring_buffer_kb = 4096;
    bool report_failed_opens = true;
    bool mount_tracefs = true;
    std::vector<GpuDeviceNumber> extra_gpu_devices;
    bool connect_all = false;       // report every INET connect
    bool connect_loopback = false;  // include loopback destinations
    // Destination ports reported from any process (stratum ports pools commonly use).
    std::vector<uint16_t> watched_ports = {3333, 3334, 4444, 5555, 7777, 14433, 14444, 45700};
    uint32_t argv_max_bytes = 1024;  // argv bytes copied per exec (max 4095)
};

struct Config {
    LogConfig log;
    SensorConfig sensor;
};

// The YAML text compiled into the binary (agent/default_config.yaml).
std::string_view default_config_yaml();

// Parses and validates YAML text; `source` names it in error messages.
// Fails with kParse (syntax) or kInvalidArgument (unknown key, bad value).
Result<Config> load_config_text(std::string_view yaml, const std::string& source);

// Reads and loads a file. Fails with kIo if it cannot be read.
Result<Config> load_config_file(const std::filesystem::path& path);

// The effective configuration as YAML (for `gpuguard config show`).
std::string config_to_yaml(const Config& config);

}  // namespace gpuguard::agent
