#include "run_marker.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuguard/common/read_file.h"

namespace gpuguard::agent {

std::optional<RunMarker::Previous> RunMarker::left_behind(const std::filesystem::path& path) {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return std::nullopt;
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) return std::nullopt;
    Previous previous;
    previous.last_alive_unix_ns =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    auto text = read_open_file(fd.get(), path);
    std::istringstream lines(text ? *text : std::string());
    for (std::string line; std::getline(lines, line);) {
        const auto equals = line.find('=');
        if (equals == std::string::npos) continue;
        const std::string key = line.substr(0, equals);
        const std::string value = line.substr(equals + 1);
        if (key == "pid")
            previous.pid = static_cast<uint32_t>(std::strtoul(value.c_str(), nullptr, 10));
        if (key == "exe") previous.exe = value;
        if (key == "started_unix_ns")
            previous.started_unix_ns = std::strtoll(value.c_str(), nullptr, 10);
    }
    return previous;
}

void RunMarker::record_failed_start(const std::filesystem::path& path, int64_t unix_ns,
                                    const std::string& reason) {
    FailedStarts starts = failed_starts(path).value_or(FailedStarts{unix_ns, unix_ns, 0, ""});
    starts.last_unix_ns = unix_ns;
    ++starts.count;
    std::string line = reason.substr(0, 2048);
    std::replace(line.begin(), line.end(), '\n', ' ');
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    const UniqueFd fd(
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) return;
    const std::string text = std::to_string(starts.first_unix_ns) + " " +
                             std::to_string(starts.last_unix_ns) + " " +
                             std::to_string(starts.count) + "\n" + line + "\n";
    if (::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size())) {
        ::fsync(fd.get());
    }
}

std::optional<RunMarker::FailedStarts> RunMarker::failed_starts(const std::filesystem::path& path) {
    auto text = read_file(path);
    if (!text) return std::nullopt;
    std::istringstream lines(*text);
    FailedStarts starts;
    std::string first;
    if (!std::getline(lines, first)) return std::nullopt;
    std::istringstream numbers(first);
    if (!(numbers >> starts.first_unix_ns >> starts.last_unix_ns >> starts.count)) {
        return std::nullopt;
    }
    std::getline(lines, starts.last_reason);
    return starts;
}

Result<RunMarker> RunMarker::create(std::filesystem::path path, uint32_t pid,
                                    const std::string& exe, int64_t started_unix_ns) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) {
        return fail(ErrorCode::kIo,
                    "cannot write the run marker " + path.string() + ": " + std::strerror(errno),
                    errno);
    }
    const std::string text = "pid=" + std::to_string(pid) + "\nexe=" + exe +
                             "\nstarted_unix_ns=" + std::to_string(started_unix_ns) + "\n";
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
        ::fsync(fd.get()) != 0) {
        return fail(ErrorCode::kIo,
                    "cannot write the run marker " + path.string() + ": " + std::strerror(errno),
                    errno);
    }
    return RunMarker(std::move(path), std::move(fd));
}

void RunMarker::touch() const {
    if (fd_) ::futimens(fd_.get(), nullptr);
}

void RunMarker::remove() {
    if (!fd_) return;
    ::unlink(path_.c_str());
    fd_ = UniqueFd();
}

}  // namespace gpuguard::agent
