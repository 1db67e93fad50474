// capture_stop_sender (cli.h): runs inside the SIGTERM/SIGINT handler, so
// only async-signal-safe calls (open, read, readlink, close) and no
// allocation, formatting or locks.
#include <fcntl.h>
#include <unistd.h>

#include "cli.h"

namespace gpuguard::agent::cli {
namespace {

// "/proc/<pid>/<leaf>" into `out` (at least 64 bytes).
void proc_path(pid_t pid, const char* leaf, char* out) {
    const char prefix[] = "/proc/";
    size_t n = 0;
    for (const char* c = prefix; *c; ++c) out[n++] = *c;
    char digits[16];
    size_t count = 0;
    for (unsigned long value = static_cast<unsigned long>(pid); count == 0 || value; value /= 10) {
        digits[count++] = static_cast<char>('0' + value % 10);
    }
    while (count) out[n++] = digits[--count];
    out[n++] = '/';
    for (const char* c = leaf; *c; ++c) out[n++] = *c;
    out[n] = '\0';
}

// Up to size - 1 bytes of the file, NUL-terminated; the count read.
size_t read_small(const char* path, char* out, size_t size) {
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    size_t total = 0;
    while (total + 1 < size) {
        const ssize_t n = ::read(fd, out + total, size - 1 - total);
        if (n <= 0) break;
        total += static_cast<size_t>(n);
    }
    ::close(fd);
    out[total] = '\0';
    return total;
}

}  // namespace

void capture_stop_sender(const siginfo_t& info, RawStopSender& out) {
    if (info.si_code != SI_USER && info.si_code != SI_QUEUE && info.si_code != SI_TKILL) return;
    out.signal = info.si_signo;
    out.pid = info.si_pid;
    out.uid = info.si_uid;
    char path[64];
    proc_path(info.si_pid, "exe", path);
    const ssize_t n = ::readlink(path, out.exe, sizeof out.exe - 1);
    out.exe[n > 0 ? n : 0] = '\0';
    proc_path(info.si_pid, "cmdline", path);
    out.cmdline_length = read_small(path, out.cmdline, sizeof out.cmdline);
    proc_path(info.si_pid, "comm", path);
    const size_t comm = read_small(path, out.comm, sizeof out.comm);
    if (comm > 0 && out.comm[comm - 1] == '\n') out.comm[comm - 1] = '\0';
    out.ready = 1;
}

}  // namespace gpuguard::agent::cli
