// Correlation rule files: the built-in set loads, every problem in a bad file
// is reported as file:line:col, and files replace or extend built-in rules.
#include <fstream>

#include <gtest/gtest.h>

#include "gpuguard/rules/correlation.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::rules {
namespace {

TEST(CorrelationRules, BuiltinSetLoads) {
    auto rules = builtin_correlation_rules();
    ASSERT_TRUE(rules) << rules.error().message;
    ASSERT_GE(rules->size(), 9u);
    for (const auto& rule : *rules) {
        EXPECT_TRUE(rule.id.starts_with("GG-CORR-")) << rule.id;
        EXPECT_FALSE(rule.name.empty()) << rule.id;
        EXPECT_FALSE(rule.description.empty()) << rule.id;
        EXPECT_FALSE(rule.mitre_id.empty()) << rule.id;
    }
    EXPECT_EQ((*rules)[0].action, "from_signatures");
    ASSERT_TRUE((*rules)[7].memory_growth);
    EXPECT_EQ((*rules)[7].memory_growth->bytes, 20'000'000'000ull);
    EXPECT_EQ((*rules)[7].memory_growth->within, std::chrono::seconds(300));
}

TEST(CorrelationRules, EveryProblemNamesFileLineAndColumn) {
    const char* yaml = R"(rules:
  - id: A-1
    name: one
    severity: loud
    window: soon
    when:
      gpu_held: maybe
      signature: {fields: [cmdline, smell]}
      exe_location: [tmp, attic]
    confidence: {base: 2, combine: average}
  - id: A-1
    name: duplicate
    severity: info
    when: {gpu_held: true}
  - id: A-2
    name: no conditions
    severity: info
    colour: blue
    when: {}
)";
    auto parsed = parse_correlation_rules(yaml, "site.yaml");
    ASSERT_FALSE(parsed);
    const std::string& message = parsed.error().message;
    for (const char* expected : {
             "site.yaml:4:15: rules[0] (A-1).severity: unknown severity 'loud'",
             "site.yaml:5:13: rules[0] (A-1).window: must be a duration like 90s, 5m, 2h or 1d, "
             "got 'soon'",
             "site.yaml:7:17: rules[0] (A-1).when.gpu_held: must be true or false, got 'maybe'",
             "site.yaml:8:37: rules[0] (A-1).when.signature.fields: unknown field 'smell'",
             "site.yaml:9:27: rules[0] (A-1).when.exe_location: unknown location 'attic'",
             "site.yaml:10:24: rules[0] (A-1).confidence.base: must be a number from 0 to 1, got "
             "'2'",
             "site.yaml:10:36: rules[0] (A-1).confidence.combine: must be max or noisy_or, got "
             "'average'",
             "site.yaml:11:9: duplicate rule id 'A-1' (first at site.yaml:2)",
             "site.yaml:18:5: rules[2]: unknown key 'colour'",
             "site.yaml:19:11: rules[2] (A-2).when: needs at least one condition",
         }) {
        EXPECT_NE(message.find(expected), std::string::npos) << "missing: " << expected << "\nin:\n"
                                                             << message;
    }
}

TEST(CorrelationRules, FilesReplaceExtendAndDisableBuiltinRules) {
    testing::TempDir dir;
    const auto path = dir.path() / "site.yaml";
    std::ofstream(path) << R"(rules:
  - id: GG-CORR-0005
    name: Temporary executables on a GPU, killed here
    severity: critical
    action: kill
    when:
      gpu_held: true
      exe_location: [tmp, dev_shm]
  - id: GG-CORR-0009
    name: off
    severity: info
    enabled: false
    when: {gpu_held: true}
  - id: SITE-0001
    name: Guests on GPUs
    severity: notice
    when:
      gpu_held: true
      scope: {users: [guest], containers: host}
)";
    auto rules = load_correlation_rules({path.string()});
    ASSERT_TRUE(rules) << rules.error().message;
    auto find = [&](const std::string& id) {
        return std::find_if(rules->begin(), rules->end(),
                            [&](auto& rule) { return rule.id == id; });
    };
    ASSERT_NE(find("GG-CORR-0005"), rules->end());
    EXPECT_EQ(find("GG-CORR-0005")->action, "kill");
    EXPECT_EQ(find("GG-CORR-0005")->exe_location.size(), 2u);
    EXPECT_FALSE(find("GG-CORR-0009")->enabled);
    ASSERT_NE(find("SITE-0001"), rules->end());
    EXPECT_EQ(find("SITE-0001")->scope->containers, ContainerScope::kHost);
    EXPECT_EQ(rules->back().id, "SITE-0001");

    auto missing = load_correlation_rules({(dir.path() / "nope.yaml").string()});
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("nope.yaml: cannot open"), std::string::npos);
}

TEST(CorrelationRules, DurationsSizesAndLocations) {
    EXPECT_EQ(parse_duration("90s"), std::chrono::seconds(90));
    EXPECT_EQ(parse_duration("5m"), std::chrono::seconds(300));
    EXPECT_EQ(parse_duration("2h"), std::chrono::seconds(7200));
    EXPECT_EQ(parse_duration("1d"), std::chrono::seconds(86400));
    EXPECT_FALSE(parse_duration("5 minutes"));
    EXPECT_FALSE(parse_duration("m"));
    EXPECT_EQ(parse_bytes("20GB"), 20'000'000'000ull);
    EXPECT_EQ(parse_bytes("20GiB"), 20ull << 30);
    EXPECT_EQ(parse_bytes("512 MiB"), 512ull << 20);
    EXPECT_EQ(parse_bytes("1024"), 1024u);
    EXPECT_FALSE(parse_bytes("lots"));
    EXPECT_FALSE(parse_bytes("5XB"));
    EXPECT_EQ(exe_locations("/tmp/x"), std::vector<ExeLocation>{ExeLocation::kTmp});
    EXPECT_EQ(exe_locations("/memfd:x (deleted)"), std::vector<ExeLocation>{ExeLocation::kMemfd});
    EXPECT_EQ(exe_locations("/usr/bin/a (deleted)"),
              std::vector<ExeLocation>{ExeLocation::kDeleted});
    EXPECT_TRUE(exe_locations("/home/u/tmp/x").empty());
}

}  // namespace
}  // namespace gpuguard::rules
