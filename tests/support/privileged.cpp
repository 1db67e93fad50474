#include "tests/support/privileged.h"

#include <cstdlib>
#include <filesystem>

#include <bpf/libbpf.h>
#include <unistd.h>

namespace gpuguard::testing {

std::string missing_privilege() {
    if (geteuid() != 0) return "not running as root";
    std::error_code ec;
    if (!std::filesystem::exists("/sys/kernel/btf/vmlinux", ec)) {
        return "kernel BTF (/sys/kernel/btf/vmlinux) is missing";
    }
    if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_TRACEPOINT, nullptr) != 1) {
        return "the kernel refuses BPF tracepoint programs";
    }
    return "";
}

bool privileged_required() {
    const char* value = std::getenv("GPUGUARD_REQUIRE_PRIVILEGED");
    return value != nullptr && std::string(value) == "1";
}

}  // namespace gpuguard::testing
