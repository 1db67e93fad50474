// The scenario corpus (tests/scenarios/**/*.jsonl): hand-written event files
// of miners and of benign GPU work, each stating its expected detections in
// "# expect: RULE pid=N" lines (with " dry_run" when the detection is a dry
// run, " severity=S" to check the severity it ends with) ("# expect:
// nothing" for benign work). Every file is replayed through the real
// correlator with the built-in rules and must give exactly the expected
// (rule, pid) pairs, and the same bytes in two separate processes. "# correlation: FILE" lines
// add correlation rule files (guard policies).
//
// "# kind: miner|benign" and "# class: NAME" place a file in the detection
// report (Scenarios.DetectionReport: recall and false alarms by severity,
// per class); without them the kind comes from the name (miner_, abuse_:
// miner; benign_: benign; guard_: a policy and agent_: tampering with the
// agent, neither in the report).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "gpuguard/detect/replay.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/siem/siem.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const rules::RuleSet> builtin_rule_set() {
    static std::shared_ptr<const rules::RuleSet> set = [] {
        auto pack = rules::compile_builtin_pack();
        EXPECT_TRUE(pack) << pack.error().message;
        auto built = rules::RuleSet::build(*pack, {});
        EXPECT_TRUE(built) << built.error().message;
        return std::make_shared<const rules::RuleSet>(std::move(*built));
    }();
    return set;
}

std::vector<fs::path> scenario_files() {
    std::vector<fs::path> files;
    for (const auto& entry : fs::recursive_directory_iterator(GPUGUARD_SCENARIO_DIR)) {
        if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

struct Expectation {
    std::multiset<std::string> detections;          // "RULE pid=N", "RULE pid=N dry_run"
    std::map<std::string, std::string> severities;  // "RULE pid=N" -> "notice"
    bool nothing = false;
    std::vector<std::string> correlation_files;  // "# correlation: FILE", relative to the corpus
    std::string kind;                            // "miner", "benign", "policy"
    std::string klass;                           // report class
};

Expectation read_expectation(const fs::path& path) {
    Expectation expectation;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.starts_with("# correlation: ")) {
            expectation.correlation_files.push_back(
                (path.parent_path() / line.substr(15)).string());
            continue;
        }
        if (line.starts_with("# kind: ")) expectation.kind = line.substr(8);
        if (line.starts_with("# class: ")) expectation.klass = line.substr(9);
        if (!line.starts_with("# expect: ")) continue;
        std::string what = line.substr(10);
        if (what == "nothing") {
            expectation.nothing = true;
            continue;
        }
        if (const auto at = what.find(" severity="); at != std::string::npos) {
            const std::string severity = what.substr(at + 10);
            what.erase(at);
            expectation.severities[what] = severity;
        }
        expectation.detections.insert(what);
    }
    const std::string stem = path.stem().string();
    if (expectation.kind.empty()) {
        // agent_*: something done to the agent itself, neither a miner nor benign work.
        expectation.kind = stem.starts_with("benign_")  ? "benign"
                           : stem.starts_with("guard_") ? "policy"
                           : stem.starts_with("agent_") ? "tamper"
                                                        : "miner";
    }
    if (expectation.klass.empty()) expectation.klass = stem.substr(0, stem.find('_'));
    return expectation;
}

struct Replayed {
    std::multiset<std::string> found;            // "RULE pid=N[ dry_run]"
    std::map<std::string, Severity> severities;  // "RULE pid=N" -> as it ended
    std::string output;                          // every detection's ECS line
    std::optional<Severity> worst;               // most severe of all
    std::optional<uint64_t> first_alert_ns;      // first detection at warning or above
};

Replayed replay(const fs::path& path, const Expectation& expectation) {
    auto correlation = rules::load_correlation_rules(expectation.correlation_files);
    EXPECT_TRUE(correlation) << correlation.error().message;
    auto replay = Replay::create(*correlation, builtin_rule_set());
    EXPECT_TRUE(replay) << replay.error().message;
    Replayed result;
    auto status = (*replay)->feed_file(path, [&](const Detection& detection) {
        const std::string key = detection.rule_id + " pid=" + std::to_string(detection.process.pid);
        if (detection.update == 0) result.found.insert(key + (detection.dry_run ? " dry_run" : ""));
        result.severities[key] = detection.severity;
        if (!result.worst || detection.severity < *result.worst) result.worst = detection.severity;
        if (at_least(detection.severity, Severity::kWarning) && !result.first_alert_ns) {
            result.first_alert_ns = detection.last_seen_ns;
        }
        result.output += siem::format_ecs_json(detection, HostInfo{}) + "\n";
    });
    EXPECT_TRUE(status) << status.error().message;
    return result;
}

// ts_ns of the file's first event.
uint64_t first_event_ns(const fs::path& path) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        const auto at = line.find("\"ts_ns\":");
        if (line.starts_with("#") || at == std::string::npos) continue;
        return std::stoull(line.substr(at + 8));
    }
    return 0;
}

TEST(Scenarios, CorpusHasMinersAndBenignWork) {
    const auto files = scenario_files();
    size_t miners = 0, benign = 0;
    for (const auto& file : files) {
        const auto expectation = read_expectation(file);
        EXPECT_NE(expectation.nothing, !expectation.detections.empty())
            << file << ": needs '# expect: RULE pid=N' lines or exactly '# expect: nothing'";
        EXPECT_TRUE(expectation.kind == "miner" || expectation.kind == "benign" ||
                    expectation.kind == "policy" || expectation.kind == "tamper")
            << file << ": unknown kind '" << expectation.kind << "'";
        miners += expectation.kind == "miner";
        benign += expectation.kind == "benign";
    }
    EXPECT_GE(files.size(), 30u);
    EXPECT_GE(miners, 20u);
    EXPECT_GE(benign, 10u);
}

class ScenarioTest : public ::testing::TestWithParam<fs::path> {};

TEST_P(ScenarioTest, GivesExactlyTheExpectedDetectionsDeterministically) {
    const fs::path& file = GetParam();
    const Expectation expectation = read_expectation(file);
    const Replayed first = replay(file, expectation);
    EXPECT_EQ(first.found, expectation.detections) << file;
    for (const auto& [key, severity] : expectation.severities) {
        const auto found = first.severities.find(key);
        ASSERT_NE(found, first.severities.end()) << key << " in " << file;
        EXPECT_EQ(to_string(found->second), severity) << key << " in " << file;
    }
    // For Scenarios.SeparateProcessesReplayTheCorpusToTheSameBytes: each
    // file's detections, where the parent test asked for them.
    if (const char* out = std::getenv("GPUGUARD_SCENARIO_OUTPUT")) {
        std::string name = fs::relative(file, GPUGUARD_SCENARIO_DIR).string();
        std::replace(name.begin(), name.end(), '/', '_');
        std::ofstream(fs::path(out) / (name + ".out"), std::ios::binary) << first.output;
    }
}

// Replay gives the same bytes in separate processes: addresses, hash seeds
// and allocation order differ between two processes, where two runs in one
// process share them. Two children of this binary replay the whole corpus
// at once (Corpus/ScenarioTest), each writing every file's detections; the
// two outputs must be equal, file by file.
TEST(Scenarios, SeparateProcessesReplayTheCorpusToTheSameBytes) {
    const gpuguard::testing::TempDir dir("gg-scenario-runs");
    std::vector<std::unique_ptr<gpuguard::testing::Subprocess>> runs;
    for (const char* run : {"a", "b"}) {
        fs::create_directory(dir / run);
        runs.push_back(std::make_unique<gpuguard::testing::Subprocess>(std::vector<std::string>{
            "/usr/bin/env", "GPUGUARD_SCENARIO_OUTPUT=" + (dir / run).string(),
            fs::read_symlink("/proc/self/exe").string(), "--gtest_filter=Corpus/ScenarioTest.*"}));
    }
    for (auto& run : runs) {
        EXPECT_EQ(run->stop(0, std::chrono::seconds(120)), 0) << run->stderr_text();
    }
    const auto outputs = [&](const char* run) {
        std::map<std::string, std::string> files;
        for (const auto& entry : fs::directory_iterator(dir / run)) {
            std::ifstream in(entry.path(), std::ios::binary);
            files[entry.path().filename().string()] =
                std::string(std::istreambuf_iterator<char>(in), {});
        }
        return files;
    };
    const auto a = outputs("a");
    const auto b = outputs("b");
    EXPECT_EQ(a.size(), scenario_files().size());
    size_t with_detections = 0;
    for (const auto& [name, text] : a) {
        with_detections += !text.empty();
        const auto other = b.find(name);
        ASSERT_NE(other, b.end()) << name;
        EXPECT_EQ(text, other->second) << "replay is not deterministic for " << name;
    }
    EXPECT_GE(with_detections, 20u);
}

// Recall and false alarms over the whole corpus, by class: a miner counts as
// detected when some detection of it reaches warning; a benign workload is a
// false alarm when one does (a notice is tolerated: it asks nobody to act).
// Behaviour-only miners (class "quiet") must be alerted within 3 minutes.
// Replay names the container from the journaled container event (it reads
// no runtime state): every detection of the pod's miner carries it.
TEST(Scenarios, ContainerEventNamesContainerAndPodInEveryDetection) {
    const auto result =
        replay(fs::path(GPUGUARD_SCENARIO_DIR) / "miner_in_kubernetes_pod.jsonl", Expectation{});
    ASSERT_EQ(result.found.size(), 3u) << result.output;
    std::istringstream lines(result.output);
    for (std::string line; std::getline(lines, line);) {
        EXPECT_NE(line.find(R"("container":{"id":"7c2e)"), std::string::npos) << line;
        EXPECT_NE(line.find(R"(,"name":"miner","runtime":"containerd","image":{"name":)"
                            R"("docker.io/evil/xmrig:6.21")"),
                  std::string::npos)
            << line;
        EXPECT_NE(line.find(R"("orchestrator":{"type":"kubernetes","namespace":"prod",)"
                            R"("resource":{"type":"pod","name":"web-7d9f","id":"0c7c-11e9"}})"),
                  std::string::npos)
            << line;
    }
}

TEST(Scenarios, DetectionReport) {
    struct Row {
        size_t miners = 0, detected = 0, benign = 0, benign_notice = 0, benign_alarm = 0;
    };
    std::map<std::string, Row> rows;
    Row total;
    std::vector<std::string> missed, alarms, slow;
    for (const auto& file : scenario_files()) {
        const Expectation expectation = read_expectation(file);
        if (expectation.kind == "policy" || expectation.kind == "tamper") continue;
        const Replayed result = replay(file, expectation);
        Row& row = rows[expectation.klass];
        const bool alert = result.worst && at_least(*result.worst, Severity::kWarning);
        const std::string name = fs::relative(file, GPUGUARD_SCENARIO_DIR).string();
        if (expectation.kind == "miner") {
            ++row.miners;
            ++total.miners;
            row.detected += alert;
            total.detected += alert;
            if (!alert) missed.push_back(name);
            if (expectation.klass == "quiet" && alert &&
                *result.first_alert_ns - first_event_ns(file) > 180'000'000'000ull) {
                slow.push_back(name);
            }
        } else {
            ++row.benign;
            ++total.benign;
            const bool notice = result.worst && !alert;
            row.benign_notice += notice;
            total.benign_notice += notice;
            row.benign_alarm += alert;
            total.benign_alarm += alert;
            if (alert) alarms.push_back(name);
        }
    }
    const auto percent = [](size_t part, size_t whole) {
        return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
    };
    std::printf("%-16s %7s %9s %7s %7s %14s %16s\n", "class", "miners", "detected", "recall",
                "benign", "notice only", ">= warning");
    const auto print = [&](const std::string& name, const Row& row) {
        std::printf("%-16s %7zu %9zu %6.1f%% %7zu %14zu %16zu\n", name.c_str(), row.miners,
                    row.detected, percent(row.detected, row.miners), row.benign, row.benign_notice,
                    row.benign_alarm);
    };
    for (const auto& [name, row] : rows) print(name, row);
    print("all", total);
    for (const auto& name : missed) std::printf("missed: %s\n", name.c_str());
    for (const auto& name : alarms) std::printf("false alarm: %s\n", name.c_str());
    EXPECT_GE(percent(total.detected, total.miners), 97.0);
    EXPECT_EQ(total.benign_alarm, 0u) << "benign workloads alerted at warning or above";
    EXPECT_TRUE(slow.empty()) << "behaviour-only miners alerted later than 3 minutes: "
                              << (slow.empty() ? "" : slow.front());
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, ScenarioTest, ::testing::ValuesIn(scenario_files()),
    [](const ::testing::TestParamInfo<fs::path>& info) {
        std::string name =
            fs::relative(info.param, GPUGUARD_SCENARIO_DIR).replace_extension().string();
        std::replace(name.begin(), name.end(), '/', '_');
        std::replace(name.begin(), name.end(), '-', '_');
        return name;
    });

}  // namespace
}  // namespace gpuguard::agent
