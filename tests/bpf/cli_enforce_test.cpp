// gpuguard kill, free and block as an admin runs them: kill and free act on
// children the test started (free through a fake /proc that lists only
// them), block changes nftables only inside a network namespace the test
// created, where another table must stay as it was.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/child_process.h"
#include "tests/support/netns.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::CommandResult;
using gpuguard::testing::NetnsScope;
using gpuguard::testing::RequestChild;
using gpuguard::testing::run_command;
using gpuguard::testing::TempDir;
using gpuguard::testing::without_gpuguard_table;
using Clock = std::chrono::steady_clock;

std::string describe(const CommandResult& result) {
    return "exit " + std::to_string(result.exit_code) + "\n" + result.stdout_text +
           result.stderr_text;
}

// The output line about `pid` ("kill pid N (comm): outcome: reason"), or "".
std::string line_about(const std::string& output, pid_t pid) {
    const auto at = output.find("kill pid " + std::to_string(pid) + " (");
    if (at == std::string::npos) return "";
    return output.substr(at, output.find('\n', at) - at);
}

// A child the test started, its SIGTERM disposition set, that waits.
class Target {
  public:
    explicit Target(bool ignores_term)
        : child_([](char) { return 0; },
                 [ignores_term] {
                     if (ignores_term) signal(SIGTERM, SIG_IGN);
                 }) {}
    pid_t pid() const { return child_.pid(); }
    std::string pid_text() const { return std::to_string(child_.pid()); }
    // The signal that ended it (reaps), or 0 while it runs or when it exited.
    int termination_signal() {
        const auto status = child_.try_reap();
        return status && WIFSIGNALED(*status) ? WTERMSIG(*status) : 0;
    }

  private:
    RequestChild child_;
};

TEST(CliEnforce, kill_with_timeout_sigkills_a_child_ignoring_sigterm_after_the_timeout) {
    GG_REQUIRE_PRIVILEGED();
    Target stubborn(true);
    const auto started = Clock::now();
    const auto killed =
        run_command({GPUGUARD_BINARY, "kill", stubborn.pid_text(), "--timeout", "0.4"}, 30s);
    const auto took = Clock::now() - started;
    ASSERT_EQ(killed.exit_code, 0) << describe(killed);
    EXPECT_NE(line_about(killed.stdout_text, stubborn.pid()).find("success: SIGKILL after 400 ms"),
              std::string::npos)
        << describe(killed);
    EXPECT_GE(took, 400ms) << "SIGKILL before the timeout";
    EXPECT_EQ(stubborn.termination_signal(), SIGKILL);

    Target polite(false);
    const auto terminated =
        run_command({GPUGUARD_BINARY, "kill", polite.pid_text(), "--timeout", "5"}, 30s);
    ASSERT_EQ(terminated.exit_code, 0) << describe(terminated);
    EXPECT_NE(line_about(terminated.stdout_text, polite.pid()).find("success: exited on SIGTERM"),
              std::string::npos)
        << describe(terminated);
    EXPECT_EQ(polite.termination_signal(), SIGTERM);

    const auto init = run_command({GPUGUARD_BINARY, "kill", "1", "--timeout", "1"}, 30s);
    EXPECT_EQ(init.exit_code, 3) << describe(init);
    EXPECT_NE(init.stdout_text.find("withheld: pid 1 (init) is never acted on"), std::string::npos)
        << describe(init);
}

// `gpuguard free --device MAJOR:MINOR` finds the holders in
// backends.proc_root: here a fake /proc whose fd links name the test's node
// for two of the test's children only, so no other process of the host can
// be taken. Both go at once, each graceful then forced; a third child that
// holds no GPU is left alone.
TEST(CliEnforce, free_kills_every_holder_of_the_device_and_no_one_else) {
    GG_REQUIRE_PRIVILEGED();
    TempDir dir("gg-free");
    const auto node = dir / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0600, makedev(1, 7)), 0);
    std::ofstream(dir / "plain") << "not a device";
    Target stubborn(true), polite(false), bystander(false);
    const auto proc = dir / "proc";
    for (const auto* target : {&stubborn, &polite, &bystander}) {
        std::filesystem::create_directories(proc / target->pid_text() / "fd");
        std::filesystem::create_symlink(target == &bystander ? dir / "plain" : node,
                                        proc / target->pid_text() / "fd" / "5");
    }
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n"
                          << "backends:\n  proc_root: " << proc.string() << "\n";

    // Without the configuration 1:7 is no GPU's number: refused.
    const auto refused = run_command({GPUGUARD_BINARY, "free", "--device", "1:7"}, 30s);
    EXPECT_EQ(refused.exit_code, 2) << describe(refused);
    EXPECT_NE(refused.stderr_text.find("not a GPU device number"), std::string::npos)
        << describe(refused);

    const auto started = Clock::now();
    const auto freed = run_command({GPUGUARD_BINARY, "free", "--device", "1:7", "--timeout", "0.3",
                                    "--config", config.string()},
                                   30s);
    const auto took = Clock::now() - started;
    ASSERT_EQ(freed.exit_code, 0) << describe(freed);
    EXPECT_NE(line_about(freed.stdout_text, stubborn.pid()).find("success: SIGKILL after 300 ms"),
              std::string::npos)
        << describe(freed);
    EXPECT_NE(line_about(freed.stdout_text, polite.pid()).find("success: exited on SIGTERM"),
              std::string::npos)
        << describe(freed);
    EXPECT_EQ(freed.stdout_text.find(bystander.pid_text()), std::string::npos) << describe(freed);
    EXPECT_LT(took, 5s) << "holders are taken at once, not one grace period each";
    EXPECT_EQ(stubborn.termination_signal(), SIGKILL);
    EXPECT_EQ(polite.termination_signal(), SIGTERM);
    EXPECT_EQ(bystander.termination_signal(), 0) << "a process without the GPU was taken";
}

std::string ruleset() { return run_command({"/usr/sbin/nft", "list", "ruleset"}).stdout_text; }

// The block verbs in a network namespace the test created, next to another
// table: only table inet gpuguard changes, and flush --all leaves exactly
// what was there before. The host's ruleset is compared too.
TEST(CliEnforce, block_add_list_remove_flush_all_change_only_the_gpuguard_table) {
    GG_REQUIRE_PRIVILEGED();
    const std::string host_before = ruleset();
    {
        NetnsScope netns;
        ASSERT_EQ(netns.error(), "");
        const auto other = run_command(
            {"/usr/sbin/nft",
             "add table ip other; add chain ip other out { type filter hook output priority 10; "
             "policy accept; }; add rule ip other out tcp dport 9 counter"});
        ASSERT_EQ(other.exit_code, 0) << describe(other);
        const std::string before = ruleset();
        const auto block = [](std::vector<std::string> arguments) {
            arguments.insert(arguments.begin(), {GPUGUARD_BINARY, "block"});
            return run_command(arguments, 30s);
        };
        const auto listed = [&] {
            const auto result = block({"list", "--json"});
            EXPECT_EQ(result.exit_code, 0) << describe(result);
            return nlohmann::json::parse(result.stdout_text);
        };

        EXPECT_EQ(listed(), nlohmann::json::array()) << "no table yet: nothing blocked";
        ASSERT_EQ(block({"add", "198.51.100.7", "--ttl", "600"}).exit_code, 0);
        ASSERT_EQ(block({"add", "198.51.100.7", "--ttl", "600"}).exit_code, 0) << "idempotent";
        ASSERT_EQ(block({"add", "2001:db8::7"}).exit_code, 0);
        const auto bad = block({"add", "198.51.100.7; delete table ip other"});
        EXPECT_EQ(bad.exit_code, 1) << describe(bad);
        auto entries = listed();
        ASSERT_EQ(entries.size(), 2u) << entries.dump();
        EXPECT_EQ(entries[0]["ip"], "198.51.100.7");
        EXPECT_EQ(entries[0]["timeout_s"], 600);
        EXPECT_EQ(entries[1]["ip"], "2001:db8::7");
        EXPECT_EQ(entries[1]["timeout_s"], 3600) << "enforcement.block_ttl_s by default";
        const auto table = block({"list"});
        EXPECT_NE(table.stdout_text.find("198.51.100.7"), std::string::npos) << describe(table);
        const std::string during = ruleset();
        EXPECT_NE(during.find("table inet gpuguard"), std::string::npos) << during;
        EXPECT_EQ(without_gpuguard_table(during), without_gpuguard_table(before)) << during;

        ASSERT_EQ(block({"remove", "198.51.100.7"}).exit_code, 0);
        const auto again = block({"remove", "198.51.100.7"});
        EXPECT_EQ(again.exit_code, 0) << describe(again);
        EXPECT_NE(again.stdout_text.find("198.51.100.7 was not blocked"), std::string::npos)
            << describe(again);
        entries = listed();
        ASSERT_EQ(entries.size(), 1u) << entries.dump();
        EXPECT_EQ(entries[0]["ip"], "2001:db8::7");

        ASSERT_EQ(block({"flush"}).exit_code, 0);
        EXPECT_EQ(listed(), nlohmann::json::array());
        EXPECT_NE(ruleset().find("table inet gpuguard"), std::string::npos)
            << "flush keeps the table";
        ASSERT_EQ(block({"flush", "--all"}).exit_code, 0);
        EXPECT_EQ(ruleset(), before) << "flush --all leaves exactly what was there";
        EXPECT_EQ(block({"flush", "--all"}).exit_code, 0) << "no table: still fine";
    }
    EXPECT_EQ(ruleset(), host_before) << "the host's ruleset changed";
}

}  // namespace
