// Hot reload: a valid edit is active within a second; an invalid one is
// rejected, reported to the callback, and the previous set stays active.
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

#include "gpuguard/rules/rules.h"
#include "tests/rules/builtin_pack.h"
#include "tests/support/temp_dir.h"
#include "tests/support/time_bound.h"

namespace gpuguard::rules {
namespace {

using namespace std::chrono_literals;
using gpuguard::testing::TempDir;

// Writes a file the way editors do: a temporary file renamed over the target.
using gpuguard::testing::replace_file;

class RuleSetWatcherTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ASSERT_NE(builtin(), nullptr);
        paths_.main_file = dir_ / "miner-rules.yaml";
        paths_.drop_in_dir = dir_ / "rules.d";
        std::ofstream(paths_.main_file) << "rules:\n  - id: first\n    process_name: [alpha]\n";
        Callbacks callbacks;
        callbacks.on_reload = [this](std::shared_ptr<const RuleSet>) { notify(reloaded_); };
        callbacks.on_error = [this](const Error& error) {
            std::lock_guard lock(mutex_);
            errors_.push_back(error.message);
            ++rejected_;
            changed_.notify_all();
        };
        auto watcher = RuleSetWatcher::start(paths_, builtin(), callbacks, 50ms);
        ASSERT_TRUE(watcher.ok()) << watcher.error().message;
        watcher_ = std::move(watcher).value();
    }

    using Callbacks = RuleSetWatcher::Callbacks;

    void notify(int& counter) {
        std::lock_guard lock(mutex_);
        ++counter;
        changed_.notify_all();
    }
    bool wait_for(int& counter, int value, std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex_);
        return changed_.wait_for(lock, timeout, [&] { return counter >= value; });
    }
    bool active(std::string_view id) const { return watcher_->current()->find(id) != nullptr; }

    TempDir dir_;
    RulePaths paths_;
    std::unique_ptr<RuleSetWatcher> watcher_;
    std::mutex mutex_;
    std::condition_variable changed_;
    int reloaded_ = 0;
    int rejected_ = 0;
    std::vector<std::string> errors_;
};

TEST_F(RuleSetWatcherTest, starts_with_the_files_rules) {
    EXPECT_TRUE(active("first"));
    EXPECT_TRUE(active("GG-XMRIG-0001"));
}

TEST_F(RuleSetWatcherTest, a_valid_change_is_active_within_one_second) {
    const auto start = std::chrono::steady_clock::now();
    replace_file(paths_.main_file, "rules:\n  - id: second\n    process_name: [beta]\n");
    ASSERT_TRUE(wait_for(reloaded_, 1, 1000ms)) << "no reload within 1 s";
    EXPECT_LT(std::chrono::steady_clock::now() - start, gpuguard::testing::time_bound(1000ms));
    EXPECT_TRUE(active("second"));
    EXPECT_FALSE(active("first"));
    auto scanner = watcher_->current()->scanner();
    ASSERT_TRUE(scanner.ok());
    EXPECT_EQ(scanner->match(signatures::Field::kProcess, "beta"),
              std::vector<std::string_view>{"second"});
}

TEST_F(RuleSetWatcherTest, in_place_writes_and_drop_in_files_are_seen) {
    {
        std::ofstream out(paths_.main_file, std::ios::trunc);
        out << "signatures:\n  disable: [GG-XMRIG-0001]\n";
    }
    ASSERT_TRUE(wait_for(reloaded_, 1, 1000ms));
    EXPECT_FALSE(active("GG-XMRIG-0001"));
    // rules.d did not exist at start: creating it and a file in it is picked up.
    std::filesystem::create_directory(paths_.drop_in_dir);
    ASSERT_TRUE(wait_for(reloaded_, 2, 1000ms));
    std::ofstream(paths_.drop_in_dir / "10-extra.yaml")
        << "rules:\n  - id: extra\n    pool_ports: [1234]\n";
    ASSERT_TRUE(wait_for(reloaded_, 3, 1000ms));
    EXPECT_TRUE(active("extra"));
    std::ofstream(paths_.drop_in_dir / "notes.txt") << "ignored";
    EXPECT_FALSE(wait_for(reloaded_, 4, 300ms)) << "a non-.yaml file triggered a reload";
}

TEST_F(RuleSetWatcherTest, an_invalid_change_is_rejected_and_the_last_good_set_stays) {
    const auto before = watcher_->current();
    replace_file(paths_.main_file, "rules:\n  - id: broken\n    cmdline: ['(unclosed']\n");
    ASSERT_TRUE(wait_for(rejected_, 1, 1000ms)) << "the invalid change was not reported";
    EXPECT_EQ(watcher_->current(), before);
    EXPECT_TRUE(active("first"));
    EXPECT_FALSE(active("broken"));
    EXPECT_EQ(watcher_->rejected(), 1u);
    EXPECT_EQ(watcher_->reloads(), 0u);
    {
        std::lock_guard lock(mutex_);
        ASSERT_EQ(errors_.size(), 1u);
        EXPECT_NE(
            errors_[0].find(paths_.main_file.string() + ":3:15: rules[0] (broken).cmdline[0]: "
                                                        "bad regex '(unclosed'"),
            std::string::npos)
            << errors_[0];
    }
    // Fixing the file recovers.
    replace_file(paths_.main_file, "rules:\n  - id: fixed\n    cmdline: ['(closed)']\n");
    ASSERT_TRUE(wait_for(reloaded_, 1, 1000ms));
    EXPECT_TRUE(active("fixed"));
}

TEST(RuleSetWatcher, refuses_to_start_on_an_invalid_file) {
    TempDir dir;
    RulePaths paths{dir / "miner-rules.yaml", dir / "rules.d"};
    std::ofstream(paths.main_file) << "bogus: 1\n";
    auto watcher = RuleSetWatcher::start(paths, builtin(), {});
    ASSERT_FALSE(watcher.ok());
    EXPECT_NE(watcher.error().message.find("unknown key 'bogus'"), std::string::npos);
}

// A start never fails open: with a state directory, files that do not
// build start the watcher on the copy of the last files that did (kept at
// every good load), or on the built-in pack alone when there is none or the
// copy was tampered with; the reason is kept for the agent to report.
TEST(RuleSetWatcher, starts_on_the_last_good_files_when_the_given_ones_do_not_build) {
    TempDir dir;
    RulePaths paths{dir / "miner-rules.yaml", dir / "rules.d", dir / "state" / "last-good"};
    std::filesystem::create_directories(paths.drop_in_dir);
    std::ofstream(paths.main_file) << "rules:\n  - id: kept\n    process_name: [alpha]\n";
    std::ofstream(paths.drop_in_dir / "10-local.yaml")
        << "rules:\n  - id: local\n    process_name: [beta]\n";
    {
        auto good = RuleSetWatcher::start(paths, builtin(), {});
        ASSERT_TRUE(good.ok()) << good.error().message;
        EXPECT_FALSE((*good)->start_error());
        EXPECT_EQ((*good)->started_on(), "");
    }
    // One line of bad YAML, then a restart.
    std::ofstream(paths.main_file) << "rules:\n  - id: [broken\n";
    {
        auto started = RuleSetWatcher::start(paths, builtin(), {});
        ASSERT_TRUE(started.ok()) << started.error().message;
        const RuleSetWatcher& watcher = **started;
        ASSERT_TRUE(watcher.start_error());
        EXPECT_NE(watcher.start_error()->message.find("miner-rules.yaml:3:1: YAML syntax error"),
                  std::string::npos)
            << watcher.start_error()->message;
        EXPECT_EQ(watcher.started_on(), "the last good rule set (2 file(s) kept in " +
                                            paths.last_good_dir.string() + ")");
        EXPECT_NE(watcher.current()->find("kept"), nullptr);
        EXPECT_NE(watcher.current()->find("local"), nullptr);
        EXPECT_NE(watcher.current()->find("GG-XMRIG-0001"), nullptr);
    }
    // A copy changed behind the agent's back is refused: the built-in pack alone.
    std::ofstream(paths.last_good_dir / "0.yaml", std::ios::app) << "# edited\n";
    {
        auto started = RuleSetWatcher::start(paths, builtin(), {});
        ASSERT_TRUE(started.ok()) << started.error().message;
        EXPECT_TRUE((*started)->started_on().starts_with("the built-in pack alone ("))
            << (*started)->started_on();
        EXPECT_NE((*started)->started_on().find("checksum does not match"), std::string::npos);
        EXPECT_EQ((*started)->current()->find("kept"), nullptr);
        EXPECT_NE((*started)->current()->find("GG-XMRIG-0001"), nullptr);
    }
    // No copy at all (a first start on a broken file): the built-in pack alone.
    std::filesystem::remove_all(paths.last_good_dir);
    auto started = RuleSetWatcher::start(paths, builtin(), {});
    ASSERT_TRUE(started.ok()) << started.error().message;
    EXPECT_TRUE((*started)->started_on().starts_with("the built-in pack alone (no last good"))
        << (*started)->started_on();
}

TEST(RuleSetWatcher, a_good_reload_replaces_the_kept_copy) {
    TempDir dir;
    RulePaths paths{dir / "miner-rules.yaml", dir / "rules.d", dir / "last-good"};
    std::ofstream(paths.main_file) << "rules:\n  - id: first\n    process_name: [alpha]\n";
    std::mutex mutex;
    std::condition_variable changed;
    int reloads = 0;
    RuleSetWatcher::Callbacks callbacks;
    callbacks.on_reload = [&](std::shared_ptr<const RuleSet>) {
        std::lock_guard lock(mutex);
        ++reloads;
        changed.notify_all();
    };
    auto watcher = RuleSetWatcher::start(paths, builtin(), callbacks, 50ms);
    ASSERT_TRUE(watcher.ok()) << watcher.error().message;
    replace_file(paths.main_file, "rules:\n  - id: second\n    process_name: [gamma]\n");
    {
        std::unique_lock lock(mutex);
        ASSERT_TRUE(changed.wait_for(lock, gpuguard::testing::time_bound(2000ms),
                                     [&] { return reloads >= 1; }));
    }
    watcher->reset();
    std::ofstream(paths.main_file) << "bogus: 1\n";
    auto restarted = RuleSetWatcher::start(paths, builtin(), {});
    ASSERT_TRUE(restarted.ok());
    EXPECT_NE((*restarted)->current()->find("second"), nullptr);
    EXPECT_EQ((*restarted)->current()->find("first"), nullptr);
}

}  // namespace
}  // namespace gpuguard::rules

namespace gpuguard::rules {
namespace {

// kubelet's AtomicWriter, as it writes a ConfigMap volume: the files are
// symlinks through `..data`, itself a symlink to a timestamped directory;
// an update writes a new directory and renames a new `..data_tmp` link
// over `..data` (the files' own links never change).
void write_configmap_generation(const std::filesystem::path& volume, const std::string& generation,
                                const std::string& rules) {
    namespace fs = std::filesystem;
    const fs::path data = volume / generation;
    fs::create_directories(data);
    std::ofstream(data / "miner-rules.yaml") << rules;
    fs::create_symlink(generation, volume / "..data_tmp");
    fs::rename(volume / "..data_tmp", volume / "..data");
    if (!fs::is_symlink(volume / "miner-rules.yaml")) {
        fs::create_symlink("..data/miner-rules.yaml", volume / "miner-rules.yaml");
    }
}

TEST(RuleSetWatcherConfigMap, a_configmap_update_is_reloaded) {
    namespace fs = std::filesystem;
    TempDir volume;
    write_configmap_generation(volume.path(), "..2026_11_28_17_00_00.1",
                               "rules:\n  - id: first\n    process_name: [alpha]\n");
    const RulePaths paths{volume / "miner-rules.yaml", volume / "rules.d"};
    auto started = RuleSetWatcher::start(paths, builtin(), {}, 50ms);
    ASSERT_TRUE(started.ok()) << started.error().message;
    const RuleSetWatcher& watcher = **started;
    ASSERT_NE(watcher.current()->find("first"), nullptr);

    write_configmap_generation(volume.path(), "..2026_11_28_17_01_00.2",
                               "rules:\n  - id: second\n    process_name: [beta]\n");
    fs::remove_all(volume / "..2026_11_28_17_00_00.1");
    const auto deadline = std::chrono::steady_clock::now() + 2s;
    while (watcher.reloads() == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(watcher.reloads(), 1u) << "the ..data swap was not seen";
    EXPECT_NE(watcher.current()->find("second"), nullptr);
    EXPECT_EQ(watcher.current()->find("first"), nullptr);
}

}  // namespace
}  // namespace gpuguard::rules
