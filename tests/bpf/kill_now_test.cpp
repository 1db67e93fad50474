// kill_now: the kernel SIGKILLs known-bad executables (by inode) and names
// at exec and at their first GPU open, and says so with a kill_now event.
// The "miners" are copies of sleep and sh the test makes; the GPU is a 1:7
// node made with mknod.
#include <chrono>
#include <filesystem>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/daemon/kernel_enforcement.h"
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/sensor/sensor_enforce.h"
#include "gpuguard/state/process_handle.h"
#include "tests/support/privileged.h"
#include "tests/support/sensor_harness.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;
using gpuguard::testing::SensorHarness;
using gpuguard::testing::TempDir;

class KillNowTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        node_ = (dir_ / "gpu0").string();
        ASSERT_EQ(mknod(node_.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
        SensorOptions options = gpuguard::testing::test_sensor_options();
        options.config.extra_gpu_devices = {GpuDeviceNumber{1, 7, "test"}};
        const auto error = harness_.open(options);
        ASSERT_FALSE(error) << *error;
    }

    std::string copy_of(const char* source, const std::string& name) {
        const std::string path = (dir_ / name).string();
        std::filesystem::copy_file(source, path);
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
        return path;
    }

    // Forks and execs `path` with `args`; returns the pid (not waited for).
    static pid_t spawn(const std::string& path, std::vector<std::string> args, int stdin_fd = -1) {
        const pid_t pid = fork();
        if (pid == 0) {
            if (stdin_fd >= 0) dup2(stdin_fd, 0);
            std::vector<char*> argv;
            for (auto& arg : args) argv.push_back(arg.data());
            argv.push_back(nullptr);
            execv(path.c_str(), argv.data());
            _exit(127);
        }
        return pid;
    }

    static int wait_status(pid_t pid) {
        int status = 0;
        // Bounded: a process the kernel should have killed must not hang the suite.
        for (int i = 0; i < 1000; ++i) {
            if (waitpid(pid, &status, WNOHANG) == pid) return status;
            std::this_thread::sleep_for(10ms);
        }
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ADD_FAILURE() << "pid " << pid << " did not die by itself";
        return status;
    }

    TempDir dir_{"gg-killnow"};
    std::string node_;
    SensorHarness harness_;
};

TEST_F(KillNowTest, a_known_bad_copy_of_sleep_is_killed_at_exec) {
    const std::string miner = copy_of("/bin/sleep", "gg-miner");
    auto file = file_identity(miner);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(harness_.sensor().add_known_bad_file(file->dev, file->ino, 7).ok());

    const pid_t pid = spawn(miner, {"gg-miner", "5"});
    const int status = wait_status(pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
    EXPECT_EQ(WTERMSIG(status), SIGKILL);

    const auto kills = harness_.of<KillNow>(static_cast<uint32_t>(pid), 1);
    ASSERT_EQ(kills.size(), 1u);
    const KillNow& kill = kills[0].second;
    EXPECT_EQ(kill.trigger, "exec");
    EXPECT_EQ(kill.match, "file");
    EXPECT_EQ(kill.dev, file->dev);
    EXPECT_EQ(kill.ino, file->ino);
    EXPECT_EQ(kill.rule_id, 7u);
    EXPECT_EQ(kill.signal_result, 0);
    EXPECT_EQ(kills[0].first.task.comm, "gg-miner");

    // The same program under another inode runs normally.
    const std::string benign = copy_of("/bin/sleep", "gg-benign");
    const int ok = wait_status(spawn(benign, {"gg-benign", "0"}));
    EXPECT_TRUE(WIFEXITED(ok) && WEXITSTATUS(ok) == 0);

    // Removing the registration disarms it.
    ASSERT_TRUE(harness_.sensor().remove_known_bad_file(file->dev, file->ino).ok());
    const int after = wait_status(spawn(miner, {"gg-miner", "0"}));
    EXPECT_TRUE(WIFEXITED(after) && WEXITSTATUS(after) == 0);
}

TEST_F(KillNowTest, a_known_bad_name_is_killed_at_exec) {
    const std::string miner = copy_of("/bin/sleep", "gg-named");
    ASSERT_TRUE(harness_.sensor().add_known_bad_name("gg-named", 9).ok());
    const pid_t pid = spawn(miner, {"gg-named", "5"});
    EXPECT_EQ(WTERMSIG(wait_status(pid)), SIGKILL);
    const auto kills = harness_.of<KillNow>(static_cast<uint32_t>(pid), 1);
    ASSERT_EQ(kills.size(), 1u);
    EXPECT_EQ(kills[0].second.match, "name");
    EXPECT_EQ(kills[0].second.rule_id, 9u);
    EXPECT_FALSE(harness_.sensor().add_known_bad_name("a-name-longer-than-15", 1).ok());
}

TEST_F(KillNowTest, a_running_process_registered_by_inode_dies_at_its_first_gpu_open) {
    const std::string shell = copy_of("/bin/sh", "gg-shminer");
    int go[2];
    ASSERT_EQ(pipe(go), 0);
    // Reads one line, then opens the "GPU" itself (exec 3< is the shell's own open).
    const pid_t pid =
        spawn(shell, {"gg-shminer", "-c", "read x; exec 3<" + node_ + "; exit 3"}, go[0]);
    close(go[0]);
    // Register only once the exec tracepoint has run: its kill_now check comes
    // before the Exec event. (comm changes earlier, inside exec: polling it raced.)
    ASSERT_EQ(harness_.of<Exec>(static_cast<uint32_t>(pid), 1).size(), 1u);
    auto file = file_identity(shell);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE(harness_.sensor().add_known_bad_file(file->dev, file->ino, 11).ok());
    ASSERT_EQ(write(go[1], "go\n", 3), 3);
    close(go[1]);
    const int status = wait_status(pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), SIGKILL);

    const auto kills = harness_.of<KillNow>(static_cast<uint32_t>(pid), 1);
    ASSERT_EQ(kills.size(), 1u);
    EXPECT_EQ(kills[0].second.trigger, "gpu_open");
    EXPECT_EQ(kills[0].second.major, 1u);
    EXPECT_EQ(kills[0].second.minor, 7u);
    EXPECT_EQ(kills[0].second.rule_id, 11u);
    // It was not killed at exec (registered later): exactly one kill record.
}

TEST_F(KillNowTest, the_enforcer_registers_the_executable_and_kills_the_running_process) {
    const std::string miner = copy_of("/bin/sleep", "gg-enforced");
    const pid_t running = spawn(miner, {"gg-enforced", "30"});
    for (int i = 0; i < 200; ++i) {
        auto stat = read_proc_stat(static_cast<uint32_t>(running));
        if (stat && stat->comm == "gg-enforced") break;
        std::this_thread::sleep_for(5ms);
    }
    SensorKnownBad registry(harness_.sensor());
    EnforcerDependencies deps;
    deps.known_bad = &registry;
    Enforcer enforcer(EnforcementConfig{}, deps);
    Detection detection;
    detection.action = "kill_now";
    detection.process.pid = static_cast<uint32_t>(running);
    const auto outcome = enforcer.enforce(detection);
    ASSERT_TRUE(outcome);
    EXPECT_EQ(outcome->outcome, "success") << outcome->reason;
    EXPECT_NE(outcome->reason.find("registered for the in-kernel kill"), std::string::npos);
    EXPECT_EQ(WTERMSIG(wait_status(running)), SIGKILL);
    // The next start of the same file dies in the kernel.
    const pid_t again = spawn(miner, {"gg-enforced", "30"});
    EXPECT_EQ(WTERMSIG(wait_status(again)), SIGKILL);
    EXPECT_EQ(harness_.of<KillNow>(static_cast<uint32_t>(again), 1).size(), 1u);
}

}  // namespace
}  // namespace gpuguard::agent
