// file_changed: [preload, cron, systemd, shell_rc, ssh_keys, agent_pins,
// agent_config, other] — the process wrote or renamed onto a watched file of one of
// these kinds (file_change events) within the rule's window; each change
// is a piece of evidence.
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class FileChanged final : public Condition {
  public:
    FileChanged(std::vector<std::string> kinds, std::chrono::seconds window)
        : kinds_(std::move(kinds)), window_(window) {}
    std::string_view name() const override { return "file_changed"; }
    uint32_t needs() const override { return kFactFileChanges; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const uint64_t window_ns = static_cast<uint64_t>(window_.count()) * 1'000'000'000ull;
        bool any = false;
        for (const FileRecord& file : context.evidence.files) {
            if (file.operation == "unlink" || file.ts_ns + window_ns < context.ts_ns ||
                std::find(kinds_.begin(), kinds_.end(), file.kind) == kinds_.end()) {
                continue;
            }
            any = true;
            in.extra.push_back(
                Evidence{file.ts_ns, "event", "file_change", "", file.kind,
                         describe_file_change(file.operation, file.path, file.libraries)});
        }
        return any;
    }

  private:
    std::vector<std::string> kinds_;
    std::chrono::seconds window_;  // the rule's
};

}  // namespace

std::unique_ptr<const Condition> conditions::file_changed(const rules::CorrelationRule& rule) {
    if (rule.file_changed.empty()) return nullptr;
    return std::make_unique<FileChanged>(rule.file_changed, rule.window);
}

}  // namespace gpuguard::agent
