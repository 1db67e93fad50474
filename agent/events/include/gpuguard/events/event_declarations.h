// Every event type and every type inside one, declared once
// (event_schema.h says what a declaration holds and who reads it). Adding
// an event type or a field: declare it here, in JSON order, with its forms;
// docs/architecture.md ("Events, declared once") walks through an example.
#pragma once

#include "gpuguard/common/detection.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/event_schema.h"

namespace gpuguard::agent::schema {

// --- the types inside events ------------------------------------------------

template <>
struct Declaration<ProcessGpuUsage> {
    static constexpr std::tuple fields{
        field("pid", &ProcessGpuUsage::pid),
        field("memory_bytes", &ProcessGpuUsage::memory_bytes),
        field("compute_percent", &ProcessGpuUsage::compute_percent),
    };
};

template <>
struct Declaration<GpuPipes> {
    static constexpr Forms kRead{.out = Out::kWhenSet};
    static constexpr std::tuple fields{
        field("sm_active_percent", &GpuPipes::sm_active_percent, kRead),
        field("sm_occupancy_percent", &GpuPipes::sm_occupancy_percent, kRead),
        field("tensor_active_percent", &GpuPipes::tensor_active_percent, kRead),
        field("fp64_active_percent", &GpuPipes::fp64_active_percent, kRead),
        field("fp32_active_percent", &GpuPipes::fp32_active_percent, kRead),
        field("fp16_active_percent", &GpuPipes::fp16_active_percent, kRead),
        field("integer_active_percent", &GpuPipes::integer_active_percent, kRead),
        field("dram_active_percent", &GpuPipes::dram_active_percent, kRead),
    };
};

template <>
struct Declaration<MigPipes> {
    static constexpr std::tuple fields{
        field("gpu_instance", &MigPipes::gpu_instance),
        field("pipes", &MigPipes::pipes),  // flattened
    };
};

template <>
struct Declaration<ProcessInstance> {
    static constexpr std::tuple fields{
        field("pid", &ProcessInstance::pid),
        field("gpu_instance", &ProcessInstance::gpu_instance),
    };
};

template <>
struct Declaration<MigNode> {
    static constexpr std::tuple fields{
        field("gpu_instance", &MigNode::gpu_instance),
        field("device", &MigNode::device),
    };
};

template <>
struct Declaration<SnapshotGpu> {
    static constexpr std::tuple fields{
        field("major", &SnapshotGpu::major),  // and "device", "MAJOR:MINOR"
        field("minor", &SnapshotGpu::minor),
        field("fd", &SnapshotGpu::fd),
    };
};

template <>
struct Declaration<ConfigLine> {
    static constexpr std::tuple fields{
        field("line", &ConfigLine::line),
        field("text", &ConfigLine::text),
    };
};

template <>
struct Declaration<LoaderPath> {
    static constexpr std::tuple fields{
        field("variable", &LoaderPath::variable),
        field("path", &LoaderPath::path),
        field("resolved", &LoaderPath::resolved),
        field("vouched_by", &LoaderPath::vouched_by),
        field("age_s", &LoaderPath::age_s),
        field("others_can_write", &LoaderPath::others_can_write, {.store = Store::kByte}),
    };
};

// Flattened into the container event's body.
template <>
struct Declaration<ContainerDetails> {
    static constexpr Forms kKnown{.out = Out::kWhenSet};
    static constexpr std::tuple fields{
        field("name", &ContainerDetails::name, kKnown),
        field("image", &ContainerDetails::image, kKnown),
        field("image_id", &ContainerDetails::image_id, kKnown),
        field("pod_name", &ContainerDetails::pod_name, kKnown),
        field("pod_namespace", &ContainerDetails::pod_namespace, kKnown),
        field("pod_uid", &ContainerDetails::pod_uid, kKnown),
        field("kube_container", &ContainerDetails::kube_container, kKnown),
    };
};

// Flattened into the workload event's body.
template <>
struct Declaration<SlurmJob> {
    static constexpr Forms kKnown{.out = Out::kWhenSet};
    static constexpr std::tuple fields{
        field("job_id", &SlurmJob::job_id, kKnown),
        field("step_id", &SlurmJob::step_id, kKnown),
        field("job_user", &SlurmJob::user, kKnown),
        field("account", &SlurmJob::account, kKnown),
        field("partition", &SlurmJob::partition, kKnown),
        field("job_gpus", &SlurmJob::gpus, kKnown),
    };
};

// --- the event types, in EventData's order ----------------------------------

template <>
struct Declaration<GpuOpen> {
    static constexpr std::string_view name = "gpu_open";
    static constexpr uint8_t tag = 1;
    static constexpr Writer writer = Writer::kOwn;  // "flags", "device", "errno", "error"
    static constexpr Codec codec = Codec::kOwn;     // "bad open syscall"
    static constexpr Forms kOnSuccess{.out = Out::kSometimes};
    static constexpr std::tuple fields{
        field("syscall", &GpuOpen::syscall, {.store = Store::kByte}),
        field("path", &GpuOpen::path),
        field("path_truncated", &GpuOpen::path_truncated),
        field("dirfd", &GpuOpen::dirfd),
        field("open_flags", &GpuOpen::open_flags),  // and "flags", its names
        field("major", &GpuOpen::major, kOnSuccess),
        field("minor", &GpuOpen::minor, kOnSuccess),
        field("result", &GpuOpen::result, {.key = "fd", .out = Out::kSometimes}),  // or "errno"
    };
    static constexpr auto layout = layout_of("major", "minor", "result", "dirfd", "open_flags",
                                             "syscall", "path_truncated", "path");
};

template <>
struct Declaration<GpuIoctl> {
    static constexpr std::string_view name = "gpu_ioctl";
    static constexpr uint8_t tag = 2;
    static constexpr Writer writer = Writer::kOwn;  // "device", hex, the _IOC split
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("major", &GpuIoctl::major), field("minor", &GpuIoctl::minor),
        field("fd", &GpuIoctl::fd),       field("cmd", &GpuIoctl::cmd),
        field("arg", &GpuIoctl::arg),
    };
};

template <>
struct Declaration<Exec> {
    static constexpr std::string_view name = "exec";
    static constexpr uint8_t tag = 4;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("filename", &Exec::filename),
        field("filename_truncated", &Exec::filename_truncated, {.store = Store::kBit, .bit = 2}),
        field("argv", &Exec::argv),
        field("argv_truncated", &Exec::argv_truncated, {.store = Store::kBit, .bit = 1}),
        field("old_tid", &Exec::old_tid),
        field("exe", &Exec::exe, {.out = Out::kWhenSet, .store = Store::kIfBit, .bit = 4}),
    };
    static constexpr auto layout = layout_of("filename", "argv", kFlagByte, "old_tid", "exe");
};

template <>
struct Declaration<Fork> {
    static constexpr std::string_view name = "fork";
    static constexpr uint8_t tag = 5;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("child_pid", &Fork::child_pid),
        field("inherited_gpu", &Fork::inherited_gpu, {.store = Store::kBit, .bit = 1}),
        field("child_start_ns", &Fork::child_start_ns,
              {.out = Out::kWhenSet, .store = Store::kIfBit, .bit = 2}),
    };
};

template <>
struct Declaration<Exit> {
    static constexpr std::string_view name = "exit";
    static constexpr uint8_t tag = 6;
    static constexpr Writer writer = Writer::kOwn;  // "exit_code", "signal", "signal_name"
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("status", &Exit::status),
        field("held_gpu", &Exit::held_gpu),
    };
};

template <>
struct Declaration<Telemetry> {
    static constexpr std::string_view name = "telemetry";
    static constexpr uint8_t tag = 7;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("gpu_index", &Telemetry::gpu_index),
        field("vendor", &Telemetry::vendor),
        field("model", &Telemetry::model),
        field("devices", &Telemetry::devices),
        field("utilization_percent", &Telemetry::utilization_percent),
        field("memory_used_bytes", &Telemetry::memory_used_bytes),
        field("memory_total_bytes", &Telemetry::memory_total_bytes),
        field("processes", &Telemetry::processes),
        field("power_watts", &Telemetry::power_watts,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
        field("power_limit_watts", &Telemetry::power_limit_watts,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
        // Appended for GPM: older records end before them.
        field("pipes", &Telemetry::pipes, {.store = Store::kTrailing}),  // flattened
        // Appended for GPM per MIG GPU instance.
        field("mig_pipes", &Telemetry::mig_pipes,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
        field("process_instances", &Telemetry::process_instances,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
        // Appended for the MIG access nodes.
        field("mig_nodes", &Telemetry::mig_nodes,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
    };
};

template <>
struct Declaration<ProcessSnapshot> {
    static constexpr std::string_view name = "process_snapshot";
    static constexpr uint8_t tag = 8;
    static constexpr Writer writer = Writer::kOwn;  // each GPU's "device"
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("exe", &ProcessSnapshot::exe),
        field("argv", &ProcessSnapshot::argv),
        field("user", &ProcessSnapshot::user),
        field("cgroup_path", &ProcessSnapshot::cgroup_path),
        field("container_id", &ProcessSnapshot::container_id),
        field("container_runtime", &ProcessSnapshot::container_runtime),
        field("gpus", &ProcessSnapshot::gpus),
        field("exe_package", &ProcessSnapshot::exe_package,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
    };
};

template <>
struct Declaration<KillNow> {
    static constexpr std::string_view name = "kill_now";
    static constexpr uint8_t tag = 9;
    static constexpr Writer writer = Writer::kOwn;  // "device" of major and minor
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr Forms kDevice{.key = "device", .out = Out::kSometimes};
    static constexpr std::tuple fields{
        field("trigger", &KillNow::trigger),
        field("match", &KillNow::match),
        field("dev", &KillNow::dev),
        field("ino", &KillNow::ino),
        field("rule_id", &KillNow::rule_id),
        field("signal_result", &KillNow::signal_result),
        field("major", &KillNow::major, kDevice),
        field("minor", &KillNow::minor, kDevice),
    };
};

template <>
struct Declaration<ExeScan> {
    static constexpr std::string_view name = "exe_scan";
    static constexpr uint8_t tag = 10;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("path", &ExeScan::path),
        field("sha256", &ExeScan::sha256),
        field("size", &ExeScan::size),
        field("rules", &ExeScan::rules),
        field("signature_ids", &ExeScan::signature_ids),
        field("error", &ExeScan::error, {.out = Out::kWhenSet}),
        field("library", &ExeScan::library, {.out = Out::kWhenSet, .store = Store::kTrailing}),
        field("package", &ExeScan::package, {.out = Out::kWhenSet, .store = Store::kTrailing}),
        field("package_check", &ExeScan::package_check,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
        field("location_check", &ExeScan::location_check,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
        field("error_kind", &ExeScan::error_kind,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
    };
};

template <>
struct Declaration<ProcessIo> {
    static constexpr std::string_view name = "process_io";
    static constexpr uint8_t tag = 13;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("file_write_bytes", &ProcessIo::file_write_bytes, {.out = Out::kWhenSet}),
        field("net_send_bytes", &ProcessIo::net_send_bytes, {.out = Out::kWhenSet}),
        field("net_sends", &ProcessIo::net_sends, {.out = Out::kWhenSet}),
        field("net_recv_bytes", &ProcessIo::net_recv_bytes,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
        field("net_recvs", &ProcessIo::net_recvs,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
    };
};

template <>
struct Declaration<ConfigFile> {
    static constexpr std::string_view name = "config_file";
    static constexpr uint8_t tag = 14;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("path", &ConfigFile::path),
        field("reason", &ConfigFile::reason, {.examples = "argument default"}),
        field("size", &ConfigFile::size),
        field("sha256", &ConfigFile::sha256),
        field("lines", &ConfigFile::lines),
        field("truncated", &ConfigFile::truncated, {.out = Out::kWhenSet}),
        field("error", &ConfigFile::error, {.out = Out::kWhenSet, .store = Store::kTrailing}),
    };
    static constexpr auto layout =
        layout_of("path", "reason", "size", "sha256", "truncated", "lines", "error");
};

template <>
struct Declaration<HiddenProcess> {
    static constexpr std::string_view name = "hidden_process";
    static constexpr uint8_t tag = 21;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("seen_by", &HiddenProcess::seen_by, {.examples = "getdents64 process_table"}),
        field("libraries", &HiddenProcess::libraries),
        field("mechanisms", &HiddenProcess::mechanisms),
    };
};

template <>
struct Declaration<ModuleLoad> {
    static constexpr std::string_view name = "module_load";
    static constexpr uint8_t tag = 17;
    static constexpr Writer writer = Writer::kOwn;  // "taints", the kernel's letters
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("name", &ModuleLoad::name),
        field("taints", &ModuleLoad::taints, {.key = "taint_bits"}),  // and "taints"
    };
};

template <>
struct Declaration<FileChange> {
    static constexpr std::string_view name = "file_change";
    static constexpr uint8_t tag = 15;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("operation", &FileChange::operation, {.examples = "write unlink"}),
        field("syscall", &FileChange::syscall),
        field("kind", &FileChange::kind, {.examples = "preload cron"}),
        field("path", &FileChange::path),
        field("result", &FileChange::result),
        field("dirfd", &FileChange::dirfd),
        field("flags", &FileChange::flags),
        field("raw_path", &FileChange::raw_path, {.out = Out::kWhenSet}),
        field("path_truncated", &FileChange::path_truncated,
              {.out = Out::kWhenSet, .store = Store::kBit, .bit = 1}),
        field("watched_process", &FileChange::watched_process,
              {.out = Out::kWhenSet, .store = Store::kBit, .bit = 2}),
        field("libraries", &FileChange::libraries, {.out = Out::kWhenSet}),
    };
    static constexpr auto layout = layout_of("operation", "syscall", "kind", "path", "raw_path",
                                             "result", "dirfd", "flags", kFlagByte, "libraries");
};

template <>
struct Declaration<ProcessEnv> {
    static constexpr std::string_view name = "process_env";
    static constexpr uint8_t tag = 16;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("ld_preload", &ProcessEnv::ld_preload,
              {.out = Out::kWhenSet, .store = Store::kIfBit, .bit = 1}),
        field("ld_library_path", &ProcessEnv::ld_library_path,
              {.out = Out::kWhenSet, .store = Store::kIfBit, .bit = 2}),
        field("error", &ProcessEnv::error, {.out = Out::kWhenSet}),
        field("loader_paths", &ProcessEnv::loader_paths,
              {.out = Out::kWhenSet, .store = Store::kIfBit, .bit = 4}),
    };
};

template <>
struct Declaration<AgentTamper> {
    static constexpr std::string_view name = "agent_tamper";
    static constexpr uint8_t tag = 18;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr Forms kKnown{.out = Out::kWhenSet};
    static constexpr std::tuple fields{
        field("kind", &AgentTamper::kind),
        field("agent_pid", &AgentTamper::agent_pid),
        field("signal", &AgentTamper::signal, kKnown),
        field("result", &AgentTamper::result, kKnown),
        field("command", &AgentTamper::command, kKnown),
        field("exe", &AgentTamper::exe, kKnown),
        field("cmdline", &AgentTamper::cmdline, kKnown),
        field("detail", &AgentTamper::detail, kKnown),
        field("down_from_unix_ns", &AgentTamper::down_from_unix_ns, kKnown),
        field("down_to_unix_ns", &AgentTamper::down_to_unix_ns, kKnown),
    };
    static constexpr auto layout =
        layout_of("kind", "signal", "result", "command", "agent_pid", "exe", "cmdline", "detail",
                  "down_from_unix_ns", "down_to_unix_ns");
};

template <>
struct Declaration<Container> {
    static constexpr std::string_view name = "container";
    static constexpr uint8_t tag = 22;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("id", &Container::id), field("runtime", &Container::runtime),
        field("details", &Container::details),  // flattened: its fields are the body's
    };
};

template <>
struct Declaration<CpuUsage> {
    static constexpr std::string_view name = "cpu_usage";
    static constexpr uint8_t tag = 23;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("cpu_ns", &CpuUsage::cpu_ns),
        field("interval_ns", &CpuUsage::interval_ns),
        field("threads", &CpuUsage::threads),
    };
};

template <>
struct Declaration<GpuLibraries> {
    static constexpr std::string_view name = "gpu_libraries";
    static constexpr uint8_t tag = 24;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("libraries", &GpuLibraries::libraries),
        field("stack", &GpuLibraries::stack, {.examples = "runtime_only ml_framework"}),
        field("frameworks", &GpuLibraries::frameworks),
        field("error", &GpuLibraries::error, {.out = Out::kWhenSet}),
    };
};

template <>
struct Declaration<ProcessCmdline> {
    static constexpr std::string_view name = "cmdline";
    static constexpr uint8_t tag = 25;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("argv", &ProcessCmdline::argv),
        field("truncated", &ProcessCmdline::truncated, {.store = Store::kBit, .bit = 1}),
        field("extends_exec", &ProcessCmdline::extends_exec, {.store = Store::kBit, .bit = 2}),
    };
};

template <>
struct Declaration<TrustChange> {
    static constexpr std::string_view name = "trust_change";
    static constexpr uint8_t tag = 29;  // 27 and 28 are taken
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr Forms kKnown{.out = Out::kWhenSet};
    static constexpr std::tuple fields{
        field("stage", &TrustChange::stage, {.examples = "write reload"}),
        field("what", &TrustChange::what, kKnown),
        field("paths", &TrustChange::paths),
        field("operation", &TrustChange::operation, kKnown),
        field("writer", &TrustChange::writer),
        field("writer_detail", &TrustChange::writer_detail, kKnown),
        field("exe", &TrustChange::exe, kKnown),
        field("cmdline", &TrustChange::cmdline, kKnown),
        field("allowlist_added", &TrustChange::allowlist_added, kKnown),
        field("actions_lowered", &TrustChange::actions_lowered, kKnown),
        field("rules_disabled", &TrustChange::rules_disabled, kKnown),
        field("other_changes", &TrustChange::other_changes, kKnown),
    };
};

template <>
struct Declaration<Workload> {
    static constexpr std::string_view name = "workload";
    static constexpr uint8_t tag = 30;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr Forms kKnown{.out = Out::kWhenSet};
    static constexpr Forms kPod{.out = Out::kWhenSet, .store = Store::kTrailing};
    static constexpr std::tuple fields{
        field("scheduler", &Workload::scheduler, {.examples = "slurm kubernetes"}),
        field("slurm", &Workload::slurm),  // flattened: its fields are the body's
        field("allocation_source", &Workload::allocation_source, kKnown),
        field("allocation", &Workload::allocation, kKnown),
        field("allocated", &Workload::allocated, kKnown),
        field("node_gpus", &Workload::node_gpus, kKnown),
        field("unresolved", &Workload::unresolved, kKnown),
        // Appended for pods: older records end before them.
        field("pod_namespace", &Workload::pod_namespace, kPod),
        field("pod_name", &Workload::pod_name, kPod),
        field("pod_uid", &Workload::pod_uid, kPod),
        field("container", &Workload::container, kPod),
    };
};

template <>
struct Declaration<GpuFault> {
    static constexpr std::string_view name = "gpu_fault";
    static constexpr uint8_t tag = 31;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("gpu_index", &GpuFault::gpu_index),
        field("devices", &GpuFault::devices),
        field("kind", &GpuFault::kind, {.examples = "xid ecc_double_bit"}),
        field("code", &GpuFault::code),
        field("holders", &GpuFault::holders),
    };
};

}  // namespace gpuguard::agent::schema

#include "gpuguard/events/event_declarations_net.h"  // IWYU pragma: export
