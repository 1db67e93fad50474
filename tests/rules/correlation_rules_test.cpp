// Correlation rule files: the built-in set loads, every problem in a bad file
// is reported as file:line:col, and files replace or extend built-in rules.
#include <algorithm>
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

TEST(CorrelationRules, PriorityGuardSectionSetsThresholdsAndPriorities) {
    testing::TempDir dir;
    const auto first = dir.path() / "guard.yaml";
    std::ofstream(first) << R"(priority_guard:
  pause_above_percent: 85
  resume_below_percent: 50
  max_pause: 10m
  cooldown: 2m
  default_priority: 10
  dry_run: true
  processes:
    - {exe: ["/opt/train/*"], priority: 100}
    - {comm: [python*], cmdline: ["* --batch*"], priority: 5}
    - {users: [intern, "1500"], priority: 1}
)";
    // A file with priorities only is a valid correlation rule file too.
    auto rules = load_correlation_rules({first.string()});
    ASSERT_TRUE(rules) << rules.error().message;
    EXPECT_EQ(rules->size(), builtin_correlation_rules()->size());

    auto policy = load_priority_policy({first.string()});
    ASSERT_TRUE(policy) << policy.error().message;
    ASSERT_TRUE(*policy);
    EXPECT_EQ((*policy)->pause_above_percent, 85);
    EXPECT_EQ((*policy)->resume_below_percent, 50);
    EXPECT_EQ((*policy)->max_pause, std::chrono::minutes(10));
    EXPECT_EQ((*policy)->cooldown, std::chrono::minutes(2));
    EXPECT_TRUE((*policy)->dry_run);
    EXPECT_EQ((*policy)->source, first.string() + ":1");
    const PriorityPolicy& p = **policy;
    EXPECT_EQ(p.priority_of("train", "/opt/train/bin/train", "train --epochs 3", 1000, "bob"), 100);
    EXPECT_EQ(p.priority_of("python3", "/usr/bin/python3", "python3 job.py --batch 4", 1000, ""),
              5);
    EXPECT_EQ(p.priority_of("python3", "/usr/bin/python3", "python3 job.py", 1000, ""), 10)
        << "every set list of a pattern must match";
    EXPECT_EQ(p.priority_of("blender", "/usr/bin/blender", "blender -b", 1500, ""), 1);
    EXPECT_EQ(p.priority_of("blender", "/usr/bin/blender", "blender -b", 1000, "intern"), 1);
    EXPECT_EQ(p.priority_of("blender", "/usr/bin/blender", "blender -b", 1000, "bob"), 10);

    // Defaults; a later file's section replaces an earlier one.
    const auto second = dir.path() / "later.yaml";
    std::ofstream(second) << "priority_guard:\n  processes:\n    - {comm: [a], priority: 1}\n";
    auto later = load_priority_policy({first.string(), second.string()});
    ASSERT_TRUE(later && *later) << (later ? "" : later.error().message);
    EXPECT_EQ((*later)->pause_above_percent, 80) << "the issue's default threshold";
    EXPECT_EQ((*later)->resume_below_percent, 60) << "hysteresis: 20 points below";
    EXPECT_FALSE((*later)->dry_run);
    EXPECT_EQ((*later)->processes.size(), 1u);
    auto none = load_priority_policy({});
    ASSERT_TRUE(none);
    EXPECT_FALSE(*none) << "no section: guard priorities are off";

    auto both = load_guard_policies({first.string()});
    ASSERT_TRUE(both) << both.error().message;
    EXPECT_TRUE(both->priority);
    EXPECT_EQ(both->rules.size(), rules->size());
}

TEST(CorrelationRules, BadPriorityGuardSectionsNameTheirLine) {
    auto inverted = parse_priority_policy(R"(priority_guard:
  pause_above_percent: 50
  resume_below_percent: 70
  processes: [{comm: [a], priority: 1}]
)",
                                          "p.yaml");
    ASSERT_FALSE(inverted);
    EXPECT_NE(inverted.error().message.find("p.yaml:2:3: priority_guard: resume_below_percent (70) "
                                            "must be below pause_above_percent (50)"),
              std::string::npos)
        << inverted.error().message;
    auto unknown = parse_priority_policy("priority_guard:\n  colour: red\n", "p.yaml");
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("p.yaml:2:3: priority_guard: unknown key 'colour'"),
              std::string::npos)
        << unknown.error().message;
    auto rest = parse_priority_policy(R"(priority_guard:
  max_pause: forever
  processes:
    - {priority: 3}
    - {comm: [x]}
    - {comm: [y], priority: 1.5}
)",
                                      "p.yaml");
    ASSERT_FALSE(rest);
    for (const char* expected : {
             "p.yaml:2:14: priority_guard.max_pause: must be a duration",
             "p.yaml:4:7: priority_guard.processes[0]: needs comm, exe, cmdline or users",
             "p.yaml:5:7: priority_guard.processes[1]: priority: missing",
             "p.yaml:6:29: priority_guard.processes[2].priority: must be a whole number",
         }) {
        EXPECT_NE(rest.error().message.find(expected), std::string::npos)
            << "missing: " << expected << "\nin:\n"
            << rest.error().message;
    }
    // A rule file with an unknown top-level key still fails.
    EXPECT_FALSE(parse_correlation_rules("priorities: {}\n", "x.yaml"));
}

}  // namespace
}  // namespace gpuguard::rules

namespace gpuguard::rules {
namespace {

TEST(CorrelationRules, SupportingSignalsAreReadWithTheirProblemsPlaced) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: S-1
    name: supported
    severity: notice
    when: {gpu_held: true, opaque_peer: true, scope: {not_comm: [grep]}}
    supporting:
      severity: error
      min: 2
      weight: 0.3
      signals:
        - name: temp
          exe_location: [tmp]
        - name: port
          signature: {fields: [port]}
)",
                                          "site.yaml");
    ASSERT_TRUE(parsed) << parsed.error().message;
    const CorrelationRule& rule = parsed->at(0);
    EXPECT_TRUE(rule.opaque_peer);
    ASSERT_TRUE(rule.scope);
    EXPECT_EQ(rule.scope->not_comm, std::vector<std::string>{"grep"});
    ASSERT_TRUE(rule.supporting);
    EXPECT_EQ(rule.supporting->severity, Severity::kError);
    EXPECT_EQ(rule.supporting->min, 2u);
    EXPECT_DOUBLE_EQ(rule.supporting->weight, 0.3);
    ASSERT_EQ(rule.supporting->signals.size(), 2u);
    EXPECT_EQ(rule.supporting->signals[0].name, "temp");
    EXPECT_EQ(rule.supporting->signals[0].exe_location,
              std::vector<ExeLocation>{ExeLocation::kTmp});
    EXPECT_TRUE(rule.supporting->signals[1].signature);

    auto bad = parse_correlation_rules(R"(rules:
  - id: S-2
    name: badly supported
    severity: notice
    when: {gpu_held: true}
    supporting:
      severity: loud
      signals:
        - exe_location: [attic]
        - name: nothing
)",
                                       "site.yaml");
    ASSERT_FALSE(bad);
    for (const char* expected : {
             "site.yaml:7:17: rules[0] (S-2).supporting.severity: unknown severity 'loud'",
             "site.yaml:9:11: rules[0] (S-2).supporting.signals[0]: name: missing",
             "site.yaml:9:26: rules[0] (S-2).supporting.signals[0].exe_location: unknown location "
             "'attic'",
             "site.yaml:10:11: rules[0] (S-2).supporting.signals[1]: needs at least one condition",
         }) {
        EXPECT_NE(bad.error().message.find(expected), std::string::npos) << expected << "\nin:\n"
                                                                         << bad.error().message;
    }
}

TEST(CorrelationRules, CounterSignalsNeedALowerSeverity) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: C-1
    name: countered
    severity: warning
    when: {gpu_held: true}
    counter:
      severity: notice
      weight: 0.25
      signals:
        - name: framework
          gpu_stack: [ml_framework]
)",
                                          "site.yaml");
    ASSERT_TRUE(parsed) << parsed.error().message;
    ASSERT_TRUE(parsed->at(0).counter);
    EXPECT_EQ(parsed->at(0).counter->severity, Severity::kNotice);
    EXPECT_DOUBLE_EQ(parsed->at(0).counter->weight, 0.25);
    ASSERT_EQ(parsed->at(0).counter->signals.size(), 1u);
    EXPECT_EQ(parsed->at(0).counter->signals[0].name, "framework");

    auto bad = parse_correlation_rules(R"(rules:
  - id: C-2
    name: no severity
    severity: warning
    when: {gpu_held: true}
    counter:
      signals: [{name: f, gpu_stack: [ml_framework]}]
  - id: C-3
    name: raises instead
    severity: warning
    when: {gpu_held: true}
    counter:
      severity: critical
      signals: [{name: f, gpu_stack: [ml_framework]}]
)",
                                       "site.yaml");
    ASSERT_FALSE(bad);
    for (const char* expected : {
             "site.yaml:7:7: rules[0] (C-2).counter.severity: required",
             "site.yaml:13:17: rules[1] (C-3).counter.severity: must not be above the rule's own "
             "severity",
         }) {
        EXPECT_NE(bad.error().message.find(expected), std::string::npos) << expected << "\nin:\n"
                                                                         << bad.error().message;
    }
}

TEST(CorrelationRules, ModuleLoadConditionIsReadAndItsMistakesNamed) {
    auto builtin = builtin_correlation_rules();
    ASSERT_TRUE(builtin) << builtin.error().message;
    const auto module_rule = std::find_if(builtin->begin(), builtin->end(), [](const auto& rule) {
        return rule.id == "GG-CORR-0018";
    });
    ASSERT_NE(module_rule, builtin->end());
    ASSERT_TRUE(module_rule->module_load);
    EXPECT_EQ(module_rule->module_load->when,
              (std::vector<ModuleLoadContext>{ModuleLoadContext::kGpuProcess,
                                              ModuleLoadContext::kFlaggedLineage,
                                              ModuleLoadContext::kMinerOnHost}));
    EXPECT_FALSE(module_rule->module_load->driver_modules.empty());
    ASSERT_TRUE(module_rule->supporting);
    EXPECT_EQ(module_rule->supporting->severity, gpuguard::Severity::kError);

    const char* yaml = R"(rules:
  - id: M-1
    name: modules
    severity: notice
    when:
      module_load: {while: [gpu_process, always]}
  - id: M-2
    name: drivers alone
    severity: notice
    when:
      module_load: {while: [any], driver_modules: [nvidia]}
  - id: M-3
    name: no contexts
    severity: notice
    when:
      module_load: {driver_loaders: [modprobe], driver_modules: [nvidia], loaders: [x]}
)";
    auto parsed = parse_correlation_rules(yaml, "site.yaml");
    ASSERT_FALSE(parsed);
    const std::string& message = parsed.error().message;
    for (const char* expected : {
             "site.yaml:6:42: rules[0] (M-1).when.module_load.while: unknown context 'always' "
             "(gpu_process, flagged_lineage, miner_on_host, any)",
             "site.yaml:11:20: rules[1] (M-2).when.module_load: driver_modules and "
             "driver_loaders go together",
             "site.yaml:16:20: rules[2] (M-3).when.module_load: needs while: (gpu_process, "
             "flagged_lineage, miner_on_host, any)",
             "site.yaml:16:75: rules[2] (M-3).when.module_load: unknown key 'loaders'",
         }) {
        EXPECT_NE(message.find(expected), std::string::npos) << "missing: " << expected << "\nin:\n"
                                                             << message;
    }
}

}  // namespace
}  // namespace gpuguard::rules

namespace gpuguard::rules {
namespace {

TEST(CorrelationRules, HiddenFromProcIsAConditionAndTheBuiltInRuleUsesIt) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: S-3
    name: hidden
    severity: error
    when: {hidden_from_proc: true}
)",
                                          "site.yaml");
    ASSERT_TRUE(parsed) << parsed.error().message;
    EXPECT_TRUE(parsed->at(0).hidden_from_proc);
    auto bad = parse_correlation_rules(R"(rules:
  - id: S-4
    name: hidden
    severity: error
    when: {hidden_from_proc: maybe}
)",
                                       "site.yaml");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("site.yaml:5:"), std::string::npos) << bad.error().message;
    EXPECT_NE(bad.error().message.find("hidden_from_proc"), std::string::npos)
        << bad.error().message;

    auto builtin = builtin_correlation_rules();
    ASSERT_TRUE(builtin) << builtin.error().message;
    const auto rule = std::find_if(builtin->begin(), builtin->end(),
                                   [](const auto& each) { return each.id == "GG-CORR-0017"; });
    ASSERT_NE(rule, builtin->end());
    EXPECT_TRUE(rule->hidden_from_proc);
    EXPECT_EQ(rule->severity, Severity::kError);
    ASSERT_TRUE(rule->supporting);
    EXPECT_EQ(rule->supporting->severity, Severity::kCritical);
}

}  // namespace
}  // namespace gpuguard::rules

namespace gpuguard::rules {
namespace {

TEST(CorrelationRules, AgentTamperNamesKindsAndRefusesUnknownOnes) {
    auto rules = parse_correlation_rules(R"(rules:
  - id: SITE-1
    name: stopped or down
    severity: notice
    when: {agent_tamper: [stop, down]}
)",
                                         "site.yaml");
    ASSERT_TRUE(rules) << rules.error().message;
    EXPECT_EQ((*rules)[0].agent_tamper, (std::vector<std::string>{"stop", "down"}));

    auto bad = parse_correlation_rules(R"(rules:
  - id: SITE-2
    name: bad kind
    severity: notice
    when:
      agent_tamper: [stop, nap]
  - id: SITE-3
    name: none
    severity: notice
    when:
      agent_tamper: []
)",
                                       "site.yaml");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("site.yaml:6:28: rules[0] (SITE-2).when.agent_tamper: "
                                       "unknown kind 'nap' (stop, signal, bpf_command, "
                                       "pin_removed, down)"),
              std::string::npos)
        << bad.error().message;
    EXPECT_NE(bad.error().message.find("rules[1] (SITE-3).when.agent_tamper: name at least one "
                                       "kind"),
              std::string::npos)
        << bad.error().message;
}

TEST(CorrelationRules, DurationsAndSizes) {
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
}

}  // namespace
}  // namespace gpuguard::rules
