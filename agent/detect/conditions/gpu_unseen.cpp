// gpu_unseen: {for} — the GPU's own telemetry (NVML) has listed the process
// on a GPU for at least `for`, and the sensor never saw it open a GPU
// device: it reached the GPU a way the open hooks do not see (an io_uring
// open, an fd passed over a UNIX socket, a full gpu_tgids map). The table
// makes it a GPU holder on the GPU's word (GpuHandle::reported_only); the
// wait lets a lagging ring buffer deliver an open first. Over time.
#include "condition.h"

namespace gpuguard::agent {
namespace {

class GpuUnseen final : public Condition {
  public:
    explicit GpuUnseen(std::chrono::seconds wait) : wait_ns_(wait.count() * 1'000'000'000ull) {}
    std::string_view name() const override { return "gpu_unseen"; }
    bool time_dependent() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        for (const GpuHandle& gpu : context.info.gpus) {
            if (!gpu.reported_only || gpu.since_ns + wait_ns_ > context.ts_ns) continue;
            in.extra.push_back(Evidence{
                context.ts_ns, "telemetry", "telemetry", "", "gpu",
                "the GPU's telemetry lists it on device " + std::to_string(gpu.major) + ":" +
                    std::to_string(gpu.minor) + " for " +
                    std::to_string((context.ts_ns - gpu.since_ns) / 1'000'000'000ull) +
                    "s, but no open of a GPU device was seen (io_uring, an fd passed over a "
                    "UNIX socket, or the sensor's GPU process map full)"});
            return true;
        }
        return false;
    }

  private:
    uint64_t wait_ns_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::gpu_unseen(const rules::CorrelationRule& rule) {
    if (!rule.gpu_unseen) return nullptr;
    return std::make_unique<GpuUnseen>(*rule.gpu_unseen);
}

}  // namespace gpuguard::agent
