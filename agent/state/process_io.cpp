#include "gpuguard/state/process_io.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <unordered_set>

#include "gpuguard/common/logging.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/state/proc_parse.h"

namespace gpuguard::agent {

ProcessIoSampler::ProcessIoSampler(std::filesystem::path proc_root, NetSendsReader net_sends)
    : proc_root_(std::move(proc_root)), net_sends_(std::move(net_sends)) {}

ProcessIo ProcessIoSampler::read(uint32_t pid) {
    ProcessIo io;
    // Readable with CAP_SYS_PTRACE (or as its user); a process that just
    // exited has none.
    // read_file: a process that exits mid-read (ESRCH) is a failed read,
    // where libstdc++'s filebuf under an istreambuf_iterator throws.
    const auto path = proc_root_ / std::to_string(pid) / "io";
    auto text = read_file(path);
    if (text) {
        io.file_write_bytes = proc_io_field(*text, "write_bytes");
    } else if (text.error().code == ErrorCode::kPermission) {
        if (!warned_unreadable_) {
            logger("agent")->warn(
                "cannot read {} ({}): file writes are unknown, so quiet_io conditions "
                "(GG-CORR-0009) do not hold; the agent needs CAP_SYS_PTRACE (logged once)",
                path.string(), std::strerror(text.error().sys_errno));
        }
        warned_unreadable_ = true;
    }
    if (net_sends_) {
        if (const auto sends = net_sends_(pid)) {
            io.net_send_bytes = sends->bytes;
            io.net_sends = sends->calls;
            io.net_recv_bytes = sends->received_bytes;
            io.net_recvs = sends->receives;
        }
    }
    return io;
}

std::vector<Event> ProcessIoSampler::sample(const std::vector<ProcessInfo>& processes,
                                            uint64_t ts_ns) {
    std::vector<Event> events;
    std::unordered_set<uint32_t> listed;
    for (const ProcessInfo& info : processes) {
        if (info.exited) continue;
        listed.insert(info.pid);
        ProcessIo io = read(info.pid);
        const auto known = last_.find(info.pid);
        if (known != last_.end() && known->second == io) continue;
        last_[info.pid] = io;
        Event event;
        event.ts_ns = ts_ns;
        event.task = task_of(info);
        event.data = std::move(io);
        events.push_back(std::move(event));
    }
    std::erase_if(last_, [&](const auto& entry) { return !listed.contains(entry.first); });
    return events;
}

}  // namespace gpuguard::agent
