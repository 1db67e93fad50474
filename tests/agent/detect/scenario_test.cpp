// The scenario corpus (tests/scenarios/*.jsonl): hand-written event files of
// miners and of benign GPU work, each stating its expected detections in
// "# expect: RULE pid=N" lines (with " dry_run" when the detection is a dry run)
// ("# expect: nothing" for benign work). Every
// file is replayed through the real correlator with the built-in rules and
// must give exactly the expected (rule, pid) pairs, and the same bytes twice.
// "# correlation: FILE" lines add correlation rule files (guard policies).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "gpuguard/detect/replay.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/siem/siem.h"

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
    for (const auto& entry : fs::directory_iterator(GPUGUARD_SCENARIO_DIR)) {
        if (entry.path().extension() == ".jsonl") files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    return files;
}

struct Expectation {
    std::multiset<std::string> detections;  // "RULE pid=N", "RULE pid=N dry_run"
    bool nothing = false;
    std::vector<std::string> correlation_files;  // "# correlation: FILE", relative to the corpus
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
        if (!line.starts_with("# expect: ")) continue;
        const std::string what = line.substr(10);
        if (what == "nothing") {
            expectation.nothing = true;
        } else {
            expectation.detections.insert(what);
        }
    }
    return expectation;
}

// New detections as "RULE pid=N", and every detection's ECS line.
std::pair<std::multiset<std::string>, std::string> replay(const fs::path& path,
                                                          const Expectation& expectation) {
    auto correlation = rules::load_correlation_rules(expectation.correlation_files);
    EXPECT_TRUE(correlation) << correlation.error().message;
    auto replay = Replay::create(*correlation, builtin_rule_set());
    EXPECT_TRUE(replay) << replay.error().message;
    std::multiset<std::string> found;
    std::string output;
    auto status = (*replay)->feed_file(path, [&](const Detection& detection) {
        if (detection.update == 0) {
            found.insert(detection.rule_id + " pid=" + std::to_string(detection.process.pid) +
                         (detection.dry_run ? " dry_run" : ""));
        }
        output += siem::format_ecs_json(detection, HostInfo{}) + "\n";
    });
    EXPECT_TRUE(status) << status.error().message;
    return {found, output};
}

TEST(Scenarios, CorpusHasMinersAndBenignWork) {
    const auto files = scenario_files();
    size_t miners = 0, benign = 0;
    for (const auto& file : files) {
        const auto expectation = read_expectation(file);
        EXPECT_NE(expectation.nothing, !expectation.detections.empty())
            << file << ": needs '# expect: RULE pid=N' lines or exactly '# expect: nothing'";
        (expectation.nothing ? benign : miners)++;
    }
    EXPECT_GE(files.size(), 30u);
    EXPECT_GE(miners, 20u);
    EXPECT_GE(benign, 10u);
}

class ScenarioTest : public ::testing::TestWithParam<fs::path> {};

TEST_P(ScenarioTest, GivesExactlyTheExpectedDetectionsDeterministically) {
    const fs::path& file = GetParam();
    const Expectation expectation = read_expectation(file);
    auto [found, output] = replay(file, expectation);
    EXPECT_EQ(found, expectation.detections) << file;
    auto [again, output_again] = replay(file, expectation);
    EXPECT_EQ(output, output_again) << "replay is not deterministic for " << file;
}

INSTANTIATE_TEST_SUITE_P(Corpus, ScenarioTest, ::testing::ValuesIn(scenario_files()),
                         [](const ::testing::TestParamInfo<fs::path>& info) {
                             return info.param.stem().string();
                         });

}  // namespace
}  // namespace gpuguard::agent
