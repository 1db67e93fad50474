// gpu_xid: N — the process's own GPU work raised at least N NVIDIA Xids
// that NVIDIA's catalogue puts down to the application (an engine
// exception, a memory page fault, a stopped channel) within the rule's
// window: gpu_fault events the correlator kept for the process that was on
// the GPU (an ECC error, the GPU off the bus or a GSP timeout is the GPU's
// health and blames nobody), and only while it was the GPU's lone holder:
// NVML's event names the GPU, not the process. One piece of evidence per
// Xid counted.
#include "condition.h"
#include "gpuguard/events/gpu_fault.h"

namespace gpuguard::agent {
namespace {

class GpuXid final : public Condition {
  public:
    GpuXid(uint32_t at_least, std::chrono::seconds window) : at_least_(at_least), window_(window) {}
    std::string_view name() const override { return "gpu_xid"; }
    uint32_t needs() const override { return kFactGpuFaults; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const uint64_t window_ns = static_cast<uint64_t>(window_.count()) * 1'000'000'000ull;
        std::vector<const FaultSeen*> counted;
        for (const FaultSeen& seen : context.evidence.gpu_faults) {
            if (seen.ts_ns + window_ns < context.ts_ns) continue;
            if (xid_cause(seen.fault.code) != XidCause::kApplication) continue;
            // On a shared GPU NVML's event does not say whose work raised it.
            if (seen.fault.holders != 1) continue;
            counted.push_back(&seen);
        }
        if (counted.size() < at_least_) return false;
        for (const FaultSeen* seen : counted) {
            in.extra.push_back(Evidence{seen->ts_ns, "event", "gpu_fault", "", "xid",
                                        describe_gpu_fault(seen->fault) + " while " +
                                            std::to_string(context.info.pid) + " (" +
                                            context.info.comm + ") was on it"});
        }
        return true;
    }

  private:
    uint32_t at_least_;
    std::chrono::seconds window_;  // the rule's
};

}  // namespace

std::unique_ptr<const Condition> conditions::gpu_xid(const rules::CorrelationRule& rule) {
    if (!rule.gpu_xid) return nullptr;
    return std::make_unique<GpuXid>(*rule.gpu_xid, rule.window);
}

}  // namespace gpuguard::agent
