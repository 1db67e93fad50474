// unreadable: [executable, config] — the agent could not read what the
// process runs: its executable was not scanned for a reason other than the
// process being gone (root refused: a FUSE mount without allow_other;
// over the YARA size limit; an I/O error), or a configuration file it
// names could not be read. A miner that hides its strings puts them where
// the agent cannot look; a supporting signal, never a verdict on its own
// (an oversized game or a network filesystem are not miners).
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class Unreadable final : public Condition {
  public:
    explicit Unreadable(const std::vector<std::string>& kinds)
        : executable_(std::find(kinds.begin(), kinds.end(), "executable") != kinds.end()),
          config_(std::find(kinds.begin(), kinds.end(), "config") != kinds.end()) {}
    std::string_view name() const override { return "unreadable"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessEvidence& evidence = context.evidence;
        bool any = false;
        if (executable_ && !evidence.exe_unread.empty()) {
            in.extra.push_back(Evidence{evidence.exe_unread_ns, "event", "exe_scan", "",
                                        "unreadable", "executable " + evidence.exe_unread});
            any = true;
        }
        if (config_) {
            for (const auto& [ts_ns, detail] : evidence.configs_unread) {
                in.extra.push_back(Evidence{ts_ns, "event", "config_file", "", "unreadable",
                                            "configuration file " + detail});
                any = true;
            }
        }
        return any;
    }

  private:
    bool executable_;
    bool config_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::unreadable(const rules::CorrelationRule& rule) {
    if (rule.unreadable.empty()) return nullptr;
    return std::make_unique<Unreadable>(rule.unreadable);
}

}  // namespace gpuguard::agent
