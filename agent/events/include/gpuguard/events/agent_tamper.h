// Words for an agent_tamper event (gpuguard/events/event.h): the evidence
// line of its detection, the agent's log lines and `journal show`.
#pragma once

#include <cstdint>
#include <string>

#include "gpuguard/events/event.h"

namespace gpuguard::agent {

// "SIGTERM", "SIGKILL", "signal 64" for one without a name.
std::string signal_name(int signal);

// One line naming what was done to the agent and by whom, e.g. "SIGTERM to
// the agent (pid 812) from pid 4242 (kill), uid 0: /usr/bin/kill kill -TERM
// 812" or "agent (pid 812) was down from 2026-11-27T05:01:02Z to
// 2026-11-27T05:01:09Z (7 s): killed by SIGKILL from pid 4242 (kill), uid 0:
// /usr/bin/kill kill -KILL 812".
std::string describe_agent_tamper(const TaskInfo& task, const AgentTamper& tamper);

// Who changed which of the agent's trusted files, and what it did, e.g.
// "rules reloaded: /etc/gpuguard/rules.d/50-allow.yaml (write) by pid 4242
// (sh), uid 0, other: /usr/bin/bash sh -c ...; allowlist added:
// allowlist.exe_paths + /opt/x/*".
std::string describe_trust_change(const TaskInfo& task, const TrustChange& change);

}  // namespace gpuguard::agent
