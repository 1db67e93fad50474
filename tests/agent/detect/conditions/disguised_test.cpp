// disguised (agent/detect/conditions/disguised.cpp): the process's name
// (comm) is not its executable's and only the executable is a known one — a
// process signature matched the exe, none the name (disguise_ids). With a
// signature condition in the rule only the hits it chose count; the
// disguising hits replace the rule's hits.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class DisguisedTest : public ConditionTest {
  protected:
    static constexpr uint32_t kPid = 200;
    static constexpr const char* kExe = "/tmp/.cache/xmrig";

    // The miner at kExe runs under the name python3.
    void exec_as_python() {
        apply(kSecond, kPid, "python3", Exec{kExe, {"python3", "train.py"}, false, false, kPid});
    }
    void hit(rules::EvidenceField field, std::string id, std::string detail) {
        evidence(kPid).hits.push_back(
            Hit{field, std::move(id), 0.9, "kill", kSecond, std::move(detail), nullptr});
    }
    // As the correlator judges a rule: its conditions in order over one
    // RuleInputs, the signature condition choosing in_.hits first.
    bool signature_then_disguised(const rules::CorrelationRule& rule, uint64_t ts_ns) {
        conditions_ = conditions_of(rule);
        const Condition* signature = find("signature");
        const Condition* disguised = find("disguised");
        EXPECT_NE(signature, nullptr);
        EXPECT_NE(disguised, nullptr);
        if (!signature || !disguised) return false;
        in_ = RuleInputs{};
        if (!rule_set_) rule_set_ = rule_set_of();
        const ConditionContext context{rule,  0,          kPid,  *table_.find(kPid), book_.of(kPid),
                                       book_, *rule_set_, ts_ns, realtime_offset_ns_};
        EXPECT_TRUE(signature->holds(context, in_)) << "the signature condition chose no hit";
        return disguised->holds(context, in_);
    }
    const Hit* hit_at(size_t index) { return &evidence(kPid).hits.at(index); }
};

TEST_F(DisguisedTest, an_exe_only_a_process_signature_knows_under_another_name_holds) {
    exec_as_python();
    evidence(kPid).disguise_ids = {"GG-PROC-0001"};
    hit(rules::EvidenceField::kProcess, "GG-PROC-0001", kExe);
    ASSERT_TRUE(holds(rule_when("{disguised: true}"), "disguised", kPid, 5 * kSecond));
    EXPECT_EQ(in_.hits, std::vector<const Hit*>{hit_at(0)});
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 5 * kSecond);
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "exec");
    EXPECT_EQ(in_.extra[0].field, "process");
    EXPECT_EQ(in_.extra[0].detail, "comm 'python3' hides executable /tmp/.cache/xmrig");
}

TEST_F(DisguisedTest, a_hit_on_the_name_or_outside_the_disguise_ids_or_fields_does_not_hold) {
    exec_as_python();
    evidence(kPid).disguise_ids = {"GG-PROC-0001", "GG-CMD-0001"};
    hit(rules::EvidenceField::kProcess, "GG-PROC-0001", "python3");  // matched the name
    hit(rules::EvidenceField::kProcess, "GG-PROC-0002", kExe);       // a signature on both
    hit(rules::EvidenceField::kCmdline, "GG-CMD-0001", kExe);        // not a process signature
    EXPECT_FALSE(holds(rule_when("{disguised: true}"), "disguised", kPid, 5 * kSecond));
    EXPECT_TRUE(in_.hits.empty());
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(DisguisedTest, with_a_signature_condition_only_the_hits_it_chose_count_and_replace_them) {
    exec_as_python();
    evidence(kPid).disguise_ids = {"GG-PROC-0001", "GG-PROC-0002"};
    hit(rules::EvidenceField::kProcess, "GG-PROC-0001", kExe);
    hit(rules::EvidenceField::kProcess, "GG-PROC-0002", kExe);  // the signature excludes it
    hit(rules::EvidenceField::kCmdline, "GG-CMD-0001", "python3 train.py");

    const auto rule = rule_when(
        "{signature: {fields: [process, cmdline], exclude: ['GG-PROC-0002']}, disguised: true}");
    ASSERT_TRUE(signature_then_disguised(rule, 5 * kSecond));
    EXPECT_EQ(in_.hits, std::vector<const Hit*>{hit_at(0)});  // the cmdline hit is gone
    EXPECT_EQ(details(),
              std::vector<std::string>{"comm 'python3' hides executable /tmp/.cache/xmrig"});

    // The signature chose only the cmdline hit: the process's disguising
    // hits are not the rule's, and the rule's hits are left as they were.
    const auto excluding = rule_when(
        "{signature: {fields: [process, cmdline], exclude: ['GG-PROC-*']}, disguised: true}");
    EXPECT_FALSE(signature_then_disguised(excluding, 5 * kSecond));
    EXPECT_EQ(in_.hits, std::vector<const Hit*>{hit_at(2)});
    EXPECT_TRUE(in_.extra.empty());

    // Without a signature condition every disguising hit of the process counts.
    ASSERT_TRUE(holds(rule_when("{disguised: true}"), "disguised", kPid, 5 * kSecond));
    EXPECT_EQ(in_.hits, (std::vector<const Hit*>{hit_at(0), hit_at(1)}));
}

TEST_F(DisguisedTest, does_not_depend_on_time) {
    exec_as_python();
    EXPECT_FALSE(holds(rule_when("{disguised: true}"), "disguised", kPid, kSecond));  // no hit
    EXPECT_FALSE(find("disguised")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
