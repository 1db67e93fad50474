// gpu_index_not_in: [INDEX, ...] and gpu_vendor_not_in: [VENDOR, ...] — a
// guard policy's allotment: the process holds a GPU whose index or vendor
// (from the latest telemetry of its device) is not listed. One condition
// for both keys: the evidence names the last GPU outside either list.
// Time-dependent: a GPU's index and vendor are known from its telemetry.
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class GpuNotAllowed final : public Condition {
  public:
    GpuNotAllowed(std::vector<uint32_t> indexes, std::vector<std::string> vendors)
        : indexes_(std::move(indexes)), vendors_(std::move(vendors)) {}
    std::string_view name() const override {
        return indexes_.empty() ? "gpu_vendor_not_in" : "gpu_index_not_in";
    }
    bool time_dependent() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        std::string outside;
        for (const auto& gpu : context.book.gpus_of(context.info)) {
            if (!indexes_.empty() && gpu.index >= 0 &&
                std::find(indexes_.begin(), indexes_.end(), static_cast<uint32_t>(gpu.index)) ==
                    indexes_.end()) {
                outside = "GPU " + std::to_string(gpu.index) + " is not an allowed GPU";
            }
            if (!vendors_.empty() && !gpu.vendor.empty() &&
                std::find(vendors_.begin(), vendors_.end(), gpu.vendor) == vendors_.end()) {
                outside = "GPU " + std::to_string(gpu.index) + " is " + gpu.vendor +
                          ", not an allowed vendor";
            }
        }
        if (outside.empty()) return false;
        in.extra.push_back(Evidence{context.ts_ns, "policy", "gpu_open", "", "gpu", outside});
        return true;
    }

  private:
    std::vector<uint32_t> indexes_;
    std::vector<std::string> vendors_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::gpu_not_allowed(const rules::CorrelationRule& rule) {
    if (rule.gpu_index_not_in.empty() && rule.gpu_vendor_not_in.empty()) return nullptr;
    return std::make_unique<GpuNotAllowed>(rule.gpu_index_not_in, rule.gpu_vendor_not_in);
}

}  // namespace gpuguard::agent
