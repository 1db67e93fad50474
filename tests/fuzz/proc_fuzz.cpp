// libFuzzer target for what the process table reads from /proc/PID (a
// process shapes all of it: its name, its cgroup path, its argv): status
// fields, the cgroup file and the container id in its path, and the
// NUL-separated cmdline. Properties checked: a container id is 64 hex
// digits of a known runtime found in the path; the cgroup path is one of the
// file's lines; splitting a cmdline and joining it back with NULs gives the
// input (less one final NUL).
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpuguard/events/event.h"
#include "gpuguard/state/proc_parse.h"

namespace agent = gpuguard::agent;

namespace {

void check_container(std::string_view path) {
    const auto container = agent::container_from_cgroup(path);
    if (!container) return;
    if (container->id.size() != 64 || path.find(container->id) == std::string_view::npos) {
        std::abort();
    }
    for (const char c : container->id) {
        if (!std::isxdigit(static_cast<unsigned char>(c))) std::abort();
    }
    const auto& runtime = container->runtime;
    if (runtime != "docker" && runtime != "containerd" && runtime != "cri-o" &&
        runtime != "podman") {
        std::abort();
    }
}

void check_cmdline(std::string_view bytes) {
    const auto parts = agent::split_nul_separated(bytes);
    std::string joined;
    for (const auto& part : parts) {
        if (part.find('\0') != std::string::npos) std::abort();
        joined += part;
        joined.push_back('\0');
    }
    std::string expected(bytes);
    if (expected.empty() || expected.back() != '\0') expected.push_back('\0');
    // Empty parts are kept ("a\0\0b"), so only the final NUL is normalised.
    if (!bytes.empty() && joined != expected) std::abort();
    if (bytes.empty() && !parts.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);

    for (const char* key : {"PPid", "Uid", "Gid", "Tgid"}) {
        const auto value = agent::proc_status_field(bytes, key);
        if (value && bytes.find(std::string(key) + ":") == std::string_view::npos) std::abort();
    }
    if (const auto written = agent::proc_io_field(bytes, "write_bytes")) {
        // A value is only ever read from a "write_bytes:" line that holds it.
        if (bytes.find("write_bytes:") == std::string_view::npos) std::abort();
        if (bytes.find(std::to_string(*written)) == std::string_view::npos) std::abort();
    }
    const std::string name = agent::proc_status_name(bytes);
    if (name.find('\n') != std::string::npos) std::abort();
    if (!name.empty() && bytes.find(name) == std::string_view::npos) std::abort();
    if (const auto number = agent::parse_decimal_u32(bytes)) {
        if (agent::parse_decimal_u32(std::to_string(*number)) != number) std::abort();
    }

    const std::string cgroup = agent::cgroup_path_from_proc(bytes);
    if (cgroup.find('\n') != std::string::npos) std::abort();
    if (!cgroup.empty() && bytes.find(cgroup) == std::string_view::npos) std::abort();
    check_container(cgroup);
    check_container(bytes);

    check_cmdline(bytes);
    return 0;
}
