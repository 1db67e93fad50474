// What a process did to the agent itself (agent_tamper events): kept as its
// evidence, judged by rules with `agent_tamper:` (GG-CORR-0019..0021).
#include "correlator_support.h"
#include "gpuguard/events/agent_tamper.h"

namespace gpuguard::agent {

namespace {
constexpr size_t kMaxTampers = 16;  // per process: a signal storm is one detection's worth
}

void Correlator::note_tamper(ProcessState& state, const Event& event, const AgentTamper& tamper) {
    if (state.tampers.size() >= kMaxTampers) state.tampers.erase(state.tampers.begin());
    state.tampers.push_back(
        Tamper{event.ts_ns, tamper.kind, describe_agent_tamper(event.task, tamper)});
    state.dirty = true;
}

bool Correlator::tampered(const CorrelationRule& rule, const ProcessState& state,
                          std::vector<Evidence>& evidence) {
    bool any = false;
    for (const Tamper& tamper : state.tampers) {
        if (std::find(rule.agent_tamper.begin(), rule.agent_tamper.end(), tamper.kind) ==
            rule.agent_tamper.end()) {
            continue;
        }
        evidence.push_back(
            Evidence{tamper.ts_ns, "event", "agent_tamper", "", tamper.kind, tamper.detail});
        any = true;
    }
    return any;
}

}  // namespace gpuguard::agent
