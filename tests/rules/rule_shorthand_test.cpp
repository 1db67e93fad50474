// miner-rules.yaml as people write it (docs/rules.md, "Short forms"): a
// single pattern where a list is taken, rules without an id (derived, stable
// ids), the top-level `process_name:` of GPU Kill's files; and the precise
// errors that what is really wrong still gets.
#include <sstream>

#include <gtest/gtest.h>

#include "gpuguard/rules/rules.h"
#include "tests/rules/builtin_pack.h"

namespace gpuguard::rules {
namespace {

// The user rules of a set built from `files` (built-in signatures left out).
std::vector<EffectiveSignature> user_rules(const RuleSet& set) {
    std::vector<EffectiveSignature> out;
    for (const auto& entry : set.effective()) {
        if (entry.origin != "builtin") out.push_back(entry);
    }
    return out;
}

std::vector<std::string> error_lines(const std::vector<RuleFile>& files) {
    auto set = RuleSet::build(builtin(), files);
    EXPECT_FALSE(set.ok());
    std::vector<std::string> lines;
    if (set.ok()) return lines;
    std::stringstream stream(set.error().message);
    for (std::string line; std::getline(stream, line);) lines.push_back(line);
    return lines;
}

// GPU Kill's documentation, as admins copy it, plus the action that stops.
constexpr const char* kGpuKillSnippet =
    "process_name: \"miner*\"\nhash_rate_threshold: 100MH/s\ndefault_action: kill\n";

TEST(RuleShorthand, gpu_kill_snippet_is_one_rule_on_the_process_name) {
    ASSERT_NE(builtin(), nullptr);
    auto set = RuleSet::build(builtin(), {{"/etc/gpuguard/miner-rules.yaml", kGpuKillSnippet}});
    ASSERT_TRUE(set.ok()) << set.error().message;
    EXPECT_DOUBLE_EQ(*set->hash_rate_threshold(), 100e6);
    const auto rules = user_rules(*set);
    ASSERT_EQ(rules.size(), 1u);
    const auto& rule = rules[0];
    // Pinned: an id that changed between versions would break what SIEMs key on.
    EXPECT_EQ(rule.signature.id, "local-miner-rules-703991ac");
    EXPECT_TRUE(rule.id_derived);
    EXPECT_EQ(rule.signature.name, "process_name miner*");
    EXPECT_EQ(rule.action, Action::kKill);
    EXPECT_EQ(rule.origin, "/etc/gpuguard/miner-rules.yaml:1");
    EXPECT_EQ(rule.signature.severity, Severity::kCritical);

    auto scanner = set->scanner();
    ASSERT_TRUE(scanner.ok());
    EXPECT_TRUE(has(scanner->match_process("miner-x", "/opt/x/miner-x"), rule.signature.id));
    EXPECT_TRUE(has(scanner->match_process("MINERD", "/usr/bin/MINERD"), rule.signature.id));
    EXPECT_FALSE(has(scanner->match_process("trainer", "/opt/x/trainer"), rule.signature.id));
    EXPECT_FALSE(has(scanner->match_process("xminer", "/opt/x/xminer"), rule.signature.id));
}

TEST(RuleShorthand, derived_ids_are_stable_and_follow_the_file_stem_and_patterns) {
    auto id_of = [](const std::string& file, const std::string& text) -> std::string {
        auto set = RuleSet::build(builtin(), {{file, text}});
        EXPECT_TRUE(set.ok()) << set.error().message;
        if (!set.ok() || user_rules(*set).size() != 1) return "";
        return user_rules(*set)[0].signature.id;
    };
    const std::string first = id_of("/etc/gpuguard/miner-rules.yaml", kGpuKillSnippet);
    // Same stem and patterns: same id, wherever the file is and whatever else it sets.
    EXPECT_EQ(id_of("miner-rules.yaml", "process_name: [\"miner*\"]\n"), first);
    EXPECT_EQ(id_of("/srv/other/miner-rules.yaml", "rules:\n  - process_name: miner*\n"), first);
    // Another stem, other patterns, another kind: another id.
    EXPECT_EQ(id_of("/etc/gpuguard/rules.d/50-gpu kill.yaml", kGpuKillSnippet).substr(0, 18),
              "local-50-gpu-kill-");
    EXPECT_NE(id_of("miner-rules.yaml", "process_name: \"miner?\"\n"), first);
    EXPECT_NE(id_of("miner-rules.yaml", "rules:\n  - exe_path: miner*\n"), first);
    EXPECT_NE(id_of("miner-rules.yaml", "process_name: {glob: \"miner*\", caseless: false}\n"),
              first);
}

TEST(RuleShorthand, a_top_level_list_and_a_rule_without_id_take_the_default_action) {
    auto set = RuleSet::build(builtin(), {{"a.yaml",
                                           "process_name: [\"miner*\", xmr-*]\n"
                                           "rules:\n"
                                           "  - cmdline: '--algo\\s+kawpow'\n"
                                           "    severity: error\n"
                                           "  - name: Our pool\n"
                                           "    pool_domains: pool.badcorp.example\n"
                                           "    action: block_ip\n"},
                                          {"b.yaml", "default_action: deny_gpu\n"}});
    ASSERT_TRUE(set.ok()) << set.error().message;
    const auto rules = user_rules(*set);
    ASSERT_EQ(rules.size(), 3u);
    EXPECT_EQ(rules[0].signature.name, "process_name miner*; process_name xmr-*");
    EXPECT_EQ(rules[0].action, Action::kDenyGpu);  // the later file's default
    EXPECT_EQ(rules[1].signature.name, "cmdline --algo\\s+kawpow");
    EXPECT_EQ(rules[1].signature.severity, Severity::kError);
    EXPECT_EQ(rules[1].action, Action::kDenyGpu);
    EXPECT_EQ(rules[1].origin, "a.yaml:3");
    EXPECT_EQ(rules[2].signature.name, "Our pool");  // a name given stays
    EXPECT_EQ(rules[2].action, Action::kBlockIp);
    for (const auto& rule : rules) {
        EXPECT_TRUE(rule.signature.id.starts_with("local-a-")) << rule.signature.id;
        EXPECT_EQ(rule.signature.id.size(), std::string("local-a-").size() + 8);
        EXPECT_TRUE(rule.id_derived);
    }
    auto scanner = set->scanner();
    ASSERT_TRUE(scanner.ok());
    EXPECT_TRUE(has(scanner->match_process("xmr-stak", "/x/xmr-stak"), rules[0].signature.id));
    EXPECT_TRUE(
        has(scanner->match(Field::kDomain, "eu.pool.badcorp.example"), rules[2].signature.id));

    // Without a default_action anywhere the shorthand alerts, as every rule does.
    auto alerting = RuleSet::build(builtin(), {{"c.yaml", "process_name: miner*\n"}});
    ASSERT_TRUE(alerting.ok()) << alerting.error().message;
    EXPECT_EQ(user_rules(*alerting)[0].action, Action::kAlert);
}

TEST(RuleShorthand, one_pattern_is_taken_wherever_a_list_is) {
    const std::string single =
        "rules:\n"
        "  - id: single\n"
        "    process_name: gg-miner*\n"
        "    exe_path: '^/dev/shm/'\n"
        "    cmdline: {literal: \"--coin=KAS\", caseless: true}\n"
        "    config: '\"donate-level\"\\s*:'\n"
        "    pool_domains: pool.badcorp.example\n"
        "    pool_ports: 14650\n"
        "    payload: '\"method\"\\s*:\\s*\"x_login\"'\n"
        "    tests: {match: [gg-miner-2, \"14650\", \"a --coin=kas\"], no_match: [\"443\"]}\n";
    auto set = RuleSet::build(builtin(), {{"s.yaml", single}});
    ASSERT_TRUE(set.ok()) << set.error().message;
    const auto* rule = set->find("single");
    ASSERT_NE(rule, nullptr);
    EXPECT_EQ(rule->signature.patterns.size(), 6u);
    EXPECT_EQ(rule->signature.ports, std::vector<uint16_t>{14650});
    EXPECT_FALSE(rule->id_derived);
    auto scanner = set->scanner();
    ASSERT_TRUE(scanner.ok());
    EXPECT_TRUE(has(scanner->match_process("bash", "/dev/shm/x"), "single"));
    EXPECT_TRUE(has(scanner->match(Field::kConfig, "{\"donate-level\": 1}"), "single"));
    EXPECT_TRUE(has(scanner->match(Field::kPayload, "{\"method\":\"x_login\"}"), "single"));
    EXPECT_TRUE(has(scanner->match(Field::kDomain, "pool.badcorp.example"), "single"));
}

TEST(RuleShorthand, what_is_really_wrong_still_names_file_line_and_column) {
    const std::vector<std::string> expected = {
        "e.yaml:1:16: process_name[0]: must be a string or a mapping",
        "e.yaml:4:19: rules[0] (a).process_name: needs exactly one of regex, literal, glob",
        "e.yaml:4:20: rules[0] (a).process_name: unknown key 'name' (known: regex, literal, "
        "glob, caseless, anchor)",
        "e.yaml:5:17: rules[0] (a).pool_ports: '70000' is not a port (1-65535)",
        "e.yaml:6:14: rules[0] (a).cmdline: bad regex '(kawpow': Missing close parenthesis for "
        "group started at index 0.",
        "e.yaml:7:17: rules[1].pool_ports: must be a list",
        "e.yaml:8:5: rules[2]: matches nothing (give process_name, exe_path, cmdline, config, "
        "pool_domains, pool_ports or payload)",
        "e.yaml:9:19: rules[3].pool_domains: 'stratum+tcp://pool.example' is not a domain suffix "
        "(write pool.example, no scheme, port or *)",
        "e.yaml:10:19: rules[4].process_name: 'miner*, xmrig' holds a comma: write several names "
        "as a list, [a, b]",
        "e.yaml:11:5: rules[5].process_name: is empty (give a pattern or a list of patterns)",
        "e.yaml:12:16: rules[6].exe_path[0]: empty pattern",
    };
    EXPECT_EQ(error_lines({{"e.yaml",
                            "process_name: [[\"miner*\"]]\n"
                            "rules:\n"
                            "  - id: a\n"
                            "    process_name: {name: miner}\n"
                            "    pool_ports: 70000\n"
                            "    cmdline: '(kawpow'\n"
                            "  - pool_ports: {port: 1}\n"
                            "  - name: nothing\n"
                            "  - pool_domains: stratum+tcp://pool.example\n"
                            "  - process_name: \"miner*, xmrig\"\n"
                            "  - process_name:\n"
                            "  - exe_path: [\"\"]\n"}}),
              expected);
}

TEST(RuleShorthand, an_empty_top_level_process_name_is_an_error) {
    EXPECT_EQ(error_lines({{"n.yaml", "default_action: kill\nprocess_name: []\n"}}),
              std::vector<std::string>{"n.yaml:2:15: process_name: an empty list matches nothing"});
    EXPECT_EQ(error_lines({{"n.yaml", "process_name:\ndefault_action: kill\n"}}),
              std::vector<std::string>{
                  "n.yaml:1:1: process_name: is empty (give a pattern or a list of patterns)"});
}

TEST(RuleShorthand, two_rules_without_id_and_the_same_patterns_are_one_too_many) {
    EXPECT_EQ(
        error_lines({{"d.yaml",
                      "process_name: miner*\n"
                      "rules:\n"
                      "  - process_name: [miner*]\n"
                      "    action: kill\n"}}),
        std::vector<std::string>{"d.yaml:3:5: same patterns as the rule at d.yaml:1:15 (derived id "
                                 "'local-d-703991ac'): remove one, or give each an id"});
}

}  // namespace
}  // namespace gpuguard::rules
