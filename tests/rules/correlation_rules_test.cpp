// Correlation rule files: the built-in set loads, every problem in a bad file
// is reported as file:line:col, and files replace or extend built-in rules.
#include <ctime>
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

// Unix ns of a UTC civil time (timegm: no process time zone involved).
int64_t utc_ns(int year, int month, int day, int hour, int minute) {
    std::tm tm{};
    tm.tm_year = year - 1900;
    tm.tm_mon = month - 1;
    tm.tm_mday = day;
    tm.tm_hour = hour;
    tm.tm_min = minute;
    return static_cast<int64_t>(timegm(&tm)) * 1'000'000'000;
}

TEST(CorrelationRules, TimeWindowsFollowTheirTimeZoneAndDays) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: SITE-1
    name: business hours
    severity: warning
    when:
      time_window: {days: [Mon, tue, wed, thu, fri], from: "09:00", to: "18:00", time_zone: Europe/Berlin}
  - id: SITE-2
    name: nights
    severity: warning
    when:
      time_window: {days: [fri], from: "22:00", to: "06:00", time_zone: UTC}
)",
                                          "guard.yaml");
    ASSERT_TRUE(parsed) << parsed.error().message;
    const TimeWindowCondition& office = *(*parsed)[0].time_window;
    // Wednesday 18 November 2026: Berlin is UTC+1.
    EXPECT_FALSE(office.contains(utc_ns(2026, 11, 18, 7, 59)));  // 08:59 local
    EXPECT_TRUE(office.contains(utc_ns(2026, 11, 18, 8, 0)));    // 09:00 local
    EXPECT_TRUE(office.contains(utc_ns(2026, 11, 18, 16, 59)));  // 17:59 local
    EXPECT_FALSE(office.contains(utc_ns(2026, 11, 18, 17, 0)));  // 18:00 local
    // Summer time, Wednesday 15 July 2026: UTC+2, so 07:30Z is 09:30 local.
    EXPECT_TRUE(office.contains(utc_ns(2026, 7, 15, 7, 30)));
    EXPECT_FALSE(office.contains(utc_ns(2026, 1, 14, 7, 30)));  // winter: 08:30 local
    // Saturday 21 November 2026, 10:00 local: not a listed day.
    EXPECT_FALSE(office.contains(utc_ns(2026, 11, 21, 9, 0)));

    const TimeWindowCondition& nights = *(*parsed)[1].time_window;
    EXPECT_TRUE(nights.contains(utc_ns(2026, 11, 20, 23, 0)));  // Friday night
    EXPECT_TRUE(nights.contains(utc_ns(2026, 11, 21, 5, 59)));  // ... into Saturday morning
    EXPECT_FALSE(nights.contains(utc_ns(2026, 11, 21, 6, 0)));
    EXPECT_FALSE(nights.contains(utc_ns(2026, 11, 21, 23, 0)));  // Saturday night
    EXPECT_FALSE(nights.contains(utc_ns(2026, 11, 20, 5, 0)));   // Friday morning is Thursday's
}

TEST(CorrelationRules, BadTimeWindowsAndProcessCapsNameTheirLine) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: SITE-1
    name: bad
    when:
      time_window: {days: [someday], from: "9am", to: "25:00", time_zone: Mars/Olympus_Mons}
      max_gpu_processes: 0
)",
                                          "guard.yaml");
    ASSERT_FALSE(parsed);
    const std::string& message = parsed.error().message;
    EXPECT_NE(message.find("guard.yaml:5:"), std::string::npos) << message;
    EXPECT_NE(message.find("unknown day 'someday'"), std::string::npos) << message;
    EXPECT_NE(message.find("'9am'"), std::string::npos) << message;
    EXPECT_NE(message.find("'25:00'"), std::string::npos) << message;
    EXPECT_NE(message.find("unknown time zone 'Mars/Olympus_Mons'"), std::string::npos) << message;
    EXPECT_NE(message.find("guard.yaml:6:"), std::string::npos) << message;
    EXPECT_NE(message.find("max_gpu_processes"), std::string::npos) << message;
}

}  // namespace
}  // namespace gpuguard::rules
