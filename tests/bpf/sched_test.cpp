// Process lifecycle: exec with bounded argv, fork parentage, exit status;
// and drop accounting when the ring buffer overflows.
#include <ctime>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/child_process.h"
#include "tests/support/netns.h"
#include "tests/support/privileged.h"
#include "tests/support/sensor_harness.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::run_in_child;
using gpuguard::testing::SensorHarness;

class SchedTracingTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        SensorOptions options = gpuguard::testing::test_sensor_options();
        options.config.argv_max_bytes = 64;
        const auto error = harness_.open(options);
        ASSERT_FALSE(error) << *error;
    }
    SensorHarness harness_;
};

TEST_F(SchedTracingTest, exec_keeps_argv_up_to_the_bound_and_flags_truncation) {
    const std::string long_arg(200, 'x');
    const pid_t child = run_in_child("gg-exec", [&] {
        execl("/bin/sh", "sh", "-c", "exit 7", long_arg.c_str(), static_cast<char*>(nullptr));
        return 127;
    });
    const auto execs = harness_.of<Exec>(child, 1);
    ASSERT_EQ(execs.size(), 1u);
    const Exec& exec = execs[0].second;
    EXPECT_EQ(exec.filename, "/bin/sh");
    EXPECT_TRUE(exec.argv_truncated);
    // argv as NUL-separated bytes, cut at exactly 64.
    const std::string full =
        std::string("sh") + '\0' + "-c" + '\0' + "exit 7" + '\0' + long_arg + '\0';
    std::string kept;
    for (size_t i = 0; i < exec.argv.size(); ++i)
        kept += exec.argv[i] + (i + 1 < exec.argv.size() ? std::string(1, '\0') : "");
    EXPECT_EQ(kept, full.substr(0, 64));
    ASSERT_EQ(exec.argv.size(), 4u);
    EXPECT_EQ(exec.argv[0], "sh");
    EXPECT_EQ(exec.argv[2], "exit 7");
    EXPECT_EQ(exec.argv[3], long_arg.substr(0, 64 - 13));
    EXPECT_EQ(execs[0].first.task.comm, "sh");

    const auto exits = harness_.of<Exit>(child, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].second.exit_code(), 7);
    EXPECT_EQ(exits[0].second.signal(), 0);
    EXPECT_FALSE(exits[0].second.held_gpu);
}

// The task identity every event carries: uid and gid after setuid/setgid,
// and the cgroup v2 id of the cgroup the process moved itself into (the
// cgroup directory's inode number).
TEST_F(SchedTracingTest, exec_carries_uid_gid_and_cgroup_id) {
    gpuguard::testing::TestCgroup cgroup("gg-sched");
    ASSERT_EQ(cgroup.error(), "");
    struct stat cgroup_dir {};
    ASSERT_EQ(stat(cgroup.dir().c_str(), &cgroup_dir), 0);
    const std::string procs = cgroup.dir() + "/cgroup.procs";
    const pid_t child = run_in_child("gg-exec", [&] {
        const int fd = open(procs.c_str(), O_WRONLY);
        if (fd < 0 || write(fd, "0", 1) != 1) return 1;  // "0": the writer itself
        close(fd);
        if (setgid(65533) != 0 || setuid(65534) != 0) return 2;
        execl("/bin/true", "true", static_cast<char*>(nullptr));
        return 127;
    });
    const auto execs = harness_.of<Exec>(child, 1);
    ASSERT_EQ(execs.size(), 1u);
    const TaskInfo& task = execs[0].first.task;
    EXPECT_EQ(task.uid, 65534u);
    EXPECT_EQ(task.gid, 65533u);
    EXPECT_EQ(task.cgroup_id, static_cast<uint64_t>(cgroup_dir.st_ino));
    EXPECT_NE(task.cgroup_id, 1u) << "not the root cgroup";
    EXPECT_EQ(task.ppid, static_cast<uint32_t>(getpid()));
}

TEST_F(SchedTracingTest, short_argv_is_complete) {
    const pid_t child = run_in_child("gg-exec", [&] {
        execl("/bin/true", "true", "a", "b c", static_cast<char*>(nullptr));
        return 127;
    });
    const auto execs = harness_.of<Exec>(child, 1);
    ASSERT_EQ(execs.size(), 1u);
    EXPECT_FALSE(execs[0].second.argv_truncated);
    EXPECT_EQ(execs[0].second.argv, (std::vector<std::string>{"true", "a", "b c"}));
}

TEST_F(SchedTracingTest, fork_names_parent_and_child_and_threads_are_not_processes) {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const auto boottime_ns = [] {
        timespec now{};
        clock_gettime(CLOCK_BOOTTIME, &now);
        return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull +
               static_cast<uint64_t>(now.tv_nsec);
    };
    const uint64_t before_ns = boottime_ns();
    const pid_t parent = run_in_child("gg-fork", [&] {
        const pid_t grandchild = fork();
        if (grandchild == 0) _exit(3);
        (void)!write(pipe_fds[1], &grandchild, sizeof(grandchild));
        int status = 0;
        waitpid(grandchild, &status, 0);
        return 0;
    });
    pid_t grandchild = 0;
    ASSERT_EQ(read(pipe_fds[0], &grandchild, sizeof(grandchild)),
              static_cast<ssize_t>(sizeof(grandchild)));
    close(pipe_fds[0]);
    close(pipe_fds[1]);

    const auto forks = harness_.of<Fork>(parent, 1);
    ASSERT_EQ(forks.size(), 1u);
    EXPECT_EQ(forks[0].second.child_pid, static_cast<uint32_t>(grandchild));
    EXPECT_EQ(forks[0].first.task.comm, "gg-fork");
    EXPECT_FALSE(forks[0].second.inherited_gpu);
    // The child's start, on the clock /proc/PID/stat counts it in.
    EXPECT_GE(forks[0].second.child_start_ns, before_ns);
    EXPECT_LE(forks[0].second.child_start_ns, boottime_ns());
    const auto exits = harness_.of<Exit>(grandchild, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].second.exit_code(), 3);
    EXPECT_EQ(exits[0].first.task.ppid, static_cast<uint32_t>(parent));

    // The test process itself forks threads (gtest does not, so make one): no fork event.
    const auto before = harness_.matching<Fork>(getpid()).size();
    std::thread([] {}).join();
    harness_.drain(std::chrono::milliseconds(200));
    EXPECT_EQ(harness_.matching<Fork>(getpid()).size(), before);
}

TEST_F(SchedTracingTest, death_by_signal_is_reported) {
    const pid_t child = run_in_child("gg-killed", [] {
        raise(SIGKILL);
        return 0;
    });
    const auto exits = harness_.of<Exit>(child, 1);
    ASSERT_EQ(exits.size(), 1u);
    EXPECT_EQ(exits[0].second.signal(), SIGKILL);
}

// A deliberately tiny ring buffer (one page) overflows while nobody polls:
// every gpu_open is either delivered or counted as dropped, exactly.
TEST(RingBufferDrops, overflow_is_counted_exactly_and_the_sensor_keeps_running) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir dir("gg-drops");
    const std::string node = (dir / "full").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    SensorHarness harness;
    SensorOptions options = gpuguard::testing::test_sensor_options();
    options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "test"}};
    options.config.ring_buffer_kb = static_cast<uint32_t>(sysconf(_SC_PAGESIZE) / 1024);
    const auto error = harness.open(options);
    ASSERT_FALSE(error) << *error;

    constexpr int kOpens = 2000;
    int exit_code = -1;
    const pid_t child = run_in_child(
        "gg-burst",
        [&] {
            for (int i = 0; i < kOpens; ++i) {
                const int fd = open(node.c_str(), O_RDONLY);
                if (fd < 0) return 1;
                close(fd);
            }
            return 0;
        },
        &exit_code);
    ASSERT_EQ(exit_code, 0);
    harness.drain(std::chrono::milliseconds(300));
    const auto [emitted, dropped] = harness.kernel_counts("gpu_open");
    EXPECT_GT(dropped, 0u) << "a one-page ring must overflow";
    EXPECT_EQ(emitted + dropped, static_cast<uint64_t>(kOpens));
    EXPECT_EQ(harness.matching<GpuOpen>(child).size(), emitted) << "every emitted one delivered";
    EXPECT_EQ(harness.sensor().stats().total_dropped() >= dropped, true);

    // Still alive and reporting.
    const pid_t after =
        run_in_child("gg-after", [&] { return open(node.c_str(), O_RDONLY) >= 0 ? 0 : 1; });
    EXPECT_EQ(harness.of<GpuOpen>(after, 1).size(), 1u);
}

}  // namespace
}  // namespace gpuguard::agent
