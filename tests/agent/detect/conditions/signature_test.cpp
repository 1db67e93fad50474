// signature (agent/detect/conditions/signature.cpp): the process's signature
// hits a rule names, by field, id glob, exclusion and minimum confidence;
// the hits it names are the detection's signature evidence. Each hit's
// Verdict remembers, per rule index below 64, whether that rule's condition
// matched it; a supporting signal (or a rule past 64) judges afresh.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

using rules::EvidenceField;

class SignatureTest : public ConditionTest {
  protected:
    void SetUp() override { exec(kPid, "/usr/bin/worker"); }

    Hit& hit(EvidenceField field, std::string id, double confidence = 0.9,
             Verdict* verdict = nullptr) {
        evidence(kPid).hits.push_back(
            Hit{field, std::move(id), confidence, "alert", 2 * kSecond, "matched value", verdict});
        return evidence(kPid).hits.back();
    }
    // The ids of the hits the last holds() named.
    std::vector<std::string> hit_ids() const {
        std::vector<std::string> out;
        for (const Hit* named : in_.hits) out.push_back(named->id);
        return out;
    }

    static constexpr uint32_t kPid = 400;
    static constexpr uint64_t kBit3 = uint64_t{1} << 3;
};

TEST_F(SignatureTest, fields_id_globs_and_exclusions_pick_the_hits_named) {
    hit(EvidenceField::kProcess, "GG-PROC-0001");
    hit(EvidenceField::kCmdline, "GG-CMD-0002");
    hit(EvidenceField::kCmdline, "GG-CMD-0003");
    hit(EvidenceField::kDomain, "GG-PROC-0004");  // a process id, in another field
    const auto rule = rule_when(
        "{signature: {fields: [process, cmdline], ids: ['GG-PROC-*', 'GG-CMD-*'], "
        "exclude: [GG-CMD-0002]}}");
    ASSERT_TRUE(holds(rule, "signature", kPid, 5 * kSecond));
    EXPECT_EQ(hit_ids(), (std::vector<std::string>{"GG-PROC-0001", "GG-CMD-0003"}));
    ASSERT_EQ(in_.hits.size(), 2u);
    EXPECT_EQ(in_.hits[0], &evidence(kPid).hits[0]);  // the book's own hit, not a copy
    EXPECT_EQ(in_.hits[1], &evidence(kPid).hits[2]);
    EXPECT_TRUE(in_.extra.empty());

    // Any field and any id when the rule names none.
    ASSERT_TRUE(holds(rule_when("{signature: {}}"), "signature", kPid, 5 * kSecond));
    EXPECT_EQ(in_.hits.size(), 4u);
}

TEST_F(SignatureTest, the_nearest_look_alike_of_a_named_hit_does_not_hold) {
    hit(EvidenceField::kProcess, "GG-PROC-0001");
    hit(EvidenceField::kCmdline, "GG-CMD-0002");
    // The field beside, the id beside, the id excluded.
    EXPECT_FALSE(holds(rule_when("{signature: {fields: [config, domain, payload, port, yara]}}"),
                       "signature", kPid, 5 * kSecond));
    EXPECT_TRUE(in_.hits.empty());
    EXPECT_FALSE(holds(rule_when("{signature: {ids: ['GG-PROC-0001?', 'GG-CMD-0003']}}"),
                       "signature", kPid, 5 * kSecond));
    EXPECT_FALSE(
        holds(rule_when("{signature: {exclude: ['GG-*']}}"), "signature", kPid, 5 * kSecond));
    EXPECT_TRUE(in_.hits.empty());
}

TEST_F(SignatureTest, min_confidence_takes_a_hit_at_it_and_not_one_below) {
    const auto rule = rule_when("{signature: {min_confidence: 0.8}}");
    hit(EvidenceField::kProcess, "GG-PROC-0001", 0.79);
    EXPECT_FALSE(holds(rule, "signature", kPid, 5 * kSecond));
    EXPECT_TRUE(in_.hits.empty());
    hit(EvidenceField::kProcess, "GG-PROC-0002", 0.8);
    ASSERT_TRUE(holds(rule, "signature", kPid, 5 * kSecond));
    EXPECT_EQ(hit_ids(), std::vector<std::string>{"GG-PROC-0002"});
}

TEST_F(SignatureTest, a_rules_verdict_is_cached_in_its_bit_and_a_supporting_signal_leaves_it) {
    Verdict verdict;
    hit(EvidenceField::kProcess, "GG-PROC-0001", 0.9, &verdict);
    const auto matching = rule_when("{signature: {fields: [process]}}");
    const auto other = rule_when("{signature: {fields: [domain]}}");

    // A supporting signal judges the hit afresh and leaves the verdict alone.
    ASSERT_TRUE(holds(matching, "signature", kPid, 5 * kSecond, kSupportingSignal));
    EXPECT_EQ(verdict.judged, 0u);
    EXPECT_EQ(verdict.matches, 0u);

    ASSERT_TRUE(holds(matching, "signature", kPid, 5 * kSecond, 3));
    EXPECT_EQ(verdict.judged, kBit3);
    EXPECT_EQ(verdict.matches, kBit3);
    EXPECT_EQ(hit_ids(), std::vector<std::string>{"GG-PROC-0001"});

    EXPECT_FALSE(holds(other, "signature", kPid, 5 * kSecond, 5));
    EXPECT_EQ(verdict.judged, kBit3 | (uint64_t{1} << 5));
    EXPECT_EQ(verdict.matches, kBit3);  // judged, not a match

    // Rule 3's answer is read from its bit, not judged again.
    Verdict judged_no{kBit3, 0};
    evidence(kPid).hits.back().verdict = &judged_no;
    EXPECT_FALSE(holds(matching, "signature", kPid, 5 * kSecond, 3));
    EXPECT_EQ(judged_no.matches, 0u);
    EXPECT_FALSE(find("signature")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
