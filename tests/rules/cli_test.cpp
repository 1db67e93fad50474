// The `gpuguard rules` and `gpuguard scan` commands, run as a user would.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuguard::testing::run_command;
using gpuguard::testing::TempDir;

const std::string kBinary = GPUGUARD_BINARY;
const std::string kFixtures = GPUGUARD_RULES_FIXTURES;

TEST(RulesCli, check_accepts_a_valid_file) {
    const auto result = run_command({kBinary, "rules", "check", kFixtures + "/example.yaml"});
    EXPECT_EQ(result.exit_code, 0) << result.stderr_text;
    EXPECT_NE(result.stdout_text.find(kFixtures + "/example.yaml: OK"), std::string::npos);
    EXPECT_TRUE(result.stderr_text.empty()) << result.stderr_text;
}

TEST(RulesCli, check_prints_one_error_per_line_and_exits_1) {
    const auto result = run_command({kBinary, "rules", "check", kFixtures + "/broken.yaml"});
    EXPECT_EQ(result.exit_code, 1);
    size_t lines = 0;
    for (size_t at = 0; (at = result.stderr_text.find('\n', at)) != std::string::npos; ++at) {
        ++lines;
    }
    EXPECT_EQ(lines, 11u) << result.stderr_text;
    EXPECT_NE(result.stderr_text.find(kFixtures + "/broken.yaml:17:19: rules[4] (wrong-types)."
                                                  "process_name: 'miner*, xmrig' holds a comma: "
                                                  "write several names as a list, [a, b]\n"),
              std::string::npos)
        << result.stderr_text;
}

// Correlation rule files (rules.correlation_files) checked before they are
// deployed: each entry named with what it does, or every problem with its
// file and line and exit 1.
TEST(RulesCli, check_correlation_names_each_entry_or_every_problem) {
    TempDir dir;
    const std::string site = (dir / "site.yaml").string();
    const std::string more = (dir / "more.yaml").string();
    std::ofstream(site) << "rules:\n  - id: GG-CORR-0013\n    override:\n"
                           "      scope: {not_pod_namespaces: [sd-queue]}\n"
                           "  - id: SITE-0001\n    name: site\n    severity: notice\n"
                           "    when: {gpu_held: true}\n";
    std::ofstream(more)
        << "rules:\n  - id: GG-CORR-0031\n    override: {enabled: false}\n"
           "  - id: GG-CORR-0001\n    name: copied\n    severity: notice\n    action: alert\n"
           "    when: {gpu_held: true}\n";
    const auto result = run_command({kBinary, "rules", "check", "--correlation", site, more});
    EXPECT_EQ(result.exit_code, 0) << result.stderr_text;
    EXPECT_NE(result.stdout_text.find(site + ": OK\n  GG-CORR-0013: override (" + site +
                                      ":2)\n  SITE-0001: added (" + site + ":5)\n" + more +
                                      ": OK\n  GG-CORR-0031: override (" + more +
                                      ":2)\n  GG-CORR-0001: replaces the rule (" + more + ":4)\n"),
              std::string::npos)
        << result.stdout_text;
    EXPECT_NE(result.stdout_text.find("correlation rules ("), std::string::npos);
    // What the files relax, for whoever reviews them: the exemption added,
    // the rule turned off, the copied rule's lowered severity.
    const auto widens = result.stdout_text.find("widens the built-in rules:\n");
    ASSERT_NE(widens, std::string::npos) << result.stdout_text;
    const std::string relaxed = result.stdout_text.substr(widens);
    for (const char* expected :
         {"\n  GG-CORR-0013 scope.not_pod_namespaces + sd-queue\n", "\n  GG-CORR-0031 disabled",
          "\n  GG-CORR-0001 action from_signatures -> alert"}) {
        EXPECT_NE(relaxed.find(expected), std::string::npos) << expected << "\n" << relaxed;
    }

    std::ofstream(more) << "rules:\n  - id: GG-CORR-0113\n    override: {enabled: false}\n";
    const auto bad = run_command({kBinary, "rules", "check", "--correlation", site, more});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_EQ(bad.stderr_text, more + ":2: GG-CORR-0113.override: no rule GG-CORR-0113 to " +
                                   "override (none built in, none in an earlier file)\n");
    const auto miner_rules = run_command({kBinary, "rules", "check", site});
    EXPECT_EQ(miner_rules.exit_code, 1) << "without --correlation a correlation file is refused";
}

// What the agent runs with these correlation files: each rule's severity,
// action, dry run, whether it is on, where it comes from (each override
// applied to it) and its scope.
TEST(RulesCli, list_correlation_shows_each_rule_its_overrides_and_scope) {
    TempDir dir;
    const std::string site = (dir / "site.yaml").string();
    std::ofstream(site) << "rules:\n  - id: GG-CORR-0013\n    override:\n"
                           "      scope: {not_pod_namespaces: [sd-queue], containers: container}\n"
                           "      dry_run: true\n      severity: error\n"
                           "  - id: GG-CORR-0031\n    override: {enabled: false}\n";
    const auto result = run_command({kBinary, "rules", "list", "--correlation", site});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const std::string& out = result.stdout_text;
    EXPECT_NE(out.find("# files: built-in correlation rules, " + site + "\n"), std::string::npos);
    const auto line_of = [&](const std::string& id) {
        const auto at = out.find("\n" + id + " ");
        return at == std::string::npos ? std::string()
                                       : out.substr(at + 1, out.find('\n', at + 1) - at - 1);
    };
    const std::string quiet = line_of("GG-CORR-0013");
    EXPECT_TRUE(
        quiet.starts_with("GG-CORR-0013   error     alert           yes yes builtin, "
                          "override " +
                          site + ":2"))
        << out;
    EXPECT_NE(out.find(quiet + "\n    scope: not_pod_namespaces [sd-queue], containers "
                               "container\n"),
              std::string::npos)
        << out;
    EXPECT_NE(line_of("GG-CORR-0031").find(" no  builtin, override " + site + ":7"),
              std::string::npos)
        << out;
    EXPECT_NE(line_of("GG-CORR-0001").find(" yes builtin "), std::string::npos) << out;

    const auto without_flag = run_command({kBinary, "rules", "list", site});
    EXPECT_EQ(without_flag.exit_code, 2);
    EXPECT_NE(without_flag.stderr_text.find("add --correlation"), std::string::npos);
}

TEST(RulesCli, list_prints_the_effective_set_with_overrides) {
    TempDir dir;
    std::ofstream(dir / "miner-rules.yaml")
        << "signatures:\n  disable: [GG-PORT-0001]\n  override:\n    - id: GG-TREX-0001\n"
           "      action: kill\n";
    const auto result =
        run_command({kBinary, "rules", "list", "--file", (dir / "miner-rules.yaml").string(),
                     "--dir", (dir / "rules.d").string()});
    EXPECT_EQ(result.exit_code, 0) << result.stderr_text;
    EXPECT_NE(result.stdout_text.find("# disabled: GG-PORT-0001"), std::string::npos);
    EXPECT_EQ(result.stdout_text.find("\nGG-PORT-0001 "), std::string::npos);
    EXPECT_NE(result.stdout_text.find("GG-TREX-0001               critical  0.85 kill     "),
              std::string::npos)
        << result.stdout_text;
}

// GPU Kill's short form: `rules check` says which id the rule got, `rules
// list` shows it with its action.
TEST(RulesCli, a_rule_without_id_is_shown_with_its_derived_id) {
    TempDir dir;
    const auto file = dir / "miner-rules.yaml";
    std::ofstream(file) << "process_name: \"miner*\"\nhash_rate_threshold: 100MH/s\n"
                           "default_action: kill\n";
    const auto check = run_command({kBinary, "rules", "check", file.string()});
    EXPECT_EQ(check.exit_code, 0) << check.stderr_text;
    EXPECT_NE(
        check.stdout_text.find(file.string() + ":1: rule without an id: local-miner-rules-703991ac "
                                               "(process_name miner*, action kill)\n"),
        std::string::npos)
        << check.stdout_text;
    const auto list = run_command(
        {kBinary, "rules", "list", "--file", file.string(), "--dir", (dir / "rules.d").string()});
    EXPECT_EQ(list.exit_code, 0) << list.stderr_text;
    EXPECT_NE(list.stdout_text.find("\nlocal-miner-rules-703991ac critical  0.80 kill     "),
              std::string::npos)
        << list.stdout_text;
}

TEST(ScanCli, a_miner_config_file_matches_and_exits_1) {
    TempDir dir;
    std::ofstream(dir / "config.json")
        << "{\"donate-level\": 1, \"cpu\": {\"enabled\": true},\n \"pools\": [{\"url\": "
           "\"stratum+tcp://pool.supportxmr.com:3333\", \"user\": \"4Ab\"}]}\n";
    const auto result = run_command(
        {kBinary, "scan", (dir / "config.json").string(), "--file", (dir / "none.yaml").string()});
    EXPECT_EQ(result.exit_code, 1) << result.stderr_text;
    for (const char* id : {"GG-XMRIG-0005", "GG-XMRIG-0012", "GG-STRATUM-0019"}) {
        EXPECT_NE(result.stdout_text.find(id), std::string::npos) << id << "\n"
                                                                  << result.stdout_text;
    }
}

// Not this test process: it links the pack, whose YARA test vectors hit.
TEST(ScanCli, a_benign_process_is_clean_and_exits_0) {
    TempDir dir;
    gpuguard::testing::Subprocess sleeper({"/bin/sleep", "30"});
    const auto result = run_command(
        {kBinary, "scan", std::to_string(sleeper.pid()), "--file", (dir / "none.yaml").string()});
    EXPECT_EQ(result.exit_code, 0) << result.stdout_text << result.stderr_text;
    EXPECT_NE(result.stdout_text.find("no signature matched"), std::string::npos);
}

// The pack is embedded masked: the agent does not carry clear miner strings.
// Scanned as a copy at a fixed non-temporary path with a cap above its size
// (debug builds are large), so neither the build directory's location (a
// clone under /tmp matches the temp-directory rule) nor the cap decides.
TEST(ScanCli, the_agent_binary_does_not_match_its_own_rules) {
    TempDir dir;
    const auto copy = std::filesystem::path("/var/lib/gpuguard-test-scan") /
                      ("gpuguard-" + std::to_string(getpid()));
    std::filesystem::create_directories(copy.parent_path());
    std::filesystem::copy_file(kBinary, copy, std::filesystem::copy_options::overwrite_existing);
    const auto result = run_command({kBinary, "scan", copy.string(), "--max-size-mb", "1024",
                                     "--file", (dir / "none.yaml").string()});
    std::error_code ec;
    std::filesystem::remove_all(copy.parent_path(), ec);
    EXPECT_EQ(result.stdout_text.find("not scanned"), std::string::npos) << result.stdout_text;
    EXPECT_EQ(result.exit_code, 0) << result.stdout_text << result.stderr_text;
}

TEST(ScanCli, a_missing_target_is_an_error) {
    const auto result = run_command({kBinary, "scan", "/nonexistent/file"});
    EXPECT_EQ(result.exit_code, 2);
}

}  // namespace
