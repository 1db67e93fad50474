// rules.correlation_files at start (load_guard_policies_at_start): a good
// load keeps a checksummed copy; files that do not load run on that copy,
// or on the built-in rules alone when there is none or it was tampered
// with, and say why; without a directory for the copy they fail as before.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "gpuguard/rules/correlation.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::rules {
namespace {

using gpuguard::testing::TempDir;

bool has_rule(const GuardPolicies& policies, const std::string& id) {
    return std::any_of(policies.rules.begin(), policies.rules.end(),
                       [&](const CorrelationRule& rule) { return rule.id == id; });
}

class GuardLastGoodTest : public ::testing::Test {
  protected:
    void write(const std::string& text) { std::ofstream(file_) << text; }
    Result<GuardPoliciesAtStart> start() {
        return load_guard_policies_at_start({file_.string()}, copy_);
    }

    TempDir dir_{"gg-guard-last-good"};
    std::filesystem::path file_ = dir_ / "site.yaml";
    std::filesystem::path copy_ = dir_ / "last-good";
};

TEST_F(GuardLastGoodTest, a_broken_file_runs_on_the_copy_of_the_last_good_start) {
    write(
        "rules:\n  - id: SITE-0001\n    name: n\n    severity: notice\n"
        "    when: {gpu_held: true}\n");
    auto good = start();
    ASSERT_TRUE(good) << good.error().message;
    EXPECT_FALSE(good->rejected);
    EXPECT_TRUE(has_rule(good->policies, "SITE-0001"));

    write("rules:\n  - id: [SITE-0001\n");
    auto broken = start();
    ASSERT_TRUE(broken) << broken.error().message;
    ASSERT_TRUE(broken->rejected);
    EXPECT_NE(broken->rejected->message.find(file_.string() + ":"), std::string::npos)
        << broken->rejected->message;
    EXPECT_TRUE(has_rule(broken->policies, "SITE-0001"));
    EXPECT_TRUE(broken->running_on.starts_with("the last good correlation files (1 file(s)"))
        << broken->running_on;
}

TEST_F(GuardLastGoodTest, no_copy_or_a_tampered_one_runs_on_the_builtin_rules) {
    write(
        "rules:\n  - id: SITE-0001\n    name: n\n    severity: notice\n"
        "    when: {gpu_held: true}\n");
    ASSERT_TRUE(start());
    std::ofstream(copy_ / "0.yaml", std::ios::app) << "# changed behind the agent's back\n";
    write("rules: [\n");
    auto tampered = start();
    ASSERT_TRUE(tampered) << tampered.error().message;
    ASSERT_TRUE(tampered->rejected);
    EXPECT_FALSE(has_rule(tampered->policies, "SITE-0001"));
    EXPECT_TRUE(has_rule(tampered->policies, "GG-CORR-0001"));
    EXPECT_NE(tampered->running_on.find("built-in correlation rules alone"), std::string::npos);
    EXPECT_NE(tampered->running_on.find("checksum"), std::string::npos) << tampered->running_on;

    // Without a place for a copy, a broken file fails as it always did.
    EXPECT_FALSE(load_guard_policies_at_start({file_.string()}, ""));
}

}  // namespace
}  // namespace gpuguard::rules
