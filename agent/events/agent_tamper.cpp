#include "gpuguard/events/agent_tamper.h"

#include <cstring>

#include <linux/bpf.h>

#include "gpuguard/events/event_json.h"

namespace gpuguard::agent {
namespace {

// "from pid 4242 (kill), uid 0: /usr/bin/kill kill -TERM 812"
std::string sender(const TaskInfo& task, const AgentTamper& tamper) {
    std::string text = "pid " + std::to_string(task.pid);
    if (!task.comm.empty()) text += " (" + task.comm + ")";
    text += ", uid " + std::to_string(task.uid);
    if (!tamper.exe.empty()) text += ": " + tamper.exe;
    for (const auto& arg : tamper.cmdline) text += " " + arg;
    return text;
}

std::string bpf_command_name(uint32_t command) {
    switch (command) {
        case BPF_PROG_DETACH:
            return "BPF_PROG_DETACH";
        case BPF_LINK_DETACH:
            return "BPF_LINK_DETACH";
        case BPF_LINK_UPDATE:
            return "BPF_LINK_UPDATE";
        default:
            return "bpf command " + std::to_string(command);
    }
}

// The signal_generate tracepoint's result (TRACE_SIGNAL_*, linux/signal.h).
std::string signal_result_name(int32_t result) {
    switch (result) {
        case 1:
            return "ignored by the agent";
        case 2:
            return "already pending";
        case 3:
            return "not delivered: queue overflow";
        case 4:
            return "delivered without its siginfo";
        default:
            return "not delivered: " + std::to_string(result);
    }
}

}  // namespace

std::string signal_name(int signal) {
    const char* abbrev = signal > 0 ? sigabbrev_np(signal) : nullptr;
    return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string describe_agent_tamper(const TaskInfo& task, const AgentTamper& tamper) {
    const std::string agent = "the agent (pid " + std::to_string(tamper.agent_pid) + ")";
    if (tamper.kind == "stop" || tamper.kind == "signal") {
        std::string text =
            signal_name(tamper.signal) + " to " + agent + " from " + sender(task, tamper);
        if (tamper.result != 0) text += " (" + signal_result_name(tamper.result) + ")";
        return text;
    }
    if (tamper.kind == "bpf_command") {
        return bpf_command_name(tamper.command) + " on " + agent + "'s programs by " +
               sender(task, tamper) + (tamper.detail.empty() ? "" : " (" + tamper.detail + ")");
    }
    if (tamper.kind == "preloaded") {
        return tamper.detail + ": loaded into " + agent + " before its own code";
    }
    if (tamper.kind == "pin_removed") {
        return "pin " + tamper.detail + " of " + agent + " removed" +
               (task.pid == tamper.agent_pid ? "" : " by " + sender(task, tamper));
    }
    if (tamper.kind == "down") {
        std::string text = "agent (pid " + std::to_string(tamper.agent_pid) + ") was down from " +
                           format_rfc3339(tamper.down_from_unix_ns) + " to " +
                           format_rfc3339(tamper.down_to_unix_ns);
        if (tamper.down_to_unix_ns >= tamper.down_from_unix_ns) {
            text += " (" +
                    std::to_string((tamper.down_to_unix_ns - tamper.down_from_unix_ns) /
                                   1'000'000'000) +
                    " s)";
        }
        if (tamper.signal) {
            text += ": killed by " + signal_name(tamper.signal) + " from " + sender(task, tamper);
        } else {
            text +=
                ": " + (tamper.detail.empty() ? std::string("it ended uncleanly") : tamper.detail);
        }
        return text;
    }
    return "agent_tamper " + tamper.kind + " by " + sender(task, tamper);
}

std::string describe_trust_change(const TaskInfo& task, const TrustChange& change) {
    std::string text = change.stage == "reload"
                           ? (change.what.empty() ? "" : change.what + " ") + "reloaded: "
                           : "trusted file changed: ";
    for (size_t i = 0; i < change.paths.size(); ++i) text += (i ? ", " : "") + change.paths[i];
    if (!change.operation.empty()) text += " (" + change.operation + ")";
    if (change.writer == "unknown") {
        text += " by a writer the sensor did not see";
    } else {
        AgentTamper who;
        who.exe = change.exe;
        who.cmdline = change.cmdline;
        text += " by " + sender(task, who) + " [" + change.writer +
                (change.writer_detail.empty() ? "" : ": " + change.writer_detail) + "]";
    }
    const auto list = [&text](const char* what, const std::vector<std::string>& lines) {
        if (lines.empty()) return;
        text += std::string("; ") + what + ": ";
        for (size_t i = 0; i < lines.size(); ++i) text += (i ? ", " : "") + lines[i];
    };
    list("allowlist added", change.allowlist_added);
    list("actions lowered", change.actions_lowered);
    list("rules disabled", change.rules_disabled);
    list("other changes", change.other_changes);
    return text;
}

}  // namespace gpuguard::agent
