// The rule language's conditions and the classes that judge them: every key
// rules/ reads under `when:` makes exactly one condition of that name, and
// the conditions a rule sets come out in the order their evidence is
// reported. Also the fixture's rule set (condition_fixture.h).
#include <map>

#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {

std::shared_ptr<const rules::RuleSet> rule_set_of(const std::string& user_yaml) {
    static const auto empty_pack = [] {
        auto compiled = signatures::Matcher::compile({});
        EXPECT_TRUE(compiled) << compiled.error().message;
        return std::make_shared<const signatures::Matcher>(std::move(*compiled));
    }();
    std::vector<rules::RuleFile> files;
    if (!user_yaml.empty()) files.push_back({"test-rules.yaml", user_yaml});
    auto built = rules::RuleSet::build(empty_pack, files);
    EXPECT_TRUE(built) << built.error().message;
    return std::make_shared<const rules::RuleSet>(std::move(*built));
}

namespace {

// A value each key accepts. A key added to rules::kConditionKeys without
// one here fails ConditionList.every_key_is_one_condition_of_its_name.
const std::map<std::string, std::string> kSampleValues = {
    {"gpu_held", "true"},
    {"signature", "{fields: [process]}"},
    {"exe_location", "[tmp]"},
    {"disguised", "true"},
    {"known_bad_executable", "true"},
    {"memory_growth", "{bytes: 1GiB, within: 5m}"},
    {"sustained_utilization", "{above_percent: 90, for: 10m}"},
    {"scope", "{users: [alice]}"},
    {"gpu_memory_above", "8GiB"},
    {"gpu_index_not_in", "[0]"},
    {"gpu_vendor_not_in", "[nvidia]"},
    {"time_window", "{from: '09:00', to: '17:00'}"},
    {"max_gpu_processes", "2"},
    {"gpu_outside_allocation", "outside"},
    {"gpu_xid", "2"},
    {"gpu_pipe_mix", "{for: 2m, tensor_above_percent: 10}"},
    {"hash_rate_above_threshold", "true"},
    {"quiet_io", "{for: 10m}"},
    {"sustained_cpu", "{above_cores: 1.5}"},
    {"gpu_unseen", "{for: 5s}"},
    {"unexplained_gpu_load", "{above_percent: 50, for: 3m}"},
    {"gpu_stack", "[runtime_only]"},
    {"unreadable", "[executable]"},
    {"opaque_peer", "true"},
    {"mining_flow", "true"},
    {"pool_answered", "true"},
    {"hidden_from_proc", "true"},
    {"module_load", "{while: [any]}"},
    {"file_changed", "[cron]"},
    {"library_injection", "true"},
    {"persistence_after_detection", "true"},
    {"agent_tamper", "[stop]"},
    {"trust_change", "{changes: [any]}"},
};

TEST(ConditionList, every_key_is_one_condition_of_its_name) {
    for (const char* key : rules::kConditionKeys) {
        SCOPED_TRACE(key);
        const auto sample = kSampleValues.find(key);
        ASSERT_NE(sample, kSampleValues.end()) << "no sample value for the new key " << key;
        // A companion: a scope alone is not a rule (it narrows the others).
        // A condition that judges a GPU takes none but time_window.
        const std::string_view name = key;
        const std::string companion = name == "hidden_from_proc"       ? "opaque_peer"
                                      : name == "unexplained_gpu_load" ? "time_window"
                                                                       : "hidden_from_proc";
        const std::string companion_value =
            companion == "time_window" ? "{from: '00:00', to: '24:00'}" : "true";
        const auto rule = rule_when(std::string("{") + key + ": " + sample->second + ", " +
                                    companion + ": " + companion_value + "}");
        const Conditions made = conditions_of(rule);
        size_t named = 0;
        for (const auto& condition : made) {
            if (condition->name() == key) ++named;
            // Every rule carries persistence_after_detection (its evidence
            // goes with any detection of a flagged process); nothing else.
            EXPECT_TRUE(condition->name() == key || condition->name() == companion ||
                        condition->name() == "persistence_after_detection")
                << "setting " << key << " also made " << condition->name();
        }
        EXPECT_EQ(named, 1u);
    }
}

TEST(ConditionList, a_rule_without_conditions_of_its_own_has_only_the_persistence_evidence) {
    const Conditions made = conditions_of(rules::CorrelationRule{});
    ASSERT_EQ(made.size(), 1u);
    EXPECT_EQ(made.front()->name(), "persistence_after_detection");
    EXPECT_FALSE(time_dependent(made));
}

TEST(ConditionList, evidence_order_is_the_list_order_not_the_yaml_order) {
    // time_window last whatever the file says; gpu_held first.
    const auto rule = rule_when(
        "{time_window: {from: '00:00', to: '24:00'}, exe_location: [tmp], gpu_held: true}");
    const Conditions made = conditions_of(rule);
    std::vector<std::string_view> names;
    for (const auto& condition : made) names.push_back(condition->name());
    EXPECT_EQ(names, (std::vector<std::string_view>{"gpu_held", "exe_location",
                                                    "persistence_after_detection", "time_window"}));
}

TEST(ConditionList, a_rule_depends_on_time_when_one_of_its_conditions_does) {
    EXPECT_FALSE(time_dependent(conditions_of(rule_when("{gpu_held: true, opaque_peer: true}"))));
    for (const char* key :
         {"memory_growth", "sustained_utilization", "quiet_io", "gpu_memory_above",
          "gpu_index_not_in", "gpu_vendor_not_in", "time_window"}) {
        SCOPED_TRACE(key);
        EXPECT_TRUE(time_dependent(conditions_of(rule_when(
            std::string("{") + key + ": " + kSampleValues.at(key) + ", opaque_peer: true}"))));
    }
}

// The facts a condition needs let the correlator pass a rule over without
// judging it: each is a fact without which the condition's holds() is false.
TEST(ConditionList, conditions_name_the_facts_they_cannot_hold_without) {
    const std::map<std::string, uint32_t> kNeeds = {
        {"gpu_held", kFactHoldsGpu},
        {"signature", kFactHits},
        {"agent_tamper", kFactTampers},
        {"trust_change", kFactTrustChanges},
        {"file_changed", kFactFileChanges},
        {"module_load", kFactModuleLoads},
        {"hidden_from_proc", kFactHidden},
        {"pool_answered", kFactProbes},
        {"gpu_outside_allocation", kFactHoldsGpu},
        {"gpu_xid", kFactGpuFaults},
        {"gpu_pipe_mix", kFactHoldsGpu},
    };
    for (const auto& [key, value] : kSampleValues) {
        SCOPED_TRACE(key);
        // A scope alone is not a rule: time_window keeps it company (it
        // needs no fact, and goes with a GPU's conditions too).
        const auto rule =
            rule_when("{" + key + ": " + value + ", time_window: {from: '00:00', to: '24:00'}}");
        for (const auto& condition : conditions_of(rule)) {
            if (condition->name() != key) continue;
            const auto need = kNeeds.find(key);
            EXPECT_EQ(condition->needs(), need == kNeeds.end() ? 0u : need->second);
        }
    }
    EXPECT_EQ(conditions_of(rule_when("{gpu_held: false}")).front()->needs(), kFactHoldsNoGpu);
}

class FactsTest : public ConditionTest {};

TEST_F(FactsTest, each_fact_is_read_from_the_evidence_it_names) {
    exec(700, "/usr/bin/python3");
    EXPECT_EQ(facts_of(*table_.find(700), evidence(700)), kFactHoldsNoGpu);
    open_gpu(700);
    ProcessEvidence& seen = evidence(700);
    EXPECT_EQ(facts_of(*table_.find(700), seen), kFactHoldsGpu);
    seen.hits.emplace_back();
    seen.tampers.emplace_back();
    seen.trust_changes.emplace_back();
    seen.files.emplace_back();
    seen.modules.emplace_back();
    seen.hidden_ns = kSecond;
    seen.probes.emplace_back();
    EXPECT_EQ(facts_of(*table_.find(700), seen), kFactHoldsGpu | kFactHits | kFactTampers |
                                                     kFactTrustChanges | kFactFileChanges |
                                                     kFactModuleLoads | kFactHidden | kFactProbes);
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
