// library_injection: true | [temporary, recently_written,
// writable_by_others, miner_signature] — the process's environment at its
// first GPU use (a process_env event) has an LD_PRELOAD library or
// LD_LIBRARY_PATH directory that nothing vouches for (judged as the event
// is recorded: correlator_libraries.cpp); with signs, one that also shows
// any of them. The signs asked for are the evidence's field, so a sign that
// shows later (a YARA verdict) is new evidence for the open detection.
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class LibraryInjection final : public Condition {
  public:
    explicit LibraryInjection(std::vector<rules::LibrarySign> signs) : signs_(std::move(signs)) {
        std::vector<std::string> asked;
        for (rules::LibrarySign sign : signs_) asked.emplace_back(rules::to_string(sign));
        field_ = asked.empty() ? "environment" : join(asked, ",");
    }
    std::string_view name() const override { return "library_injection"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessEvidence& evidence = context.evidence;
        if (!evidence.env) return false;
        std::vector<std::string> named;
        for (const InjectedLibrary& library : evidence.libraries) {
            const bool shows =
                signs_.empty() ||
                std::any_of(signs_.begin(), signs_.end(), [&](rules::LibrarySign sign) {
                    return std::find(library.signs.begin(), library.signs.end(), sign) !=
                           library.signs.end();
                });
            if (shows) named.push_back(library.detail);
        }
        if (named.empty()) return false;
        in.extra.push_back(
            Evidence{evidence.env_ns, "event", "process_env", "", field_, join(named, "; ")});
        return true;
    }

  private:
    std::vector<rules::LibrarySign> signs_;
    std::string field_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::library_injection(const rules::CorrelationRule& rule) {
    if (!rule.library_injection) return nullptr;
    return std::make_unique<LibraryInjection>(rule.library_signs);
}

}  // namespace gpuguard::agent
