// The correlator tests' fixture: the built-in pack and rules, a process
// table that reads no host, and feed() applying an event to both.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpuguard/detect/correlator.h"
#include "gpuguard/rules/correlation.h"

namespace gpuguard::agent::correlator_testing {

constexpr uint64_t kSecond = 1'000'000'000;

inline std::shared_ptr<const signatures::Matcher> pack() {
    static auto compiled = [] {
        auto builtin = rules::compile_builtin_pack();
        EXPECT_TRUE(builtin) << builtin.error().message;
        return *builtin;
    }();
    return compiled;
}

inline std::shared_ptr<const rules::RuleSet> rule_set(const std::string& user_yaml = "") {
    std::vector<rules::RuleFile> files;
    if (!user_yaml.empty()) files.push_back({"test-rules.yaml", user_yaml});
    auto built = rules::RuleSet::build(pack(), files);
    EXPECT_TRUE(built) << built.error().message;
    return std::make_shared<const rules::RuleSet>(std::move(*built));
}

inline std::vector<rules::CorrelationRule> builtin_rules() {
    auto parsed = rules::builtin_correlation_rules();
    EXPECT_TRUE(parsed) << parsed.error().message;
    return *parsed;
}

class CorrelatorTest : public ::testing::Test {
  protected:
    void make(std::shared_ptr<const rules::RuleSet> set = rule_set(),
              std::vector<rules::CorrelationRule> rules = builtin_rules(),
              CorrelatorOptions correlator_options = {}) {
        ProcessTableOptions options;
        options.read_host = false;
        table_ = std::make_unique<ProcessTable>(options, [](uint32_t, uint32_t) { return true; });
        auto created =
            Correlator::create(std::move(rules), std::move(set), *table_, correlator_options);
        ASSERT_TRUE(created) << created.error().message;
        correlator_ = std::move(*created);
    }

    std::vector<Detection> feed(uint64_t ts, uint32_t pid, const std::string& comm, EventData data,
                                uint32_t uid = 1000) {
        Event event;
        event.ts_ns = ts;
        event.task = TaskInfo{pid, pid, 1, uid, uid, 1, comm};
        event.data = std::move(data);
        table_->apply(event);
        std::vector<Detection> out;
        correlator_->observe(event, out);
        return out;
    }

    // exec + GPU open; returns what the open raised.
    std::vector<Detection> start_miner(uint64_t ts, uint32_t pid, const std::string& comm = "xmrig",
                                       const std::string& exe = "/opt/xmrig/xmrig",
                                       uint32_t uid = 1000) {
        feed(ts, pid, comm,
             Exec{exe,
                  {comm, "-o", "stratum+tcp://pool.example.org:3333", "--cuda"},
                  false,
                  false,
                  pid},
             uid);
        return feed(ts + 1, pid, comm,
                    GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"}, uid);
    }

    static std::vector<std::string> rule_ids(const std::vector<Detection>& detections) {
        std::vector<std::string> ids;
        for (const auto& detection : detections) ids.push_back(detection.rule_id);
        return ids;
    }

    std::unique_ptr<ProcessTable> table_;
    std::unique_ptr<Correlator> correlator_;
};

}  // namespace gpuguard::agent::correlator_testing
