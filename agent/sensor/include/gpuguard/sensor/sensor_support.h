// Pieces the sensor and the feature probe share: routing libbpf's log into
// spdlog, mounting tracefs, checking BTF and privileges before a load.
#pragma once

#include <string>

#include "gpuguard/common/result.h"

namespace gpuguard::agent {

inline constexpr const char* kKernelBtfPath = "/sys/kernel/btf/vmlinux";

// Routes libbpf's print callback to the "sensor" logger (idempotent).
void install_libbpf_logger();

// While alive, libbpf warnings are logged at debug: used while probing
// features that are expected to fail.
class QuietLibbpf {
  public:
    QuietLibbpf();
    ~QuietLibbpf();
    QuietLibbpf(const QuietLibbpf&) = delete;
    QuietLibbpf& operator=(const QuietLibbpf&) = delete;
};

// Makes sure `tracefs_dir` holds a mounted tracefs (libbpf reads tracepoint
// ids from it). Mounts it when missing and `allow_mount`, logging one line.
Status ensure_tracefs(const std::string& tracefs_dir, bool allow_mount);

// Checks that this process may load and attach tracing programs: root, or
// CAP_SYS_ADMIN, or CAP_BPF together with CAP_PERFMON. kPermission otherwise.
Status check_privileges();

// Checks the BTF CO-RE will relocate against: `btf_path`, or when empty the
// kernel's at `kernel_btf_path`. kNotFound when missing, kParse when not BTF.
Status check_btf(const std::string& btf_path, const std::string& kernel_btf_path = kKernelBtfPath);

// "EPERM (Operation not permitted)", or libbpf's own text for its error
// codes (4000 and up, e.g. "Invalid BPF object format").
std::string errno_text(int err);

// Turns a negative libbpf/errno result of `operation` into an Error, with
// advice for EPERM/EACCES (privileges) and the errno name.
Error libbpf_error(const std::string& operation, int negative_errno);

}  // namespace gpuguard::agent
