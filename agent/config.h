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

// GPU telemetry (docs/backends.md).
struct BackendsConfig {
    uint32_t interval_ms = 1000;      // sampling period, 100 .. 3600000
    bool nvidia = true;               // NVML, when libnvidia-ml.so.1 loads
    bool amd = true;                  // amdgpu sysfs, KFD, fdinfo
    bool intel = true;                // i915 / xe sysfs, fdinfo
    bool drm_fdinfo = true;           // any other drm-usage-stats driver (asahi, msm, panfrost)
    std::string nvml_library;         // "" = libnvidia-ml.so.1 from the loader path
    std::string sysfs_root = "/sys";  // tests point these at fixture trees
    std::string proc_root = "/proc";
};

// The Prometheus /metrics endpoint. Unauthenticated, so loopback only.
struct MetricsConfig {
    bool enabled = false;
    std::string listen = "127.0.0.1";  // 127.0.0.0/8 or ::1
    uint16_t port = 9842;
};

struct ControlConfig {
    std::string socket = "/run/gpuguard/control.sock";  // "" = no control socket
};

struct ProcessTableConfig {
    uint32_t max_entries = 32768;
    uint32_t exit_grace_s = 30;
    uint32_t ioctl_interval_ms = 1000;  // how often the kernel's ioctl aggregates are read
};

struct Config {
    LogConfig log;
    SensorConfig sensor;
    ControlConfig control;
    ProcessTableConfig process_table;
    BackendsConfig backends;
    MetricsConfig metrics;
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
