// Rules judged per GPU rather than per process (unexplained_gpu_load): at
// each telemetry sample of a GPU, after its processes, each such rule's
// conditions over the GPU's record in the book; a detection names the GPU
// (its subject, pid 0, holding its device), one per GPU and rule per
// window. No process means nothing to allowlist, flag or act on (the
// enforcer refuses pid 0).
#include "correlator_support.h"

namespace gpuguard::agent {

void CorrelatorImpl::evaluate_gpu(const GpuLoad& gpu, uint64_t ts_ns,
                                  std::vector<const Detection*>& out) {
    std::optional<bool> allowlisted = false;
    RuleInputs inputs;
    for (size_t index = 0; index < rules_.size(); ++index) {
        const CorrelationRule& rule = rules_[index];
        if (!rule.enabled || !judged_[index].per_gpu) continue;
        ++stats_.evaluations;
        const ConditionContext context{rule,  index,      0,     gpu.subject,         gpu.evidence,
                                       book_, *rule_set_, ts_ns, realtime_offset_ns_, &gpu};
        if (!holds(judged_[index].conditions, context, inputs)) continue;
        raise(rule, gpu.subject, gpu.evidence, inputs.hits, inputs.extra, 0, 0, ts_ns, out,
              allowlisted, gpu.key);
    }
}

}  // namespace gpuguard::agent
