// The condition tests' fixture: a process table that reads no host, an
// evidence book over it, rules parsed from a `when:` in YAML, and one
// condition of a rule judged alone (conditions/condition.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "conditions/condition.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"

namespace gpuguard::agent::condition_testing {

constexpr uint64_t kSecond = 1'000'000'000;

// One rule whose `when:` is `when_yaml` (a YAML mapping in flow or block
// style, indented by the caller as a block under "when:"), with `extra`
// rule keys (e.g. "window: 5m").
inline rules::CorrelationRule rule_when(const std::string& when_yaml,
                                        const std::string& extra = "") {
    const std::string yaml = "rules:\n  - id: TEST-0001\n    name: test\n    severity: warning\n" +
                             (extra.empty() ? "" : "    " + extra + "\n") +
                             "    when: " + when_yaml + "\n";
    auto parsed = rules::parse_correlation_rules(yaml, "test.yaml");
    EXPECT_TRUE(parsed) << (parsed ? "" : parsed.error().message) << "\n" << yaml;
    if (!parsed || parsed->empty()) return {};
    return parsed->front();
}

// A rule set over an empty signature pack, with `user_yaml` as its one
// miner-rules file (hash_rate_threshold, known_bad).
std::shared_ptr<const rules::RuleSet> rule_set_of(const std::string& user_yaml = "");

class ConditionTest : public ::testing::Test {
  protected:
    ConditionTest()
        // nvidia and nvidia-caps (MIG access nodes; its major is dynamic)
        : table_(table_options(),
                 [](uint32_t major, uint32_t) { return major == 195 || major == 236; }),
          book_(table_, EvidenceBookOptions{}) {}

    // A process in the table, by its exec.
    const ProcessInfo& exec(uint32_t pid, const std::string& exe,
                            std::vector<std::string> argv = {}, uint32_t uid = 1000,
                            uint64_t ts_ns = kSecond) {
        const std::string comm = exe.substr(exe.rfind('/') + 1).substr(0, 15);
        if (argv.empty()) argv.push_back(comm);
        apply(ts_ns, pid, comm, Exec{exe, std::move(argv), false, false, pid}, uid);
        return *table_.find(pid);
    }
    // The process opens GPU device 195:MINOR.
    void open_gpu(uint32_t pid, uint64_t ts_ns = 2 * kSecond, uint32_t minor = 0) {
        const ProcessInfo* info = table_.find(pid);
        apply(ts_ns, pid, info ? info->comm : "",
              GpuOpen{195, minor, 3, -100, 2, OpenSyscall::kOpenat, false,
                      "/dev/nvidia" + std::to_string(minor)},
              info ? info->uid : 1000);
        book_.set_held_gpu(pid, true);
        if (book_.of(pid).first_gpu_ns == 0) book_.of(pid).first_gpu_ns = ts_ns;
    }
    void apply(uint64_t ts_ns, uint32_t pid, const std::string& comm, EventData data,
               uint32_t uid = 1000) {
        Event event;
        event.ts_ns = ts_ns;
        event.task = TaskInfo{pid, pid, 1, uid, uid, 1, comm};
        event.data = std::move(data);
        table_.apply(event);
    }
    ProcessEvidence& evidence(uint32_t pid) { return book_.of(pid); }

    // The condition `name` of `rule`, judged alone for `pid` at `ts_ns`;
    // its evidence is left in in_.
    bool holds(const rules::CorrelationRule& rule, std::string_view name, uint32_t pid,
               uint64_t ts_ns, size_t rule_index = 0) {
        conditions_ = conditions_of(rule);
        const Condition* condition = find(name);
        EXPECT_NE(condition, nullptr) << "the rule has no condition " << name;
        if (!condition) return false;
        const ProcessInfo* info = table_.find(pid);
        EXPECT_NE(info, nullptr) << "no process " << pid;
        if (!info) return false;
        in_ = RuleInputs{};
        if (!rule_set_) rule_set_ = rule_set_of();
        const ConditionContext context{rule,       rule_index,    pid,
                                       *info,      book_.of(pid), book_,
                                       *rule_set_, ts_ns,         realtime_offset_ns_};
        // As the correlator does once all of a rule's conditions held.
        if (!condition->holds(context, in_)) return false;
        condition->held(context, in_);
        return true;
    }
    const Condition* find(std::string_view name) const {
        for (const auto& condition : conditions_) {
            if (condition->name() == name) return condition.get();
        }
        return nullptr;
    }
    // The detail of each evidence item the last holds() left.
    std::vector<std::string> details() const {
        std::vector<std::string> out;
        for (const Evidence& item : in_.extra) out.push_back(item.detail);
        return out;
    }

    static ProcessTableOptions table_options() {
        ProcessTableOptions options;
        options.read_host = false;
        return options;
    }

    ProcessTable table_;
    EvidenceBook book_;
    Conditions conditions_;
    RuleInputs in_;
    std::shared_ptr<const rules::RuleSet> rule_set_;
    int64_t realtime_offset_ns_ = 0;
};

}  // namespace gpuguard::agent::condition_testing
