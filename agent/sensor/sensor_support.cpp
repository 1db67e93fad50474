#include "gpuguard/sensor/sensor_support.h"

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <spdlog/spdlog.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"

namespace gpuguard::agent {
namespace {

// libbpf's print hook is process-wide, so its verbosity switch is too.
std::atomic<int> quiet_depth{0};

int libbpf_print(enum libbpf_print_level level, const char* format, va_list args) {
    char line[1024];
    vsnprintf(line, sizeof(line), format, args);
    size_t length = strlen(line);
    while (length > 0 && line[length - 1] == '\n') line[--length] = '\0';
    const auto log = logger("sensor");
    switch (level) {
        case LIBBPF_WARN:
            // libbpf's lines already start with "libbpf: ".
            log->log(quiet_depth.load() > 0 ? spdlog::level::debug : spdlog::level::warn, "{}",
                     line);
            break;
        case LIBBPF_INFO:
            log->debug("{}", line);
            break;
        case LIBBPF_DEBUG:
            log->trace("{}", line);
            break;
    }
    return static_cast<int>(length);
}

bool has_events_dir(const std::filesystem::path& dir) {
    std::error_code ec;
    return std::filesystem::is_directory(dir / "events", ec);
}

}  // namespace

void install_libbpf_logger() { libbpf_set_print(libbpf_print); }

QuietLibbpf::QuietLibbpf() { ++quiet_depth; }
QuietLibbpf::~QuietLibbpf() { --quiet_depth; }

Status ensure_tracefs(const std::string& tracefs_dir, bool allow_mount) {
    // libbpf prefers /sys/kernel/debug/tracing when it exists.
    if (has_events_dir(tracefs_dir) || has_events_dir("/sys/kernel/debug/tracing")) return {};
    if (!allow_mount) {
        return fail(ErrorCode::kUnsupported,
                    "tracefs is not mounted at " + tracefs_dir +
                        " and sensor.mount_tracefs is false: mount it (mount -t tracefs tracefs " +
                        tracefs_dir + ") or enable sensor.mount_tracefs");
    }
    std::error_code ec;
    std::filesystem::create_directories(tracefs_dir, ec);
    if (mount("tracefs", tracefs_dir.c_str(), "tracefs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
        const int err = errno;
        return fail(err == EPERM ? ErrorCode::kPermission : ErrorCode::kUnsupported,
                    "tracefs is not mounted and mounting it at " + tracefs_dir +
                        " failed: " + std::strerror(err) +
                        " (tracepoints cannot be attached without it; run as root or mount it)",
                    err);
    }
    logger("sensor")->info(
        "mounted tracefs at {} (it was not mounted; needed to attach tracepoints)", tracefs_dir);
    return {};
}

Status check_privileges() {
    if (geteuid() == 0) return {};
    // capget(2) directly: the three bits below are all we need from libcap.
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
    if (syscall(SYS_capget, &header, data) == 0) {
        const auto has = [&](int cap) {
            return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
        };
        constexpr int kCapPerfmon = 38;  // CAP_PERFMON, Linux 5.8
        constexpr int kCapBpf = 39;      // CAP_BPF, Linux 5.8
        if (has(CAP_SYS_ADMIN) || (has(kCapBpf) && has(kCapPerfmon))) return {};
    }
    return fail(ErrorCode::kPermission,
                "not running as root: loading the BPF sensor needs root (or CAP_BPF, CAP_PERFMON "
                "and CAP_SYS_RESOURCE); run gpuguard as root",
                EPERM);
}

Status check_btf(const std::string& btf_path, const std::string& kernel_btf_path) {
    const bool custom = !btf_path.empty();
    const std::string path = custom ? btf_path : kernel_btf_path;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        if (custom) {
            return fail(ErrorCode::kNotFound, "BTF file " + path +
                                                  " (sensor.btf) does not exist: fix the path or "
                                                  "set sensor.btf to \"\" to use the kernel's");
        }
        return fail(ErrorCode::kNotFound,
                    "kernel BTF not found at " + path +
                        ": this kernel lacks CONFIG_DEBUG_INFO_BTF; set sensor.btf (or --btf) to "
                        "a vmlinux BTF file for this kernel, e.g. from btfhub");
    }
    struct btf* parsed = nullptr;
    {
        QuietLibbpf quiet;  // the Error below says it better than libbpf's EHDR warning
        parsed = btf__parse(path.c_str(), nullptr);
    }
    if (!parsed) {
        const int err = errno;
        return fail(ErrorCode::kParse,
                    "BTF file " + path + (custom ? " (sensor.btf)" : "") +
                        " is not valid BTF: " + errno_text(err) +
                        "; point sensor.btf at a vmlinux BTF file (raw BTF or an ELF with .BTF)",
                    err);
    }
    btf__free(parsed);
    return {};
}

std::string errno_text(int err) {
    if (err >= __LIBBPF_ERRNO__START) {
        char text[256];
        libbpf_strerror(err, text, sizeof(text));
        return text;
    }
    const char* name = strerrorname_np(err);
    return std::string(name ? name : std::to_string(err)) + " (" + std::strerror(err) + ")";
}

Error libbpf_error(const std::string& operation, int negative_errno) {
    const int err = negative_errno < 0 ? -negative_errno : negative_errno;
    std::string message = operation + " failed: " + errno_text(err);
    ErrorCode code = ErrorCode::kUnsupported;
    if (err == EPERM || err == EACCES) {
        code = ErrorCode::kPermission;
        if (geteuid() != 0) {
            message +=
                ": loading BPF needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_RESOURCE); "
                "run gpuguard as root";
        } else {
            message +=
                ": the kernel refused it although we are root (missing CAP_BPF/"
                "CAP_PERFMON in a container, kernel lockdown, or an LSM policy)";
        }
    } else if (err == ENOENT) {
        code = ErrorCode::kNotFound;
    }
    return Error{code, message, err};
}

}  // namespace gpuguard::agent
