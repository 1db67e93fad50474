// GuardPolicyWatcher: hot reload of `rules.correlation_files`. A change to a
// watched file (in place or written and renamed, as editors do) reloads
// every file; a broken change is reported and changes nothing; other files
// in the same directory are ignored.
#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>

#include <gtest/gtest.h>

#include "gpuguard/rules/correlation.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::rules {
namespace {

using namespace std::chrono_literals;
using gpuguard::testing::TempDir;

using gpuguard::testing::replace_file;

std::string rule_file(const std::string& id) {
    return "rules:\n  - id: " + id +
           "\n    name: n\n    severity: notice\n    when: {gpu_held: true}\n";
}

class GuardPolicyWatcherTest : public ::testing::Test {
  protected:
    void SetUp() override {
        guard_ = dir_ / "guard.yaml";
        std::ofstream(guard_) << rule_file("SITE-FIRST");
        GuardPolicyWatcher::Callbacks callbacks;
        callbacks.on_reload = [this](GuardPolicies policies) {
            std::lock_guard lock(mutex_);
            last_ = std::move(policies);
            ++reloaded_;
            changed_.notify_all();
        };
        callbacks.on_error = [this](const Error& error) {
            std::lock_guard lock(mutex_);
            errors_.push_back(error.message);
            changed_.notify_all();
        };
        auto watcher = GuardPolicyWatcher::start({guard_.string()}, callbacks, 50ms);
        ASSERT_TRUE(watcher) << watcher.error().message;
        watcher_ = std::move(watcher).value();
    }

    bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, timeout, done);
    }
    bool has_rule(const std::string& id) {
        std::lock_guard lock(mutex_);
        return std::any_of(last_.rules.begin(), last_.rules.end(),
                           [&](const CorrelationRule& rule) { return rule.id == id; });
    }

    TempDir dir_;
    std::filesystem::path guard_;
    std::unique_ptr<GuardPolicyWatcher> watcher_;
    std::mutex mutex_;
    std::condition_variable changed_;
    int reloaded_ = 0;
    GuardPolicies last_;
    std::vector<std::string> errors_;
};

TEST_F(GuardPolicyWatcherTest, a_changed_policy_file_is_reloaded_with_its_priorities) {
    replace_file(guard_, rule_file("SITE-SECOND") +
                             "priority_guard:\n  processes: [{comm: [train], priority: 9}]\n");
    ASSERT_TRUE(wait_for([&] { return reloaded_ >= 1; }, 2000ms)) << "no reload";
    EXPECT_TRUE(has_rule("SITE-SECOND"));
    EXPECT_FALSE(has_rule("SITE-FIRST"));
    EXPECT_TRUE(has_rule("GG-CORR-0001")) << "the built-in rules stay under the file's";
    {
        std::lock_guard lock(mutex_);
        ASSERT_TRUE(last_.priority);
        EXPECT_EQ(last_.priority->processes.at(0).priority, 9);
    }
    // In place, as `echo >>` does.
    std::ofstream(guard_, std::ios::trunc) << rule_file("SITE-THIRD");
    ASSERT_TRUE(wait_for([&] { return reloaded_ >= 2; }, 2000ms)) << "in-place write not seen";
    EXPECT_TRUE(has_rule("SITE-THIRD"));
    {
        std::lock_guard lock(mutex_);
        EXPECT_FALSE(last_.priority) << "the section was removed: priorities off";
    }
    EXPECT_EQ(watcher_->reloads(), 2u);
}

TEST_F(GuardPolicyWatcherTest, a_broken_change_is_reported_and_other_files_are_ignored) {
    std::ofstream(dir_ / "notes.yaml") << "not: watched\n";
    EXPECT_FALSE(wait_for([&] { return reloaded_ + static_cast<int>(errors_.size()) > 0; }, 300ms))
        << "a file that is not a policy file triggered a reload";
    replace_file(guard_,
                 "rules:\n  - id: SITE-BROKEN\n    name: b\n    severity: loud\n"
                 "    when: {gpu_held: true}\n");
    ASSERT_TRUE(wait_for([&] { return !errors_.empty(); }, 2000ms)) << "the rejection not reported";
    {
        std::lock_guard lock(mutex_);
        EXPECT_NE(errors_[0].find(guard_.string() + ":4:15: rules[0] (SITE-BROKEN).severity: "
                                                    "unknown severity 'loud'"),
                  std::string::npos)
            << errors_[0];
        EXPECT_EQ(reloaded_, 0) << "a rejected change must not be applied";
    }
    EXPECT_EQ(watcher_->rejected(), 1u);
    replace_file(guard_, rule_file("SITE-FIXED"));
    ASSERT_TRUE(wait_for([&] { return reloaded_ >= 1; }, 2000ms));
    EXPECT_TRUE(has_rule("SITE-FIXED"));
}

// An override is applied at every reload; one that names no known rule is
// a rejected change like a parse error, and the last good rules stay.
TEST_F(GuardPolicyWatcherTest, an_override_reloads_and_a_bad_one_is_rejected) {
    replace_file(guard_, "rules:\n  - id: GG-CORR-0013\n    override: {dry_run: true}\n");
    ASSERT_TRUE(wait_for([&] { return reloaded_ >= 1; }, 2000ms)) << "no reload";
    const auto dry_run_of = [&](const std::string& id) {
        std::lock_guard lock(mutex_);
        return std::find_if(last_.rules.begin(), last_.rules.end(),
                            [&](const auto& rule) { return rule.id == id; })
            ->dry_run;
    };
    EXPECT_TRUE(dry_run_of("GG-CORR-0013"));
    EXPECT_FALSE(dry_run_of("GG-CORR-0012"));
    replace_file(guard_, "rules:\n  - id: GG-CORR-0113\n    override: {dry_run: true}\n");
    ASSERT_TRUE(wait_for([&] { return !errors_.empty(); }, 2000ms)) << "the rejection not reported";
    {
        std::lock_guard lock(mutex_);
        EXPECT_NE(errors_[0].find(guard_.string() + ":2: GG-CORR-0113.override: no rule " +
                                  "GG-CORR-0113 to override"),
                  std::string::npos)
            << errors_[0];
        EXPECT_EQ(reloaded_, 1) << "a rejected change must not be applied";
    }
    EXPECT_EQ(watcher_->rejected(), 1u);
}

// A correlation file in a Kubernetes ConfigMap volume (the Helm chart's
// correlationRules): kubelet updates it by swapping the `..data` link, the
// file's own link never changes, and the update is reloaded.
TEST(GuardPolicyWatcher, a_configmap_update_is_reloaded) {
    namespace fs = std::filesystem;
    TempDir volume;
    const auto generation = [&](const std::string& name, const std::string& id) {
        fs::create_directories(volume / name);
        std::ofstream(volume / name / "correlation.yaml") << rule_file(id);
        fs::create_symlink(name, volume / "..data_tmp");
        fs::rename(volume / "..data_tmp", volume / "..data");
        if (!fs::is_symlink(volume / "correlation.yaml")) {
            fs::create_symlink("..data/correlation.yaml", volume / "correlation.yaml");
        }
    };
    generation("..2026_11_29_11_00_00.1", "SITE-FIRST");
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::string> ids;
    GuardPolicyWatcher::Callbacks callbacks;
    callbacks.on_reload = [&](GuardPolicies policies) {
        std::lock_guard lock(mutex);
        for (const auto& rule : policies.rules) ids.push_back(rule.id);
        changed.notify_all();
    };
    auto watcher =
        GuardPolicyWatcher::start({(volume / "correlation.yaml").string()}, callbacks, 50ms);
    ASSERT_TRUE(watcher) << watcher.error().message;

    generation("..2026_11_29_11_01_00.2", "SITE-SECOND");
    fs::remove_all(volume / "..2026_11_29_11_00_00.1");
    std::unique_lock lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, 2s, [&] { return !ids.empty(); }))
        << "the ..data swap was not seen";
    EXPECT_NE(std::find(ids.begin(), ids.end(), "SITE-SECOND"), ids.end());
    EXPECT_EQ(std::find(ids.begin(), ids.end(), "SITE-FIRST"), ids.end());
}

TEST(GuardPolicyWatcher, without_files_it_watches_nothing_and_a_missing_directory_fails) {
    auto idle = GuardPolicyWatcher::start({}, {});
    ASSERT_TRUE(idle) << idle.error().message;
    EXPECT_EQ((*idle)->reloads(), 0u);
    auto missing = GuardPolicyWatcher::start({"/nonexistent-gpuguard-dir/guard.yaml"}, {});
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("cannot watch /nonexistent-gpuguard-dir"),
              std::string::npos)
        << missing.error().message;
}

}  // namespace
}  // namespace gpuguard::rules
