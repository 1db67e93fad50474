// The agent's own trust (docs/operations.md, "Stopping"): who stopped it,
// and the gap an unclean end left, as agent_tamper events through the one
// pipeline, so the outputs, the journal and replay all see them.
#include <filesystem>
#include <system_error>

#include <unistd.h>

#include "agent_impl.h"
#include "gpuguard/events/agent_tamper.h"

namespace gpuguard::agent {
namespace {

constexpr char kRunMarkerName[] = "agent.run";

}  // namespace

void Agent::Impl::report_stop(const StopSender& sender) {
    Event event;
    event.ts_ns = monotonic_ns();
    event.task.pid = event.task.tid = sender.pid;
    event.task.uid = sender.uid;
    event.task.comm = sender.comm;
    AgentTamper tamper;
    tamper.kind = "stop";
    tamper.signal = sender.signal;
    tamper.agent_pid = static_cast<uint32_t>(getpid());
    tamper.exe = sender.exe;
    tamper.cmdline = sender.cmdline;
    event.data = std::move(tamper);
    on_event(event);
}

void Agent::Impl::mark_run() {
    const auto log = logger("agent");
    const std::filesystem::path dir = options.config.journal.dir;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const auto path = dir / kRunMarkerName;
    std::error_code exe_error;
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe", exe_error).string();
    const uint64_t now = monotonic_ns();
    const int64_t now_unix_ns = static_cast<int64_t>(now) + realtime_offset_ns;
    if (const auto previous = RunMarker::left_behind(path)) {
        Event event;
        event.ts_ns = now;
        // The run that ended: its pid and name (the process is gone; its
        // identity is the marker's, never what /proc shows for the pid now).
        event.task.pid = event.task.tid = previous->pid;
        event.task.comm = "gpuguard";
        AgentTamper tamper;
        tamper.kind = "down";
        tamper.agent_pid = previous->pid;
        tamper.exe = previous->exe.empty() ? exe : previous->exe;
        tamper.detail = "it ended uncleanly (SIGKILL, a crash or power loss): " + path.string() +
                        " was left behind";
        // The kernel saw who SIGKILLed it (pinned map): that process is the
        // subject, its executable read now if it still runs.
        if (auto killer = sensor ? sensor->agent_killer(previous->pid) : std::nullopt) {
            event.task = killer->task;
            tamper.signal = killer->signal;
            std::error_code gone;
            tamper.exe = std::filesystem::read_symlink(
                             "/proc/" + std::to_string(killer->task.pid) + "/exe", gone)
                             .string();
            tamper.cmdline.clear();
        }
        tamper.down_from_unix_ns = previous->last_alive_unix_ns;
        tamper.down_to_unix_ns = now_unix_ns;
        event.data = std::move(tamper);
        log->warn("{}", describe_agent_tamper(event.task, std::get<AgentTamper>(event.data)));
        std::lock_guard lock(mutex);
        on_event(event);
    }
    auto marker = RunMarker::create(path, static_cast<uint32_t>(getpid()), exe, now_unix_ns);
    if (!marker) {
        log->warn("{}: an unclean end of this run will not be reported at the next start",
                  marker.error().message);
        return;
    }
    run_marker.emplace(std::move(marker).value());
}

}  // namespace gpuguard::agent
