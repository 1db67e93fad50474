#include "gpuguard/sensor/sensor_probe.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor_support.h"
#include "gpuguard_probe_bpf.skel.h"
#include "libbpf_handles.h"

namespace gpuguard::agent {
namespace {

using ProbeSkeletonPtr = LibbpfPtr<gpuguard_probe_bpf, gpuguard_probe_bpf__destroy>;

// Which program of the probe object to load, and whether to attach it too.
using ProgramPicker = std::function<bpf_program*(gpuguard_probe_bpf*)>;

// Opens a fresh probe object with only the picked program enabled, loads it
// and optionally attaches it. Returns "" on success or the failure reason.
std::string load_one(const ProgramPicker& pick, bool attach, const std::string& btf_path) {
    LIBBPF_OPTS(bpf_object_open_opts, open_opts);
    if (!btf_path.empty()) open_opts.btf_custom_path = btf_path.c_str();
    ProbeSkeletonPtr skel(gpuguard_probe_bpf__open_opts(&open_opts));
    if (!skel) return "opening probe object: " + errno_text(errno);
    bpf_program* wanted = pick(skel.get());
    bpf_program* program = nullptr;
    bpf_object__for_each_program(program, skel->obj) {
        bpf_program__set_autoload(program, program == wanted);
    }
    if (int err = gpuguard_probe_bpf__load(skel.get()); err) {
        return "load refused: " + errno_text(-err);
    }
    if (attach) {
        bpf_link* link = bpf_program__attach(wanted);
        if (!link) return "loaded, attach refused: " + errno_text(errno);
        bpf_link__destroy(link);
        return "";
    }
    return "";
}

FeatureStatus program_feature(const char* name, const char* description, bool required,
                              const ProgramPicker& pick, bool attach, const std::string& btf_path) {
    FeatureStatus status{name, description, false, required, ""};
    const std::string failure = load_one(pick, attach, btf_path);
    status.available = failure.empty();
    status.detail = failure.empty()
                        ? (attach ? "test program loaded and attached" : "test program loaded")
                        : failure;
    return status;
}

// Kernel module loads (bpf/module.bpf.c): the tracepoint exists only in a
// kernel built with CONFIG_MODULES, which is also the only kind that loads one.
FeatureStatus probe_module_load(const std::string& tracefs_dir, const std::string& btf_path) {
    std::error_code ec;
    if (!std::filesystem::exists(tracefs_dir + "/events/module/module_load", ec)) {
        return FeatureStatus{"module_load", "module:module_load tracepoint (kernel module loads)",
                             false, false,
                             "no tracepoint module/module_load under " + tracefs_dir +
                                 "/events: a kernel without CONFIG_MODULES (it loads no "
                                 "modules either); module loads are not reported"};
    }
    return program_feature(
        "module_load", "module:module_load tracepoint (kernel module loads)", false,
        [](auto* s) { return s->progs.gg_probe_module; }, true, btf_path);
}

std::string read_first_line(const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

}  // namespace

FeatureStatus probe_bpf_lsm(const std::string& btf_path) {
    install_libbpf_logger();
    QuietLibbpf quiet;  // a refusal is the answer, not a warning
    auto lsm = program_feature(
        "bpf_lsm", "BPF LSM hooks (in-kernel deny)", false,
        [](auto* s) { return s->progs.gg_probe_lsm; }, true, btf_path);
    const std::string active = read_first_line("/sys/kernel/security/lsm");
    if (!active.empty()) {
        lsm.detail += "; active LSMs: " + active;
    } else {
        lsm.detail += "; active LSM list unreadable (securityfs not mounted)";
    }
    return lsm;
}

FeatureStatus probe_socket_layer(const std::string& btf_path) {
    install_libbpf_logger();
    QuietLibbpf quiet;  // a kernel without the tracepoints answers with a refusal
    FeatureStatus status{"sock_send_length",
                         "socket-layer tracepoints sock_send_length/sock_recv_length (payload "
                         "capture without a syscall hook)",
                         false, false, ""};
    const std::pair<const char*, ProgramPicker> programs[] = {
        {"sock_send_length", [](auto* s) { return s->progs.gg_probe_sksend; }},
        {"sock_recv_length", [](auto* s) { return s->progs.gg_probe_skrecv; }},
    };
    for (const auto& [name, pick] : programs) {
        const std::string failure = load_one(pick, true, btf_path);
        if (!failure.empty()) {
            status.detail = std::string(name) + ": " + failure;
            return status;
        }
    }
#if defined(__x86_64__) || defined(__aarch64__)
    status.available = true;
    status.detail = "test programs loaded and attached on both";
#else
    status.detail =
        "test programs loaded and attached, but the payload programs find the system call "
        "on x86-64 and arm64 only";
#endif
    return status;
}

std::vector<FeatureStatus> probe_kernel_features(const ProbeOptions& options) {
    const std::string& btf = options.btf_path;
    install_libbpf_logger();
    QuietLibbpf quiet;  // refusals are results here, not warnings
    std::vector<FeatureStatus> features;

    {
        FeatureStatus status{"btf", "BTF for CO-RE relocations (kernel's or sensor.btf)", false,
                             true, ""};
        auto checked = check_btf(btf);
        status.available = checked.ok();
        status.detail =
            checked ? (btf.empty() ? std::string(kKernelBtfPath) : btf) : checked.error().message;
        features.push_back(status);
    }
    {
        FeatureStatus tracefs{"tracefs", "tracefs mounted (tracepoint attach needs it)", false,
                              true, ""};
        auto mounted = ensure_tracefs(options.tracefs_dir, options.allow_mount_tracefs);
        tracefs.available = mounted.ok();
        tracefs.detail = mounted ? options.tracefs_dir : mounted.error().message;
        features.push_back(tracefs);
    }
    {
        FeatureStatus ring{"ring_buffer", "BPF ring buffer (kernel -> agent transport)", false,
                           true, ""};
        const int ret = libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr);
        const std::string failure =
            ret == 1 ? load_one([](auto* s) { return s->progs.gg_probe_rb; }, false, btf)
                     : (ret == 0 ? "map type not supported" : "probe failed: " + errno_text(-ret));
        ring.available = failure.empty();
        ring.detail = failure.empty() ? "map created, reserve/discard program loaded" : failure;
        features.push_back(ring);
    }
    features.push_back(program_feature(
        "tracepoint", "syscall tracepoints (opens, ioctls, connects)", true,
        [](auto* s) { return s->progs.gg_probe_tp; }, true, btf));
    features.push_back(program_feature(
        "raw_tracepoint", "raw tracepoints (sched_process_fork)", true,
        [](auto* s) { return s->progs.gg_probe_rawtp; }, true, btf));
    features.push_back(program_feature(
        "tp_btf", "BTF-typed raw tracepoints", false,
        [](auto* s) { return s->progs.gg_probe_tpbtf; }, true, btf));
    features.push_back(probe_socket_layer(btf));
    features.push_back(program_feature(
        "fentry", "fentry/fexit on kernel functions", false,
        [](auto* s) { return s->progs.gg_probe_fentry; }, true, btf));
    features.push_back(probe_bpf_lsm(btf));
    features.push_back(program_feature(
        "cgroup_device", "cgroup/dev programs (deny GPU device access)", false,
        [](auto* s) { return s->progs.gg_probe_cgdev; }, false, btf));
    features.push_back(program_feature(
        "cgroup_connect", "cgroup/connect4 programs (block pool connects)", false,
        [](auto* s) { return s->progs.gg_probe_conn4; }, false, btf));
    features.push_back(probe_module_load(options.tracefs_dir, btf));
    features.push_back(program_feature(
        "bpf_send_signal", "bpf_send_signal helper (in-kernel kill)", false,
        [](auto* s) { return s->progs.gg_probe_signal; }, false, btf));

    {
        const AttachDecision decision = decide_attach_mode(options.attach, btf);
        FeatureStatus attach{"attach_mode",
                             "how the sensor attaches (sensor.attach: " +
                                 std::string(attach_mode_name(options.attach)) + ")",
                             decision.mode != AttachMode::kAuto, true, ""};
        attach.detail = (decision.mode == AttachMode::kAuto
                             ? std::string("refused")
                             : std::string(attach_mode_name(decision.mode)) +
                                   (decision.mode == AttachMode::kRawSyscalls
                                        ? (decision.raw_btf ? " (tp_btf)" : " (raw_tracepoint)")
                                        : "")) +
                        ": " + decision.reason;
        features.push_back(attach);
    }

    for (const auto& feature : features) {
        logger("sensor")->debug("probe {}: {} ({})", feature.name,
                                feature.available ? "available" : "unavailable", feature.detail);
    }
    return features;
}

}  // namespace gpuguard::agent

namespace gpuguard::agent {

AttachDecision decide_attach_mode(AttachMode wanted, const std::string& btf_path) {
    install_libbpf_logger();
    QuietLibbpf quiet;  // refusals are answers here
    AttachDecision decision;
    if (wanted == AttachMode::kSyscallTracepoints) {
        decision.mode = wanted;
        decision.reason = "sensor.attach: syscall_tracepoints";
        return decision;
    }
    std::string refusals;
    if (wanted == AttachMode::kAuto || wanted == AttachMode::kKernelFunctions) {
#if defined(__x86_64__) || defined(__aarch64__)
        const std::string fentry =
            load_one([](auto* s) { return s->progs.gg_probe_fentry; }, true, btf_path);
#else
        const std::string fentry = "the syscall functions are named for x86-64 and arm64 only";
#endif
        if (fentry.empty()) {
            decision.mode = AttachMode::kKernelFunctions;
            decision.reason = "fentry/fexit load and attach";
            return decision;
        }
        refusals = "kernel_functions: fentry " + fentry;
        if (wanted == AttachMode::kKernelFunctions) {
            decision.reason = refusals;
            return decision;
        }
    }
#if defined(__x86_64__) || defined(__aarch64__)
    const std::string btf =
        load_one([](auto* s) { return s->progs.gg_probe_tpbtf; }, true, btf_path);
    const std::string raw =
        btf.empty() ? ""
                    : load_one([](auto* s) { return s->progs.gg_probe_rawtp; }, true, btf_path);
#else
    const std::string btf = "the syscall number is read for x86-64 and arm64 only";
    const std::string raw = btf;
#endif
    if (btf.empty() || raw.empty()) {
        decision.mode = AttachMode::kRawSyscalls;
        decision.raw_btf = btf.empty();
        decision.reason =
            (refusals.empty() ? "" : refusals + "; ") +
            (btf.empty() ? "tp_btf sys_enter loads and attaches"
                         : "raw tracepoint sys_enter loads and attaches (tp_btf " + btf + ")");
        return decision;
    }
    refusals += (refusals.empty() ? "" : "; ") + std::string("raw_syscalls: tp_btf ") + btf +
                ", raw tracepoint " + raw;
    if (wanted == AttachMode::kRawSyscalls) {
        decision.reason = refusals;
        return decision;
    }
    decision.mode = AttachMode::kSyscallTracepoints;
    decision.reason = refusals;
    return decision;
}

}  // namespace gpuguard::agent
