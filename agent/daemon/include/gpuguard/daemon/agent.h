// Agent: the running daemon. Owns the sensor, the GPU device set, the
// process table, the rules (hot-reloaded) and the correlator, and drives
// them from one loop: kernel events and telemetry samples -> process table
// -> correlator -> detections; periodic ioctl aggregates, evictions and
// drop warnings.
#pragma once

#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/daemon/config.h"
#include "gpuguard/daemon/config_reload.h"
#include "gpuguard/daemon/line_writer.h"

namespace gpuguard::agent {

// Who sent the signal that stops the agent: its siginfo, and what /proc
// named when the signal handler ran (agent/cli/main.cpp), while the sender
// still existed.
struct StopSender {
    int signal = 0;
    uint32_t pid = 0;  // 0: no process sent it (the kernel: a terminal's Ctrl-C)
    uint32_t uid = 0;
    std::string comm;
    std::string exe;
    std::vector<std::string> cmdline;
};

struct AgentOptions {
    Config config;
    // Receives each event as one JSON line (no newline); empty = not printed.
    std::function<void(const std::string&)> event_sink;
    // Event types given to event_sink ("gpu_open", "exec", ...); empty = all.
    std::set<std::string> event_types;
    // Receives each detection (new or updated) as the correlator raises it,
    // on the agent's loop thread; empty = not given out.
    std::function<void(const Detection&)> detection_sink;
    // Receives each enforcement outcome (taken, withheld, failed, dry run),
    // on the enforcer's thread; empty = not given out.
    std::function<void(const EnforcementOutcome&)> outcome_sink;
    // Called by run() on its own thread after every wait (at least every
    // 100 ms), without the agent's lock: the service watchdog ping and the
    // configuration reload (agent/cli_run.cpp) happen here; empty = none.
    std::function<void()> on_loop;
    // What prints event_sink's and detection_sink's lines on stdout, for the
    // written and dropped counts in `status` and /metrics; null = nothing printed.
    std::shared_ptr<const LineWriter> stdout_writer;
    // Asked once run() saw the stop flag: who sent it, for the "agent
    // stopped" record (GG-CORR-0019) that goes out before the programs are
    // detached; empty or nullopt = no record.
    std::function<std::optional<StopSender>()> stop_sender;
    std::string proc_root = "/proc";
    std::string sys_root = "/sys";
    // Why the configuration file given was not used at start (it runs on the
    // last good copy): reported as the critical GG-AGENT-0003; "" = it was.
    std::string config_rejected;
    // The configuration file in use ("" the embedded default): one of the
    // agent's trusted files, watched by the kernel (kind agent_config).
    std::string config_path;
};

class Agent {
  public:
    // Loads the sensor, registers GPU devices (/proc/devices and config),
    // bootstraps the process table from /proc and opens the control socket.
    static Result<std::unique_ptr<Agent>> start(AgentOptions options);
    // A start that failed with `reason`, recorded in journal.dir where the
    // next start finds it: it reports the time the host was unwatched and
    // why (an agent_tamper "down" event, GG-CORR-0020). Best effort.
    static void record_failed_start(const Config& config, const std::string& reason);

    ~Agent();
    Agent(const Agent&) = delete;
    Agent& operator=(const Agent&) = delete;

    // Runs until *stop becomes non-zero. Fails only when the sensor fails.
    Status run(const volatile std::sig_atomic_t* stop);

    // The configuration file was reloaded with these changes: a
    // trust_change "reload" event naming the last writer the kernel saw
    // (enforcement.dry_run turned on is an action lowered). Takes the lock.
    void config_reloaded(const std::vector<ConfigChange>& changes);

    // The control socket's answers ("status", "ps"), as JSON documents.
    std::string status_json() const;
    std::string ps_json() const;

  private:
    struct Impl;
    explicit Agent(std::unique_ptr<Impl> impl);
    static std::string status_json_of(const Impl& impl);
    static std::string ps_json_of(const Impl& impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpuguard::agent
