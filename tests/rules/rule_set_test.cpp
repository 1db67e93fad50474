// Loading miner-rules.yaml: the documented example, every error with its
// exact file:line:col, merging of files, allowlists and hash-rate units.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "gpuguard/rules/rules.h"
#include "tests/rules/builtin_pack.h"

namespace gpuguard::rules {
namespace {

RuleFile fixture(const std::string& name) {
    const std::string path = std::string(GPUGUARD_RULES_FIXTURES) + "/" + name;
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return {name, text.str()};
}

ProcessIdentity process(std::string user, int64_t uid, std::string exe, std::string sha256 = "",
                        std::string container_id = "", std::string container_name = "") {
    ProcessIdentity identity;
    identity.user = std::move(user);
    identity.uid = uid;
    identity.exe = std::move(exe);
    identity.sha256 = std::move(sha256);
    identity.container_id = std::move(container_id);
    identity.container_name = std::move(container_name);
    return identity;
}

TEST(RuleSet, builtin_pack_alone_is_a_valid_rule_set) {
    ASSERT_NE(builtin(), nullptr);
    auto set = RuleSet::build(builtin(), {});
    ASSERT_TRUE(set.ok()) << set.error().message;
    EXPECT_GE(set->effective().size(), 120u);
    EXPECT_EQ(set->find("GG-XMRIG-0001")->action, Action::kAlert);
    EXPECT_FALSE(set->hash_rate_threshold().has_value());
}

TEST(RuleSet, the_documented_example_loads_and_applies) {
    ASSERT_NE(builtin(), nullptr);
    auto set = RuleSet::build(builtin(), {fixture("example.yaml")});
    ASSERT_TRUE(set.ok()) << set.error().message;
    EXPECT_DOUBLE_EQ(*set->hash_rate_threshold(), 250e6);

    // Overrides and disabling.
    EXPECT_EQ(set->find("GG-XMRIG-0001")->action, Action::kKillNow);
    EXPECT_EQ(set->find("GG-XMRIG-0001")->origin, "example.yaml:38");
    EXPECT_EQ(set->find("GG-GPUABUSE-0001")->signature.severity, Severity::kNotice);
    EXPECT_DOUBLE_EQ(set->find("GG-GPUABUSE-0001")->signature.confidence, 0.2);
    EXPECT_EQ(set->find("GG-PORT-0001"), nullptr);
    EXPECT_TRUE(set->disabled().contains("GG-PORT-0001"));

    // User rules match next to the built-in pack; the disabled one is gone.
    auto scanner = set->scanner();
    ASSERT_TRUE(scanner.ok());
    EXPECT_TRUE(
        has(scanner->match_process("gpu-sched", "/home/eve/gpu-sched"), "local-fake-scheduler"));
    EXPECT_FALSE(has(scanner->match_process("gpu-scheduler", "/usr/bin/gpu-scheduler"),
                     "local-fake-scheduler"));
    // The real scheduler matches too, and is allowlisted by path.
    EXPECT_TRUE(has(scanner->match_process("gpu-sched", "/opt/sched/bin/gpu-sched"),
                    "local-fake-scheduler"));
    EXPECT_TRUE(set->allowlisted(process("sched", 990, "/opt/sched/bin/gpu-sched")));
    EXPECT_FALSE(set->allowlisted(process("eve", 1010, "/home/eve/gpu-sched")));
    EXPECT_EQ(set->find("local-fake-scheduler")->action, Action::kKill);
    EXPECT_EQ(set->find("local-incident-42-pool")->action, Action::kBlockIp);
    EXPECT_EQ(set->find("local-incident-42-pool")->signature.severity, Severity::kAlert);
    EXPECT_TRUE(
        has(scanner->match(Field::kDomain, "pool.badcorp.example"), "local-incident-42-pool"));
    EXPECT_TRUE(has(scanner->match_port(14650), "local-incident-42-pool"));
    EXPECT_FALSE(has(scanner->match_port(3333), "GG-PORT-0001"));
    EXPECT_TRUE(has(scanner->match_port(10128), "GG-PORT-0002"));
    EXPECT_TRUE(
        has(scanner->match(Field::kCmdline, "xmrig -o stratum+tcp://p:3333"), "GG-STRATUM-0001"));
}

TEST(RuleSet, the_installed_default_file_is_valid) {
    std::ifstream in(std::string(GPUGUARD_RULES_DEFAULT));
    std::stringstream text;
    text << in.rdbuf();
    ASSERT_FALSE(text.str().empty());
    auto set = RuleSet::build(builtin(), {{"miner-rules.yaml", text.str()}});
    ASSERT_TRUE(set.ok()) << set.error().message;
    EXPECT_DOUBLE_EQ(*set->hash_rate_threshold(), 100e6);
}

TEST(RuleSet, every_problem_is_reported_with_file_line_and_column) {
    auto set = RuleSet::build(builtin(), {fixture("broken.yaml")});
    ASSERT_FALSE(set.ok());
    std::vector<std::string> lines;
    std::stringstream stream(set.error().message);
    for (std::string line; std::getline(stream, line);) lines.push_back(line);
    // One line per problem, in file order.
    const std::vector<std::string> expected = {
        "broken.yaml:2:22: hash_rate_threshold: '100 MHz': unknown unit 'MHz' (use H/s, kH/s, "
        "MH/s, GH/s or TH/s, e.g. 100MH/s)",
        "broken.yaml:6:15: rules[0] (bad-regex).cmdline[0]: bad regex '--algo\\s+(kawpow': "
        "Missing close parenthesis for group started at index 9.",
        "broken.yaml:9:9: duplicate id 'dup' (first defined at broken.yaml:7:9)",
        "broken.yaml:11:5: rules[2]: unknown key 'colour' (known: id, name, description, severity, "
        "confidence, mitre, action, process_name, exe_path, cmdline, config, pool_domains, "
        "pool_ports, payload, tests)",
        "broken.yaml:12:9: rules[3].id: 'GG-XMRIG-0001': ids starting with GG- are reserved for "
        "the built-in pack",
        "broken.yaml:12:9: duplicate id 'GG-XMRIG-0001': a built-in signature has it",
        "broken.yaml:13:24: rules[3] (GG-XMRIG-0001).pool_ports: '70000' is not a port (1-65535)",
        "broken.yaml:15:17: rules[4] (wrong-types).confidence: 'high' is not a number from 0 to 1",
        "broken.yaml:16:13: rules[4] (wrong-types).action: 'explode' is not one of alert, kill, "
        "kill_now, block_ip, deny_gpu",
        "broken.yaml:17:19: rules[4] (wrong-types).process_name: 'miner*, xmrig' holds a comma: "
        "write several names as a list, [a, b]",
        "broken.yaml:19:13: signatures.disable: unknown signature id 'GG-NOPE-0001'",
    };
    EXPECT_EQ(lines, expected);
}

TEST(RuleSet, yaml_syntax_errors_name_the_position) {
    auto set = RuleSet::build(builtin(), {{"s.yaml", "rules:\n  - id: [unclosed\n"}});
    ASSERT_FALSE(set.ok());
    EXPECT_TRUE(set.error().message.starts_with("s.yaml:3:1: YAML syntax error:"))
        << set.error().message;
}

TEST(RuleSet, failing_rule_test_vectors_are_errors) {
    const char* yaml = R"(rules:
  - id: vectors
    process_name: ["abc*"]
    tests:
      match: ["xyz"]
      no_match: ["abcd"]
)";
    auto set = RuleSet::build(builtin(), {{"v.yaml", yaml}});
    ASSERT_FALSE(set.ok());
    EXPECT_NE(set.error().message.find(
                  "v.yaml:5:15: vectors: test vector 'xyz' should match but does not"),
              std::string::npos)
        << set.error().message;
    EXPECT_NE(set.error().message.find(
                  "v.yaml:6:18: vectors: test vector 'abcd' should not match but does"),
              std::string::npos)
        << set.error().message;
}

TEST(RuleSet, later_files_add_rules_and_win_on_overrides_but_ids_stay_unique) {
    RuleFile first{"a.yaml",
                   "default_action: kill\nrules:\n  - id: one\n    process_name: [one]\n"
                   "signatures:\n  override:\n    - id: GG-TREX-0001\n      action: alert\n"};
    RuleFile second{"b.yaml",
                    "rules:\n  - id: two\n    process_name: [two]\n"
                    "signatures:\n  override:\n    - id: GG-TREX-0001\n      action: deny_gpu\n"};
    auto set = RuleSet::build(builtin(), {first, second});
    ASSERT_TRUE(set.ok()) << set.error().message;
    EXPECT_EQ(set->find("one")->action, Action::kKill);  // default_action from a.yaml
    EXPECT_EQ(set->find("two")->action, Action::kKill);
    EXPECT_EQ(set->find("GG-TREX-0001")->action, Action::kDenyGpu);
    EXPECT_EQ(set->find("GG-NBMINER-0001")->action, Action::kKill);

    RuleFile again{"c.yaml", "rules:\n  - id: one\n    process_name: [x]\n"};
    auto clash = RuleSet::build(builtin(), {first, again});
    ASSERT_FALSE(clash.ok());
    EXPECT_EQ(clash.error().message,
              "c.yaml:2:9: duplicate id 'one' (first defined at a.yaml:3:9)");
}

TEST(RuleSet, allowlist_by_user_exe_sha256_and_container) {
    auto set = RuleSet::build(builtin(), {fixture("example.yaml")});
    ASSERT_TRUE(set.ok()) << set.error().message;
    EXPECT_TRUE(set->allowlisted(process("render", -1, "")));
    EXPECT_TRUE(set->allowlisted(process("", 1007, "")));
    EXPECT_FALSE(set->allowlisted(process("bob", 1008, "/usr/bin/xmrig")));
    EXPECT_TRUE(set->allowlisted(process("", -1, "/opt/approved/blender-4/bin/blender")));
    EXPECT_FALSE(set->allowlisted(process("", -1, "/opt/approved/blender-4/bin/sub/x")));
    EXPECT_TRUE(set->allowlisted(
        process("", -1, "", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")));
    EXPECT_TRUE(set->allowlisted(process("", -1, "", "", "4f3c2a1b9e8d77aa")));
    EXPECT_FALSE(set->allowlisted(process("", -1, "", "", "4f3c2a1b0000")));
    EXPECT_TRUE(set->allowlisted(process("", -1, "", "", "", "benchmark-resnet")));
    EXPECT_FALSE(set->allowlisted(process("", -1, "", "", "", "training-resnet")));
}

TEST(RuleSet, allowlist_values_are_validated) {
    auto set = RuleSet::build(builtin(),
                              {{"al.yaml", "allowlist:\n  sha256: [ABC]\n  exe_paths: [bin/x]\n"}});
    ASSERT_FALSE(set.ok());
    EXPECT_EQ(set.error().message,
              "al.yaml:2:12: allowlist.sha256: 'ABC' is not 64 lowercase hex digits\n"
              "al.yaml:3:15: allowlist.exe_paths: 'bin/x' is not an absolute path");
}

TEST(HashRate, parses_every_unit) {
    EXPECT_DOUBLE_EQ(parse_hash_rate("900H/s").value(), 900);
    EXPECT_DOUBLE_EQ(parse_hash_rate("250kH/s").value(), 250e3);
    EXPECT_DOUBLE_EQ(parse_hash_rate("100MH/s").value(), 100e6);
    EXPECT_DOUBLE_EQ(parse_hash_rate("1.5 GH/s").value(), 1.5e9);
    EXPECT_DOUBLE_EQ(parse_hash_rate("2TH/s").value(), 2e12);
}

TEST(HashRate, rejects_bad_numbers_and_units) {
    for (const char* text :
         {"", "fast", "100", "100 MH", "100mh/s", "-5MH/s", "0H/s", "100 PH/s"}) {
        EXPECT_FALSE(parse_hash_rate(text).ok()) << text;
    }
}

TEST(Action, names_round_trip) {
    for (const char* name : {"alert", "kill", "kill_now", "block_ip", "deny_gpu"}) {
        ASSERT_TRUE(parse_action(name).has_value()) << name;
        EXPECT_STREQ(to_string(*parse_action(name)), name);
    }
    EXPECT_FALSE(parse_action("pause").has_value());
}

}  // namespace
}  // namespace gpuguard::rules
