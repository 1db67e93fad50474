// The sections that say where and how the agent reads the host: sensor:
// (its kernel hooks and what they watch), backends: (the GPUs' telemetry)
// and kubelet: (the pods and the GPUs they were given).
#include <cctype>
#include <cerrno>
#include <cstring>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "config_reader.h"
#include "gpuguard/common/text.h"
#include "gpuguard/daemon/config.h"

namespace gpuguard::agent {

void read_sensor(const ConfigReader& reader, const YAML::Node& node, SensorConfig& sensor) {
    reader.check_keys(node, "sensor",
                      {"btf",
                       "ring_buffer_kb",
                       "report_failed_opens",
                       "mount_tracefs",
                       "extra_gpu_devices",
                       "connect_all",
                       "connect_loopback",
                       "watched_ports",
                       "argv_max_bytes",
                       "payload_capture",
                       "payload_all",
                       "payload_dns",
                       "payload_messages",
                       "payload_syscall_hooks",
                       "watch_processes_max",
                       "watch_addresses_max",
                       "watch_address_min_ttl_s",
                       "attach",
                       "watch_files",
                       "require_host_pid_namespace"});
    if (const auto attach = node["attach"]) {
        const auto name = reader.scalar<std::string>(attach, "sensor.attach", "a string");
        const auto mode = parse_attach_mode(name);
        if (!mode) {
            reader.fail_at(attach, "sensor.attach",
                           "'" + name +
                               "' is not one of auto, kernel_functions, raw_syscalls, "
                               "syscall_tracepoints");
        }
        sensor.attach = *mode;
    }
    for (const auto& [key, flag] :
         {std::pair{"payload_capture", &sensor.payload_capture},
          std::pair{"payload_all", &sensor.payload_all},
          std::pair{"payload_dns", &sensor.payload_dns},
          std::pair{"payload_syscall_hooks", &sensor.payload_syscall_hooks},
          std::pair{"require_host_pid_namespace", &sensor.require_host_pid_namespace}}) {
        if (const auto value = node[key]) {
            *flag = reader.scalar<bool>(value, std::string("sensor.") + key, "true or false");
        }
    }
    if (const auto count = node["payload_messages"]) {
        const auto messages =
            reader.scalar<uint32_t>(count, "sensor.payload_messages", "an integer 1-64");
        if (messages < 1 || messages > 64) {
            reader.fail_at(count, "sensor.payload_messages",
                           std::to_string(messages) + " is not 1-64");
        }
        sensor.payload_messages = messages;
    }
    if (const auto btf = node["btf"]) {
        sensor.btf_path = reader.scalar<std::string>(btf, "sensor.btf", "a path string");
    }
    if (const auto size = node["ring_buffer_kb"]) {
        const auto kb =
            reader.scalar<uint32_t>(size, "sensor.ring_buffer_kb", "a positive integer");
        if (kb < 4 || (kb & (kb - 1)) != 0 || kb > (1u << 20)) {
            reader.fail_at(size, "sensor.ring_buffer_kb",
                           std::to_string(kb) + " is not a power of two between 4 and 1048576");
        }
        sensor.ring_buffer_kb = kb;
    }
    if (const auto flag = node["report_failed_opens"]) {
        sensor.report_failed_opens =
            reader.scalar<bool>(flag, "sensor.report_failed_opens", "true or false");
    }
    if (const auto flag = node["mount_tracefs"]) {
        sensor.mount_tracefs = reader.scalar<bool>(flag, "sensor.mount_tracefs", "true or false");
    }
    if (const auto list = node["extra_gpu_devices"]) {
        if (!list.IsSequence()) {
            reader.fail_at(list, "sensor.extra_gpu_devices", "must be a list of \"MAJOR:MINOR\"");
        }
        sensor.extra_gpu_devices.clear();
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string key = "sensor.extra_gpu_devices[" + std::to_string(i) + "]";
            const auto text = reader.scalar<std::string>(list[i], key, "a \"MAJOR:MINOR\" string");
            auto number = parse_gpu_device_number(text);
            if (!number) reader.fail_at(list[i], key, number.error().message);
            sensor.extra_gpu_devices.push_back(number.value());
        }
    }
    if (const auto flag = node["connect_all"]) {
        sensor.connect_all = reader.scalar<bool>(flag, "sensor.connect_all", "true or false");
    }
    if (const auto flag = node["connect_loopback"]) {
        sensor.connect_loopback =
            reader.scalar<bool>(flag, "sensor.connect_loopback", "true or false");
    }
    if (const auto list = node["watched_ports"]) {
        if (!list.IsSequence()) {
            reader.fail_at(list, "sensor.watched_ports", "must be a list of port numbers");
        }
        if (list.size() > 1024) {  // GG_MAX_WATCHED_PORTS, the kernel map's size
            reader.fail_at(list, "sensor.watched_ports",
                           std::to_string(list.size()) + " ports; at most 1024");
        }
        sensor.watched_ports.clear();
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string key = "sensor.watched_ports[" + std::to_string(i) + "]";
            const auto port = reader.scalar<uint32_t>(list[i], key, "a port number (1-65535)");
            if (port == 0 || port > 65535) {
                reader.fail_at(list[i], key, std::to_string(port) + " is not a port (1-65535)");
            }
            sensor.watched_ports.push_back(static_cast<uint16_t>(port));
        }
    }
    if (const auto list = node["watch_files"]) {
        if (!list.IsSequence()) {
            reader.fail_at(list, "sensor.watch_files", "must be a list of paths and file names");
        }
        sensor.watch_files.clear();
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string key = "sensor.watch_files[" + std::to_string(i) + "]";
            auto entry = reader.scalar<std::string>(list[i], key, "a path or a file name");
            if (auto parsed = parse_watch_entry(entry, {"/root"}); !parsed) {
                reader.fail_at(list[i], key, parsed.error().message);
            }
            sensor.watch_files.push_back(std::move(entry));
        }
    }
    // Watch lists: kernel hash maps, preallocated (about 100 bytes an entry).
    for (const auto& [key, size] :
         {std::pair{"watch_processes_max", &sensor.watch_processes_max},
          std::pair{"watch_addresses_max", &sensor.watch_addresses_max}}) {
        const auto value = node[key];
        if (!value) continue;
        const std::string name = std::string("sensor.") + key;
        const auto entries = reader.scalar<uint32_t>(value, name, "an integer 1-262144");
        if (entries < 1 || entries > 262144) {
            reader.fail_at(value, name, std::to_string(entries) + " is not 1-262144");
        }
        *size = entries;
    }
    if (const auto ttl = node["watch_address_min_ttl_s"]) {
        sensor.watch_address_min_ttl_s =
            reader.scalar<uint32_t>(ttl, "sensor.watch_address_min_ttl_s", "a number of seconds");
    }
    if (const auto size = node["argv_max_bytes"]) {
        const auto bytes =
            reader.scalar<uint32_t>(size, "sensor.argv_max_bytes", "an integer 0-4095");
        if (bytes > 4095) {
            reader.fail_at(size, "sensor.argv_max_bytes",
                           std::to_string(bytes) + " is above the maximum of 4095");
        }
        sensor.argv_max_bytes = bytes;
    }
}

void read_backends(const ConfigReader& reader, const YAML::Node& node, BackendsConfig& backends) {
    reader.check_keys(node, "backends",
                      {"interval_ms", "nvidia", "amd", "intel", "drm_fdinfo", "nvml_library",
                       "sysfs_root", "proc_root"});
    if (const auto interval = node["interval_ms"]) {
        const auto ms =
            reader.scalar<uint32_t>(interval, "backends.interval_ms", "a positive integer");
        if (ms < 100 || ms > 3600000) {
            reader.fail_at(interval, "backends.interval_ms",
                           std::to_string(ms) + " is not between 100 and 3600000");
        }
        backends.interval_ms = ms;
    }
    for (const auto& [key, flag] : {std::pair<const char*, bool*>{"nvidia", &backends.nvidia},
                                    {"amd", &backends.amd},
                                    {"intel", &backends.intel},
                                    {"drm_fdinfo", &backends.drm_fdinfo}}) {
        if (const auto value = node[key]) {
            *flag = reader.scalar<bool>(value, std::string("backends.") + key, "true or false");
        }
    }
    if (const auto library = node["nvml_library"]) {
        backends.nvml_library =
            reader.scalar<std::string>(library, "backends.nvml_library", "a path string");
    }
    for (const auto& [key, root] :
         {std::pair<const char*, std::string*>{"sysfs_root", &backends.sysfs_root},
          {"proc_root", &backends.proc_root}}) {
        if (const auto value = node[key]) {
            const std::string name = std::string("backends.") + key;
            *root = reader.scalar<std::string>(value, name, "an absolute path");
            if (root->empty() || root->front() != '/') {
                reader.fail_at(value, name, "'" + *root + "' is not an absolute path");
            }
        }
    }
}

void read_kubelet(const ConfigReader& reader, const YAML::Node& node, KubeletConfig& kubelet) {
    reader.check_keys(node, "kubelet",
                      {"pod_resources_socket", "root", "refresh_interval_s", "call_timeout_ms",
                       "gpu_infrastructure_namespaces"});
    const auto absolute = [&](const char* key, std::string& value, bool may_be_empty) {
        const auto item = node[key];
        if (!item) return;
        const std::string name = std::string("kubelet.") + key;
        value = reader.scalar<std::string>(item, name, "a path string");
        if ((!value.empty() || !may_be_empty) && !value.starts_with('/')) {
            reader.fail_at(item, name, "'" + value + "' is not absolute");
        }
        if (value.size() >= 108) reader.fail_at(item, name, "longer than 107 bytes");
    };
    absolute("pod_resources_socket", kubelet.pod_resources_socket, true);
    absolute("root", kubelet.root, false);
    read_bounded(reader, node, "kubelet",
                 {{"refresh_interval_s", &kubelet.refresh_interval_s, 1, 3600},
                  {"call_timeout_ms", &kubelet.call_timeout_ms, 100, 60000}});
    if (const auto list = node["gpu_infrastructure_namespaces"]) {
        const std::string key = "kubelet.gpu_infrastructure_namespaces";
        read_string_list(reader, list, key, kubelet.gpu_infrastructure_namespaces);
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string& glob = kubelet.gpu_infrastructure_namespaces[i];
            if (!namespace_glob(glob)) {
                reader.fail_at(list[i], key + "[" + std::to_string(i) + "]",
                               "'" + glob + "' is not a namespace or a glob of one");
            }
        }
    }
}

}  // namespace gpuguard::agent
