// The agent's configuration: one YAML document (docs/configuration.md) with
// an embedded default. Loading validates everything and reports the first
// problem as "<file>:<line>:<column>: <key>: <what is wrong>".
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/events/gpu_devices.h"
#include "gpuguard/journal/journal.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard/siem/siem.h"

namespace gpuguard::agent {

struct LogConfig {
    std::string level = "info";
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
    bool status_page = false;  // read-only HTML status page at /status (needs enabled)
};

struct ControlConfig {
    std::string socket = "/run/gpuguard/control.sock";  // "" = no control socket
};

// The kubelet's PodResources API (docs/deployment.md, "Pods and the GPUs the
// kubelet gave them"): which GPUs each pod's containers were given.
struct KubeletConfig {
    // Its unix socket; "" = never asked. Absent: logged once, not an error.
    std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
    std::string root = "/var/lib/kubelet";  // its pod directories, pods/<uid>/
    uint32_t refresh_interval_s = 30;       // List every this often, 1 .. 3600
    uint32_t call_timeout_ms = 2000;        // each call's deadline, 100 .. 60000
    // Globs on pod namespaces whose pods are the GPU infrastructure (the GPU
    // Operator's driver, device plugin, DCGM exporter, validators; the
    // clouds' in kube-system): they open every GPU without the device
    // plugin, so their allocation is not judged. Only cluster admins can
    // create pods there.
    std::vector<std::string> gpu_infrastructure_namespaces = {
        "kube-system",          "gpu-operator",          "nvidia-gpu-operator",
        "nvidia-device-plugin", "nvidia-dra-driver-gpu", "gke-managed-system",
        "kube-amd-gpu"};
};

struct ProcessTableConfig {
    uint32_t max_entries = 32768;
    uint32_t exit_grace_s = 30;
    uint32_t ioctl_interval_ms = 1000;  // how often the kernel's ioctl aggregates are read
    // How often libc's view of /proc is compared with the kernel's (hidden
    // processes, GG-CORR-0017); also soon after a new GPU process. 0 = never.
    uint32_t hidden_check_interval_s = 30;
    // How often every live process's CPU time is read (/proc/PID/stat); 0 = never.
    uint32_t cpu_interval_ms = 2000;
    // A process that used this much of one core over an interval is busy:
    // a cpu_usage event, and its connects reported on any port.
    uint32_t busy_cpu_percent = 50;
    // How often the kernel's flow shapes (bpf/payload.h) of GPU holders and
    // watched processes are read: a flow event for each flow that moved,
    // once it is flow_min_age_ms old. 0 = never.
    uint32_t flow_interval_ms = 10'000;
    uint32_t flow_min_age_ms = 30'000;
};

// The forensic journal (docs/journal.md).
struct JournalConfig {
    bool enabled = true;
    std::string dir = "/var/lib/gpuguard/journal";
    uint32_t segment_max_mb = 64;        // rotate at this size
    uint32_t segment_max_age_s = 3600;   // ... or age; 0 = size only
    uint32_t retention_max_mb = 1024;    // all segments together; 0 = unbounded
    uint32_t retention_max_age_h = 168;  // delete older segments/incidents; 0 = never
    uint32_t fsync_interval_ms = 1000;   // 0 = after every write
    std::string compression = "none";    // none, zstd
    uint32_t lookback_s = 60;            // events kept in memory for incident bundles
    uint32_t incident_after_s = 60;      // events added to a bundle after its detection
    uint32_t lookback_max_mb = 64;       // memory bound of the look-back window
    uint32_t queue_events = 65536;       // writer queue; a full queue drops (and counts)
};

// Detection rules: miner-rules.yaml (+ rules.d) and correlation rule files
// (docs/rules.md).
struct RulesConfig {
    std::string main_file = "/etc/gpuguard/miner-rules.yaml";
    std::string drop_in_dir = "/etc/gpuguard/rules.d";
    std::vector<std::string> correlation_files;  // applied over the built-in correlation rules
    // YARA scan of a process's executable when the correlator asks (first GPU
    // use, first signature hit); results are exe_scan events.
    bool yara_scan = true;
    // Scan every process's executable at exec, not only GPU holders and
    // processes with a signature hit (a clean verdict of those is not
    // journaled: only hits are evidence).
    bool yara_scan_every_exec = true;
    uint64_t yara_max_file_mb = 64;  // larger executables are reported, not scanned
    // Read the configuration files a process names or its miner family reads
    // (-c FILE, config.json beside the executable, ...) when the correlator
    // asks (first signature hit, first GPU use, temporary location); files
    // with lines matching config signatures are config_file events.
    bool config_scan = true;
    uint64_t config_max_kb = 256;  // read of each file; larger ones are cut (and say so)
};

// Active verification of a suspected pool (docs/detections.md "Active
// verification"): off by default. When on, a detection by a rule with
// opaque_peer makes the agent open connections of its own to that peer.
struct VerifyConfig {
    bool active = false;
    uint32_t max_per_hour = 10;       // probes of all peers in any hour, 1 .. 3600
    uint32_t peer_interval_s = 3600;  // one probe per peer (address, port) this often, 60 .. 604800
    uint32_t timeout_ms = 3000;       // each connection: connect, send and answer, 100 .. 30000
    std::string tls = "auto";         // auto (as the process spoke), always, never
    uint32_t answer_max_bytes = 512;  // kept of an answer, 64 .. 4096
};

struct Config {
    LogConfig log;
    RulesConfig rules;
    // Alert outputs (docs/outputs.md): each sink gets every detection and
    // enforcement outcome at or above its min_severity.
    std::vector<siem::SinkConfig> outputs;
    SensorConfig sensor;
    ControlConfig control;
    ProcessTableConfig process_table;
    BackendsConfig backends;
    MetricsConfig metrics;
    KubeletConfig kubelet;
    EnforcementConfig enforcement;
    JournalConfig journal;
    VerifyConfig verify;
};

// The YAML text compiled into the binary (agent/daemon/default_config.yaml).
std::string_view default_config_yaml();

// Parses and validates YAML text; `source` names it in error messages.
// Fails with kParse (syntax) or kInvalidArgument (unknown key, bad value).
Result<Config> load_config_text(std::string_view yaml, const std::string& source);

// Reads and loads a file. Fails with kIo if it cannot be read.
Result<Config> load_config_file(const std::filesystem::path& path);

// The effective configuration as YAML (for `gpuguard config show`). Secrets
// are never printed: a sink's token and the values of credential-like HTTP
// headers show as "<redacted>".
std::string config_to_yaml(const Config& config);

// "Name: value" with the value replaced by "<redacted>" when the name looks
// like a credential (Authorization, *token*, *key*, *secret*, ...).
std::string redacted_header(const std::string& header);

// The journal's options from the `journal:` section (sizes in MB here, bytes there).
journal::JournalOptions journal_options(const JournalConfig& config);

}  // namespace gpuguard::agent
