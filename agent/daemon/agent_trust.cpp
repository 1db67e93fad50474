// The agent's own trust (docs/operations.md, "Stopping"): who stopped it,
// and the gap an unclean end left, as agent_tamper events through the one
// pipeline, so the outputs, the journal and replay all see them.
#include <ctime>
#include <filesystem>
#include <system_error>

#include <unistd.h>

#include "agent_impl.h"
#include "gpuguard/events/agent_tamper.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/state/proc_listing.h"

namespace gpuguard::agent {
namespace {

constexpr char kRunMarkerName[] = "agent.run";
constexpr char kFailedStartName[] = "agent.failed-start";
constexpr uint64_t kPinCheckIntervalNs = 5'000'000'000ull;
// How long a pin found missing waits for the kernel's report of its unlink
// (which trails the unlink itself) before it is reported as found missing.
constexpr uint64_t kPinRemoverGraceNs = 300'000'000ull;

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
    // Starts that failed since the last run (record_failed_start): part of the gap.
    const auto failed_path = dir / kFailedStartName;
    const auto failed = RunMarker::failed_starts(failed_path);
    const std::string failures =
        failed ? std::to_string(failed->count) + " start(s) failed (the first at " +
                     format_rfc3339(failed->first_unix_ns) + ", the last at " +
                     format_rfc3339(failed->last_unix_ns) + "): " + failed->last_reason
               : "";
    std::filesystem::remove(failed_path, ec);
    const auto report_down = [&](Event& event) {
        log->warn("{}", describe_agent_tamper(event.task, std::get<AgentTamper>(event.data)));
        std::lock_guard lock(mutex);
        on_event(event);
    };
    const auto previous = RunMarker::left_behind(path);
    if (previous) {
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
        if (failed) tamper.detail += "; then " + failures;
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
        report_down(event);
    } else if (failed) {
        // No run between: the host was unwatched from the first failed start.
        Event event;
        event.ts_ns = now;
        event.task.pid = event.task.tid = static_cast<uint32_t>(getpid());
        event.task.comm = "gpuguard";
        AgentTamper tamper;
        tamper.kind = "down";
        tamper.agent_pid = static_cast<uint32_t>(getpid());
        tamper.exe = exe;
        tamper.detail = failures;
        tamper.down_from_unix_ns = failed->first_unix_ns;
        tamper.down_to_unix_ns = now_unix_ns;
        event.data = std::move(tamper);
        report_down(event);
    }
    auto marker = RunMarker::create(path, static_cast<uint32_t>(getpid()), exe, now_unix_ns);
    if (!marker) {
        log->warn("{}: an unclean end of this run will not be reported at the next start",
                  marker.error().message);
        return;
    }
    run_marker.emplace(std::move(marker).value());
}

void Agent::Impl::report_own_preloads() {
    HiddenCheckOptions where;
    where.proc_root = options.proc_root;
    std::error_code ec;
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    for (const OwnPreload& preload : own_preloads(where)) {
        Event event;
        event.ts_ns = monotonic_ns();
        event.task.pid = event.task.tid = static_cast<uint32_t>(getpid());
        event.task.comm = "gpuguard";
        AgentTamper tamper;
        tamper.kind = "preloaded";
        tamper.agent_pid = event.task.pid;
        tamper.exe = exe;
        tamper.detail = preload.how;
        event.data = std::move(tamper);
        logger("agent")->warn("{}",
                              describe_agent_tamper(event.task, std::get<AgentTamper>(event.data)));
        std::lock_guard lock(mutex);
        on_event(event);
    }
}

void Agent::Impl::note_pin_change(const Event& event, const FileChange& change) {
    if (change.kind != "agent_pins" || change.operation == "write") return;
    pin_removers[change.path] = event.task;
    next_pin_check_ns = 0;
}

void Agent::Impl::check_pins(uint64_t now_ns) {
    if (now_ns < next_pin_check_ns) return;
    next_pin_check_ns = now_ns + kPinCheckIntervalNs;
    if (sensor) {
        if (auto listed = sensor->protect_own_bpf_objects(); !listed) {
            logger("agent")->warn("{}", listed.error().message);
        }
    }
    if (!pins) return;
    // What the kernel saw so far first: an unlink it reported names the remover.
    if (sensor) (void)sensor->poll(std::chrono::milliseconds(0));
    for (MissingPin& pin : pins->restore_missing()) {
        // Pinned again at once; reported once the remover is known, or the
        // grace for the kernel's report of the unlink has passed.
        unattributed_pins.try_emplace(pin.file, std::move(pin), now_ns + kPinRemoverGraceNs);
    }
    for (auto entry = unattributed_pins.begin(); entry != unattributed_pins.end();) {
        const auto& [pin, grace_end_ns] = entry->second;
        const auto remover = pin_removers.find(pin.file);
        if (remover == pin_removers.end() && now_ns < grace_end_ns) {
            next_pin_check_ns = std::min(next_pin_check_ns, grace_end_ns);
            ++entry;
            continue;
        }
        report_pin(pin, remover == pin_removers.end() ? nullptr : &remover->second, now_ns);
        entry = unattributed_pins.erase(entry);
    }
    pin_removers.clear();
}

void Agent::Impl::report_pin(const MissingPin& pin, const TaskInfo* remover, uint64_t now_ns) {
    Event event;
    event.ts_ns = now_ns;
    AgentTamper tamper;
    tamper.kind = "pin_removed";
    tamper.agent_pid = static_cast<uint32_t>(getpid());
    tamper.detail = pin.file + (pin.restored ? " (pinned again)"
                                             : " (could not pin it again: " + pin.error + ")");
    // The remover when the kernel saw the unlink, else the agent found it.
    if (remover) {
        event.task = *remover;
        tamper.detail += ", removed by " + remover->comm;
    } else {
        event.task.pid = event.task.tid = tamper.agent_pid;
        event.task.comm = "gpuguard";
        tamper.detail += ", found missing by the agent's check";
    }
    logger("agent")->warn("pin {}", tamper.detail);
    event.data = std::move(tamper);
    on_event(event);
}

void Agent::record_failed_start(const Config& config, const std::string& reason) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    RunMarker::record_failed_start(std::filesystem::path(config.journal.dir) / kFailedStartName,
                                   static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec,
                                   reason);
}

}  // namespace gpuguard::agent
