// max_gpu_processes: N — a guard policy's limit: the process's user runs
// more than N GPU processes at once and this one is beyond the limit, in
// order of first GPU use (pid breaks ties).
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class MaxGpuProcesses final : public Condition {
  public:
    explicit MaxGpuProcesses(uint32_t limit) : limit_(limit) {}
    std::string_view name() const override { return "max_gpu_processes"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessInfo& info = context.info;
        // The user's live GPU processes in order of first GPU use (pid breaks
        // ties): the first `limit_` are within it.
        std::vector<std::pair<uint64_t, uint32_t>> holders;
        for (uint32_t other_pid : context.book.gpu_holders()) {
            const ProcessEvidence& other = *context.book.find(other_pid);
            const ProcessInfo* other_info = context.book.table().find(other_pid);
            if (!other_info || other_info->exited || other_info->uid != info.uid) continue;
            holders.emplace_back(other.first_gpu_ns, other_pid);
        }
        if (holders.size() <= limit_) return false;
        std::sort(holders.begin(), holders.end());
        const auto rank = std::find_if(holders.begin(), holders.end(), [&](const auto& holder) {
            return holder.second == context.pid;
        });
        if (rank == holders.end() || rank - holders.begin() < static_cast<std::ptrdiff_t>(limit_)) {
            return false;
        }
        in.extra.push_back(Evidence{context.ts_ns, "policy", "gpu_open", "", "processes",
                                    "user " +
                                        (info.user.empty() ? std::to_string(info.uid) : info.user) +
                                        " runs " + std::to_string(holders.size()) +
                                        " GPU processes, limit " + std::to_string(limit_)});
        return true;
    }

  private:
    uint32_t limit_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::max_gpu_processes(const rules::CorrelationRule& rule) {
    if (!rule.max_gpu_processes) return nullptr;
    return std::make_unique<MaxGpuProcesses>(*rule.max_gpu_processes);
}

}  // namespace gpuguard::agent
