// The config written back as YAML (`gpuguard config show`), and the
// journal's options from its section.
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "gpuguard/daemon/config.h"

namespace gpuguard::agent {

std::string config_to_yaml(const Config& config) {
    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "log" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "level" << YAML::Value << config.log.level;
    out << YAML::EndMap;
    out << YAML::Key << "rules" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "main_file" << YAML::Value << config.rules.main_file;
    out << YAML::Key << "drop_in_dir" << YAML::Value << config.rules.drop_in_dir;
    out << YAML::Key << "correlation_files" << YAML::Value << YAML::Flow
        << config.rules.correlation_files;
    out << YAML::Key << "yara_scan" << YAML::Value << config.rules.yara_scan;
    out << YAML::Key << "yara_scan_every_exec" << YAML::Value << config.rules.yara_scan_every_exec;
    out << YAML::Key << "yara_max_file_mb" << YAML::Value << config.rules.yara_max_file_mb;
    out << YAML::Key << "config_scan" << YAML::Value << config.rules.config_scan;
    out << YAML::Key << "config_max_kb" << YAML::Value << config.rules.config_max_kb;
    out << YAML::EndMap;
    out << YAML::Key << "outputs" << YAML::Value << YAML::BeginSeq;
    for (const auto& sink : config.outputs) {
        out << YAML::BeginMap;
        out << YAML::Key << "name" << YAML::Value << sink.name;
        out << YAML::Key << "type" << YAML::Value << siem::to_string(sink.type);
        out << YAML::Key << "format" << YAML::Value << siem::to_string(sink.format);
        if (sink.framing) {
            out << YAML::Key << "framing" << YAML::Value << siem::to_string(*sink.framing);
        }
        out << YAML::Key << "min_severity" << YAML::Value << to_string(sink.min_severity);
        out << YAML::Key << "detections" << YAML::Value << sink.detections;
        out << YAML::Key << "enforcement" << YAML::Value << sink.enforcement;
        out << YAML::Key << "address" << YAML::Value << sink.address;
        out << YAML::Key << "tls_ca_file" << YAML::Value << sink.tls_ca_file;
        out << YAML::Key << "tls_cert_file" << YAML::Value << sink.tls_cert_file;
        out << YAML::Key << "tls_key_file" << YAML::Value << sink.tls_key_file;
        out << YAML::Key << "tls_server_name" << YAML::Value << sink.tls_server_name;
        out << YAML::Key << "tls_verify" << YAML::Value << sink.tls_verify;
        // A secret: shown as set or not, never printed.
        out << YAML::Key << "token" << YAML::Value << (sink.token.empty() ? "" : "<redacted>");
        out << YAML::Key << "index" << YAML::Value << sink.index;
        out << YAML::Key << "http_headers" << YAML::Value << YAML::Flow << YAML::BeginSeq;
        for (const auto& header : sink.http_headers) out << redacted_header(header);
        out << YAML::EndSeq;
        out << YAML::Key << "facility" << YAML::Value << sink.facility;
        out << YAML::Key << "app_name" << YAML::Value << sink.app_name;
        out << YAML::Key << "file_max_bytes" << YAML::Value << sink.file_max_bytes;
        out << YAML::Key << "file_max_files" << YAML::Value << sink.file_max_files;
        out << YAML::Key << "queue_dir" << YAML::Value << sink.queue_dir.string();
        out << YAML::Key << "queue_max_mb" << YAML::Value << (sink.queue_max_bytes >> 20);
        out << YAML::Key << "queue_fsync" << YAML::Value << sink.queue_fsync;
        out << YAML::Key << "overflow" << YAML::Value << siem::to_string(sink.overflow);
        out << YAML::Key << "block_timeout_ms" << YAML::Value << sink.block_timeout.count();
        out << YAML::Key << "batch_max_records" << YAML::Value << sink.batch_max_records;
        out << YAML::Key << "retry_initial_ms" << YAML::Value << sink.retry_initial.count();
        out << YAML::Key << "retry_max_ms" << YAML::Value << sink.retry_max.count();
        out << YAML::Key << "io_timeout_ms" << YAML::Value << sink.io_timeout.count();
        out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::Key << "control" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "socket" << YAML::Value << YAML::DoubleQuoted << config.control.socket;
    out << YAML::EndMap;
    out << YAML::Key << "kubelet" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "pod_resources_socket" << YAML::Value << YAML::DoubleQuoted
        << config.kubelet.pod_resources_socket;
    out << YAML::Key << "root" << YAML::Value << YAML::DoubleQuoted << config.kubelet.root;
    out << YAML::Key << "refresh_interval_s" << YAML::Value << config.kubelet.refresh_interval_s;
    out << YAML::Key << "call_timeout_ms" << YAML::Value << config.kubelet.call_timeout_ms;
    out << YAML::Key << "gpu_infrastructure_namespaces" << YAML::Value << YAML::Flow
        << config.kubelet.gpu_infrastructure_namespaces;
    out << YAML::EndMap;
    out << YAML::Key << "process_table" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "max_entries" << YAML::Value << config.process_table.max_entries;
    out << YAML::Key << "exit_grace_s" << YAML::Value << config.process_table.exit_grace_s;
    out << YAML::Key << "ioctl_interval_ms" << YAML::Value
        << config.process_table.ioctl_interval_ms;
    out << YAML::Key << "hidden_check_interval_s" << YAML::Value
        << config.process_table.hidden_check_interval_s;
    out << YAML::Key << "cpu_interval_ms" << YAML::Value << config.process_table.cpu_interval_ms;
    out << YAML::Key << "busy_cpu_percent" << YAML::Value << config.process_table.busy_cpu_percent;
    out << YAML::Key << "flow_interval_ms" << YAML::Value << config.process_table.flow_interval_ms;
    out << YAML::Key << "flow_min_age_ms" << YAML::Value << config.process_table.flow_min_age_ms;
    out << YAML::EndMap;
    out << YAML::Key << "sensor" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "btf" << YAML::Value << YAML::DoubleQuoted << config.sensor.btf_path;
    out << YAML::Key << "ring_buffer_kb" << YAML::Value << config.sensor.ring_buffer_kb;
    out << YAML::Key << "report_failed_opens" << YAML::Value << config.sensor.report_failed_opens;
    out << YAML::Key << "mount_tracefs" << YAML::Value << config.sensor.mount_tracefs;
    out << YAML::Key << "extra_gpu_devices" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& device : config.sensor.extra_gpu_devices) {
        out << YAML::DoubleQuoted << device.to_string();
    }
    out << YAML::EndSeq;
    out << YAML::Key << "connect_all" << YAML::Value << config.sensor.connect_all;
    out << YAML::Key << "connect_loopback" << YAML::Value << config.sensor.connect_loopback;
    out << YAML::Key << "watched_ports" << YAML::Value << YAML::Flow << config.sensor.watched_ports;
    out << YAML::Key << "watch_files" << YAML::Value << config.sensor.watch_files;
    out << YAML::Key << "argv_max_bytes" << YAML::Value << config.sensor.argv_max_bytes;
    out << YAML::Key << "watch_processes_max" << YAML::Value << config.sensor.watch_processes_max;
    out << YAML::Key << "watch_addresses_max" << YAML::Value << config.sensor.watch_addresses_max;
    out << YAML::Key << "watch_address_min_ttl_s" << YAML::Value
        << config.sensor.watch_address_min_ttl_s;
    out << YAML::Key << "payload_capture" << YAML::Value << config.sensor.payload_capture;
    out << YAML::Key << "payload_all" << YAML::Value << config.sensor.payload_all;
    out << YAML::Key << "payload_dns" << YAML::Value << config.sensor.payload_dns;
    out << YAML::Key << "payload_messages" << YAML::Value << config.sensor.payload_messages;
    out << YAML::Key << "payload_syscall_hooks" << YAML::Value
        << config.sensor.payload_syscall_hooks;
    out << YAML::Key << "require_host_pid_namespace" << YAML::Value
        << config.sensor.require_host_pid_namespace;
    out << YAML::Key << "attach" << YAML::Value
        << std::string(attach_mode_name(config.sensor.attach));
    out << YAML::EndMap;
    const BackendsConfig& backends = config.backends;
    out << YAML::Key << "backends" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "interval_ms" << YAML::Value << backends.interval_ms;
    out << YAML::Key << "nvidia" << YAML::Value << backends.nvidia;
    out << YAML::Key << "amd" << YAML::Value << backends.amd;
    out << YAML::Key << "intel" << YAML::Value << backends.intel;
    out << YAML::Key << "drm_fdinfo" << YAML::Value << backends.drm_fdinfo;
    out << YAML::Key << "nvml_library" << YAML::Value << YAML::DoubleQuoted
        << backends.nvml_library;
    out << YAML::Key << "sysfs_root" << YAML::Value << backends.sysfs_root;
    out << YAML::Key << "proc_root" << YAML::Value << backends.proc_root;
    out << YAML::EndMap;
    out << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "enabled" << YAML::Value << config.metrics.enabled;
    out << YAML::Key << "listen" << YAML::Value << YAML::DoubleQuoted << config.metrics.listen;
    out << YAML::Key << "port" << YAML::Value << config.metrics.port;
    out << YAML::Key << "status_page" << YAML::Value << config.metrics.status_page;
    out << YAML::EndMap;
    const JournalConfig& journal = config.journal;
    out << YAML::Key << "journal" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "enabled" << YAML::Value << journal.enabled;
    out << YAML::Key << "dir" << YAML::Value << journal.dir;
    out << YAML::Key << "segment_max_mb" << YAML::Value << journal.segment_max_mb;
    out << YAML::Key << "segment_max_age_s" << YAML::Value << journal.segment_max_age_s;
    out << YAML::Key << "retention_max_mb" << YAML::Value << journal.retention_max_mb;
    out << YAML::Key << "retention_max_age_h" << YAML::Value << journal.retention_max_age_h;
    out << YAML::Key << "fsync_interval_ms" << YAML::Value << journal.fsync_interval_ms;
    out << YAML::Key << "compression" << YAML::Value << journal.compression;
    out << YAML::Key << "lookback_s" << YAML::Value << journal.lookback_s;
    out << YAML::Key << "incident_after_s" << YAML::Value << journal.incident_after_s;
    out << YAML::Key << "lookback_max_mb" << YAML::Value << journal.lookback_max_mb;
    out << YAML::Key << "queue_events" << YAML::Value << journal.queue_events;
    out << YAML::EndMap;
    const EnforcementConfig& enforcement = config.enforcement;
    out << YAML::Key << "enforcement" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "dry_run" << YAML::Value << enforcement.dry_run;
    out << YAML::Key << "grace_period_ms" << YAML::Value << enforcement.grace_period_ms;
    out << YAML::Key << "max_actions_per_minute" << YAML::Value
        << enforcement.max_actions_per_minute;
    out << YAML::Key << "kill_scope" << YAML::Value << enforcement.kill_scope;
    out << YAML::Key << "allowlist" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "users" << YAML::Value << YAML::Flow << enforcement.allowlist.users;
    out << YAML::Key << "executables" << YAML::Value << YAML::Flow
        << enforcement.allowlist.executables;
    out << YAML::Key << "cgroups" << YAML::Value << YAML::Flow << enforcement.allowlist.cgroups;
    out << YAML::EndMap;
    out << YAML::Key << "block_ttl_s" << YAML::Value << enforcement.block_ttl_s;
    out << YAML::Key << "connect_fallback_cgroup" << YAML::Value << YAML::DoubleQuoted
        << enforcement.connect_fallback_cgroup;
    out << YAML::Key << "pin_path" << YAML::Value << YAML::DoubleQuoted << enforcement.pin_path;
    out << YAML::Key << "keep_pinned_on_exit" << YAML::Value << enforcement.keep_pinned_on_exit;
    out << YAML::EndMap;
    const VerifyConfig& verify = config.verify;
    out << YAML::Key << "verify" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "active" << YAML::Value << verify.active;
    out << YAML::Key << "max_per_hour" << YAML::Value << verify.max_per_hour;
    out << YAML::Key << "peer_interval_s" << YAML::Value << verify.peer_interval_s;
    out << YAML::Key << "timeout_ms" << YAML::Value << verify.timeout_ms;
    out << YAML::Key << "tls" << YAML::Value << verify.tls;
    out << YAML::Key << "answer_max_bytes" << YAML::Value << verify.answer_max_bytes;
    out << YAML::EndMap;
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

journal::JournalOptions journal_options(const JournalConfig& config) {
    journal::JournalOptions options;
    options.dir = config.dir;
    options.segment_max_bytes = uint64_t{config.segment_max_mb} << 20;
    options.segment_max_age_s = config.segment_max_age_s;
    options.retention_max_bytes = uint64_t{config.retention_max_mb} << 20;
    options.retention_max_age_s = uint64_t{config.retention_max_age_h} * 3600;
    options.fsync_interval_ms = config.fsync_interval_ms;
    options.compress = config.compression == "zstd";
    options.lookback_s = config.lookback_s;
    options.incident_after_s = config.incident_after_s;
    options.lookback_max_bytes = size_t{config.lookback_max_mb} << 20;
    options.queue_events = config.queue_events;
    return options;
}

}  // namespace gpuguard::agent
