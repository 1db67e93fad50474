#include "gpuguard/state/command_line.h"

#include <cerrno>

#include <fcntl.h>
#include <unistd.h>

#include "gpuguard/common/unique_fd.h"

namespace gpuguard::agent {

ProcessCmdline full_cmdline_of(std::string_view bytes, const std::vector<std::string>& exec_argv,
                               size_t max_bytes) {
    ProcessCmdline read;
    read.truncated = bytes.size() > max_bytes;
    if (read.truncated) bytes = bytes.substr(0, max_bytes);
    // The exec record's bytes as the kernel copied them: its arguments
    // joined by the NULs they were split at (the last one perhaps cut).
    std::string copied;
    for (size_t i = 0; i < exec_argv.size(); ++i) {
        if (i > 0) copied += '\0';
        copied += exec_argv[i];
    }
    read.extends_exec = !copied.empty() && bytes.starts_with(copied);
    // The trailing NUL ends the last argument; none is added when cut.
    if (!bytes.empty() && bytes.back() == '\0') bytes.remove_suffix(1);
    if (!bytes.empty()) read.argv = split_nul_separated(bytes);
    return read;
}

std::optional<ProcessCmdline> read_full_cmdline(uint32_t pid,
                                                const std::vector<std::string>& exec_argv,
                                                const std::string& proc_root, size_t max_bytes) {
    const std::string path = proc_root + "/" + std::to_string(pid) + "/cmdline";
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return std::nullopt;
    // One byte past the bound says whether there is more.
    std::string bytes(max_bytes + 1, '\0');
    size_t have = 0;
    while (have < bytes.size()) {
        const ssize_t n = ::read(fd.get(), bytes.data() + have, bytes.size() - have);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return std::nullopt;
        if (n == 0) break;
        have += static_cast<size_t>(n);
    }
    if (have == 0) return std::nullopt;
    bytes.resize(have);
    return full_cmdline_of(bytes, exec_argv, max_bytes);
}

}  // namespace gpuguard::agent
