// The /proc lister and the hidden-process comparison
// (gpuguard/state/proc_listing.h). What a real hiding library does to
// libc's view is tested with the real agent in tests/bpf/hidden_process_test.cpp;
// here: the real /proc, threads and exited processes (never hidden), and
// where the hiding mechanism is looked for, in a fake tree.
#include "gpuguard/state/proc_listing.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpuguard::agent {
namespace {

namespace fs = std::filesystem;

bool has(const std::vector<uint32_t>& pids, uint32_t pid) {
    return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

TEST(ProcListingTest, both_views_of_the_real_proc_list_this_process) {
    const auto self = static_cast<uint32_t>(getpid());
    auto kernel = list_proc_pids("/proc");
    ASSERT_TRUE(kernel) << kernel.error().message;
    auto libc = libc_listed_pids("/proc");
    ASSERT_TRUE(libc) << libc.error().message;
    EXPECT_TRUE(has(*kernel, self));
    EXPECT_TRUE(has(*libc, self));
    EXPECT_TRUE(std::is_sorted(kernel->begin(), kernel->end()));
    EXPECT_TRUE(std::is_sorted(libc->begin(), libc->end()));
    EXPECT_FALSE(list_proc_fds("/proc", self).empty());
    EXPECT_TRUE(list_proc_fds("/proc", 0).empty());  // no such process: nothing, no failure
}

TEST(ProcListingTest, nothing_is_hidden_on_a_host_without_a_hiding_library) {
    HiddenProcessCheck check(HiddenCheckOptions{});
    auto hidden = check.run({static_cast<uint32_t>(getpid()), 1});
    ASSERT_TRUE(hidden) << hidden.error().message;
    EXPECT_TRUE(hidden->empty());
    EXPECT_EQ(check.checks(), 1u);
}

TEST(ProcListingTest, threads_and_exited_processes_the_table_knows_are_not_hidden) {
    // /proc/TID answers for a thread but is not listed: not a hidden process.
    uint32_t tid = 0;
    std::atomic<bool> stop{false};
    std::thread thread([&] {
        tid = static_cast<uint32_t>(syscall(SYS_gettid));
        while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    while (tid == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // A child that exited and was reaped: its pid is gone from /proc.
    const pid_t child = fork();
    if (child == 0) _exit(0);
    ASSERT_GT(child, 0);
    ASSERT_EQ(waitpid(child, nullptr, 0), child);
    ASSERT_TRUE(fs::exists("/proc/" + std::to_string(tid)));
    HiddenProcessCheck check(HiddenCheckOptions{});
    auto hidden = check.run({tid, static_cast<uint32_t>(child)});
    stop = true;
    thread.join();
    ASSERT_TRUE(hidden) << hidden.error().message;
    EXPECT_TRUE(hidden->empty());
}

TEST(ProcListingTest, a_proc_root_that_cannot_be_listed_fails_naming_it) {
    HiddenCheckOptions options;
    options.proc_root = "/nonexistent-proc";
    auto hidden = HiddenProcessCheck(options).run({});
    ASSERT_FALSE(hidden);
    EXPECT_NE(hidden.error().message.find("/nonexistent-proc"), std::string::npos);
}

class HidingMechanismTest : public ::testing::Test {
  protected:
    void SetUp() override {
        root_ = fs::temp_directory_path() / ("gg-hiding-" + std::to_string(getpid()));
        fs::remove_all(root_);
        fs::create_directories(root_ / "etc");
        fs::create_directories(root_ / "proc/self");
        fs::create_directories(root_ / "proc/77/root/etc");
        options_.proc_root = root_ / "proc";
        options_.etc_root = root_;
        options_.probe_self = false;
        options_.signal_probe = false;
    }
    void TearDown() override { fs::remove_all(root_); }
    void write(const fs::path& relative, const std::string& text) {
        std::ofstream(root_ / relative, std::ios::binary) << text;
    }
    fs::path root_;
    HiddenCheckOptions options_;
};

TEST_F(HidingMechanismTest, names_preload_files_and_ld_preload_of_agent_and_process) {
    write("etc/ld.so.preload", "/lib/libhide.so:/lib/other.so\n");
    write("proc/77/root/etc/ld.so.preload", "  /opt/c/libhide.so \n");
    write("proc/self/environ", std::string("HOME=/root\0LD_PRELOAD=/tmp/agent.so\0", 35));
    write("proc/77/environ", std::string("LD_PRELOAD=/tmp/a.so /tmp/b.so\0PATH=/bin\0", 41));
    HiddenProcess hidden;
    find_hiding_mechanism(options_, 77, hidden);
    EXPECT_EQ(hidden.libraries,
              (std::vector<std::string>{"/lib/libhide.so", "/lib/other.so", "/opt/c/libhide.so",
                                        "/tmp/agent.so", "/tmp/a.so", "/tmp/b.so"}));
    const auto mentions = [&](const std::string& text) {
        return std::any_of(hidden.mechanisms.begin(), hidden.mechanisms.end(),
                           [&](const std::string& line) { return line == text; });
    };
    EXPECT_TRUE(
        mentions("/etc/ld.so.preload (the agent's mount namespace) preloads /lib/libhide.so"));
    EXPECT_TRUE(mentions("/etc/ld.so.preload (the root of process 77) preloads /opt/c/libhide.so"));
    EXPECT_TRUE(mentions("LD_PRELOAD of the agent names /tmp/agent.so"));
    EXPECT_TRUE(mentions("LD_PRELOAD of process 77 names /tmp/b.so"));
}

TEST_F(HidingMechanismTest, finds_nothing_where_nothing_preloads) {
    write("proc/77/environ", std::string("PATH=/bin\0", 10));
    HiddenProcess hidden;
    find_hiding_mechanism(options_, 77, hidden);
    options_.probe_self = true;  // this test binary's own readdir is libc's
    find_hiding_mechanism(options_, 77, hidden);
    EXPECT_TRUE(hidden.libraries.empty());
    EXPECT_TRUE(hidden.mechanisms.empty());
}

}  // namespace
}  // namespace gpuguard::agent
