// A command line the exec record cut short, read again: whether the read
// continues the exec's bytes, its bound, and a live process's /proc; the
// process table takes only a read that continues its exec.
#include "gpuguard/state/command_line.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "gpuguard/state/process_table.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace std::string_literals;

TEST(CommandLine, a_read_that_continues_the_exec_record_extends_it) {
    const std::string bytes = "/bin/miner\0--title=xxxx\0-o\0pool:3333\0"s;
    // Cut inside an argument, and right after a NUL.
    auto read = full_cmdline_of(bytes, {"/bin/miner", "--title=xx"});
    EXPECT_TRUE(read.extends_exec);
    EXPECT_FALSE(read.truncated);
    EXPECT_EQ(read.argv,
              (std::vector<std::string>{"/bin/miner", "--title=xxxx", "-o", "pool:3333"}));
    EXPECT_TRUE(full_cmdline_of(bytes, {"/bin/miner", "--title=xxxx"}).extends_exec);
    // Rewritten since (setproctitle), or another image's.
    EXPECT_FALSE(full_cmdline_of("nginx: worker process\0"s, {"/usr/sbin/nginx"}).extends_exec);
    EXPECT_FALSE(full_cmdline_of(bytes, {"/bin/other"}).extends_exec);
    EXPECT_FALSE(full_cmdline_of(bytes, {}).extends_exec) << "nothing copied continues nothing";
    // Empty arguments stay.
    EXPECT_EQ(full_cmdline_of("a\0\0b\0"s, {"a"}).argv, (std::vector<std::string>{"a", "", "b"}));
}

TEST(CommandLine, a_read_over_the_bound_is_its_start) {
    const std::string bytes = "/bin/x\0"s + std::string(100, 'p') + '\0' + "-o\0pool\0"s;
    const auto read = full_cmdline_of(bytes, {"/bin/x", "ppp"}, 50);
    EXPECT_TRUE(read.truncated);
    EXPECT_TRUE(read.extends_exec);
    ASSERT_EQ(read.argv.size(), 2u);
    EXPECT_EQ(read.argv[1], std::string(43, 'p'));
}

TEST(CommandLine, a_live_process_is_read_from_proc_and_a_gone_one_is_not) {
    testing::TempDir dir("gg-cmdline");
    const std::string padding(3000, 'p');
    const pid_t pid = testing::spawn_process(GPUGUARD_IDLE_PROCESS,
                                             {"worker", padding, "-o", "pool:3333"}, dir.path());
    ASSERT_GT(pid, 0) << std::strerror(errno);
    {
        testing::ChildReaper reap(pid);
        const auto read = read_full_cmdline(static_cast<uint32_t>(pid), {"worker", "ppp"});
        ASSERT_TRUE(read);
        EXPECT_TRUE(read->extends_exec);
        EXPECT_EQ(read->argv, (std::vector<std::string>{"worker", padding, "-o", "pool:3333"}));
        EXPECT_FALSE(read_full_cmdline(static_cast<uint32_t>(pid), {"worker"}, "/nonexistent"));
    }
}

TEST(CommandLineInTable, the_table_takes_only_a_read_that_continues_its_exec) {
    ProcessTableOptions options;
    options.read_host = false;
    ProcessTable table(options, [](uint32_t, uint32_t) { return false; });
    const TaskInfo task{77, 77, 1, 1000, 1000, 1, "miner"};
    table.apply(Event{
        1, task, Exec{"/bin/miner", {"/bin/miner", "--t"}, /*argv_truncated=*/true, false, 77}});
    table.apply(Event{2, task, ProcessCmdline{{"other"}, false, false}});
    EXPECT_EQ(table.find(77)->cmdline, (std::vector<std::string>{"/bin/miner", "--t"}));
    EXPECT_TRUE(table.find(77)->cmdline_truncated);
    table.apply(Event{3, task, ProcessCmdline{{"/bin/miner", "--title", "-o", "p"}, false, true}});
    EXPECT_EQ(table.find(77)->cmdline,
              (std::vector<std::string>{"/bin/miner", "--title", "-o", "p"}));
    EXPECT_FALSE(table.find(77)->cmdline_truncated);
    // A read for a pid the table does not know makes no entry.
    table.apply(Event{4, TaskInfo{78, 78, 1, 0, 0, 1, "x"}, ProcessCmdline{{"x"}, false, true}});
    EXPECT_EQ(table.find(78), nullptr);
}

}  // namespace
}  // namespace gpuguard::agent
