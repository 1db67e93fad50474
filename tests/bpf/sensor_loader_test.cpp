// Sensor::open error paths: each gives one clear, documented error.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::TempDir;

// The first hook each mode attaches (opens come first).
std::string first_hook(AttachMode mode) {
    switch (mode) {
        case AttachMode::kKernelFunctions:
            return "fexit/__x64_sys_openat";
        case AttachMode::kRawSyscalls:
            return "tp_btf/sys_enter";
        default:
            return "syscalls/sys_exit_openat";
    }
}

class SensorLoaderTest : public ::testing::Test {
  protected:
    void SetUp() override { GG_REQUIRE_PRIVILEGED(); }
    TempDir dir_{"gg-loader"};
};

TEST_F(SensorLoaderTest, missing_configured_btf_file_is_named) {
    SensorOptions options;
    options.config.btf_path = (dir_ / "no-such.btf").string();
    auto sensor = Sensor::open(options, nullptr);
    ASSERT_FALSE(sensor.ok());
    EXPECT_EQ(sensor.error().code, ErrorCode::kNotFound);
    EXPECT_NE(sensor.error().message.find(options.config.btf_path), std::string::npos);
    EXPECT_NE(sensor.error().message.find("sensor.btf"), std::string::npos);
    EXPECT_NE(sensor.error().message.find("does not exist"), std::string::npos);
}

TEST_F(SensorLoaderTest, garbage_btf_file_is_rejected_as_not_btf) {
    const auto bad = dir_ / "garbage.btf";
    std::ofstream(bad) << "this is not BTF, just text\n";
    SensorOptions options;
    options.config.btf_path = bad.string();
    auto sensor = Sensor::open(options, nullptr);
    ASSERT_FALSE(sensor.ok());
    EXPECT_EQ(sensor.error().code, ErrorCode::kParse);
    EXPECT_NE(sensor.error().message.find("is not valid BTF"), std::string::npos)
        << sensor.error().message;
}

TEST_F(SensorLoaderTest, kernel_without_btf_says_what_to_do) {
    SensorOptions options;
    options.kernel_btf_path = (dir_ / "vmlinux").string();  // as on a kernel without BTF
    auto sensor = Sensor::open(options, nullptr);
    ASSERT_FALSE(sensor.ok());
    EXPECT_EQ(sensor.error().code, ErrorCode::kNotFound);
    EXPECT_NE(sensor.error().message.find("kernel BTF not found"), std::string::npos);
    EXPECT_NE(sensor.error().message.find("CONFIG_DEBUG_INFO_BTF"), std::string::npos);
    EXPECT_NE(sensor.error().message.find("sensor.btf"), std::string::npos);
}

TEST_F(SensorLoaderTest, explicit_kernel_btf_file_loads) {
    SensorOptions options;
    options.config.btf_path = "/sys/kernel/btf/vmlinux";
    auto sensor = Sensor::open(options, nullptr);
    ASSERT_TRUE(sensor.ok()) << sensor.error().message;
    const auto hooks = sensor->attached_hooks();
    ASSERT_GE(hooks.size(), 2u);
    EXPECT_EQ(hooks.at(0), first_hook(sensor->attach_mode()));
}

// Each mode the probe allows attaches its own hooks and says so; a mode it
// refuses is an error naming the setting and why (kernel_functions on this
// build host, which refuses fentry).
TEST_F(SensorLoaderTest, each_attachment_mode_loads_where_the_probe_allows_it) {
    size_t loaded = 0;
    for (AttachMode mode : {AttachMode::kKernelFunctions, AttachMode::kRawSyscalls,
                            AttachMode::kSyscallTracepoints}) {
        const AttachDecision decision = decide_attach_mode(mode, "");
        SensorOptions options;
        options.config.attach = mode;
        auto sensor = Sensor::open(options, nullptr);
        const std::string name(attach_mode_name(mode));
        if (decision.mode == AttachMode::kAuto) {
            ASSERT_FALSE(sensor.ok()) << name;
            EXPECT_EQ(sensor.error().code, ErrorCode::kUnsupported);
            EXPECT_NE(sensor.error().message.find("sensor.attach " + name + " is not possible"),
                      std::string::npos)
                << sensor.error().message;
            EXPECT_NE(sensor.error().message.find(decision.reason), std::string::npos);
            continue;
        }
        ASSERT_TRUE(sensor.ok()) << name << ": " << sensor.error().message;
        ++loaded;
        EXPECT_EQ(sensor->attach_mode(), mode);
        const auto hooks = sensor->attached_hooks();
        ASSERT_FALSE(hooks.empty());
        EXPECT_EQ(hooks.at(0), mode == AttachMode::kRawSyscalls && !decision.raw_btf
                                   ? "raw/sys_enter"
                                   : first_hook(mode))
            << name;
        // auto picks the first mode that loads, in this order.
        if (loaded == 1) {
            EXPECT_EQ(decide_attach_mode(AttachMode::kAuto, "").mode, mode);
        }
    }
    // raw_syscalls and syscall_tracepoints are the floor of every supported kernel.
    EXPECT_GE(loaded, 2u);
}

// Pinned hooks of an earlier agent in another mode are replaced, not left
// attached beside this one's (each would run on every syscall).
TEST_F(SensorLoaderTest, pinned_hooks_of_another_mode_are_removed) {
    // A bpf filesystem of the test's own, never the host's /sys/fs/bpf.
    TempDir dir;
    const std::string bpffs = dir.path() / "bpffs";
    std::filesystem::create_directory(bpffs);
    ASSERT_EQ(mount("bpf", bpffs.c_str(), "bpf", 0, nullptr), 0) << std::strerror(errno);
    struct Unmount {
        std::string path;
        ~Unmount() { umount2(path.c_str(), MNT_DETACH); }  // drops whatever is still pinned
    } unmount{bpffs};
    auto pins = PinDirectory::claim(bpffs + "/gpuguard");
    ASSERT_TRUE(pins.ok()) << pins.error().message;
    const auto sensor_pins = [&] { return (*pins)->link_names("sensor-"); };
    // An agent in `mode` starts with these pins and exits leaving them.
    const auto run_agent = [&](AttachMode mode) {
        SensorOptions options;
        options.config.attach = mode;
        options.pins = *pins;
        auto sensor = Sensor::open(options, nullptr);
        return sensor.ok() ? std::string() : sensor.error().message;
    };
    ASSERT_EQ(run_agent(AttachMode::kSyscallTracepoints), "");
    auto before = sensor_pins();
    EXPECT_NE(std::find(before.begin(), before.end(), "sensor-gg_exit_openat"), before.end());
    ASSERT_EQ(run_agent(AttachMode::kRawSyscalls), "");
    auto after = sensor_pins();
    std::sort(after.begin(), after.end());
    const bool btf = decide_attach_mode(AttachMode::kRawSyscalls, "").raw_btf;
    const std::vector<std::string> expected =
        btf ? std::vector<std::string>{"sensor-gg_btf_sys_enter", "sensor-gg_btf_sys_exit",
                                       "sensor-gg_sched_exec", "sensor-gg_sched_exit",
                                       "sensor-gg_sched_fork"}
            : std::vector<std::string>{"sensor-gg_raw_sys_enter", "sensor-gg_raw_sys_exit",
                                       "sensor-gg_sched_exec", "sensor-gg_sched_exit",
                                       "sensor-gg_sched_fork"};
    EXPECT_EQ(after, expected);
    EXPECT_GE((*pins)->report().links_replaced, before.size());
    (*pins)->remove_all();
}

// A forked child drops to nobody (losing every capability) and tries.
TEST_F(SensorLoaderTest, unprivileged_user_is_told_to_run_as_root) {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        close(pipe_fds[0]);
        if (setgid(65534) != 0 || setuid(65534) != 0) _exit(3);
        auto sensor = Sensor::open(SensorOptions{}, nullptr);
        std::string report = sensor.ok() ? "OK"
                                         : std::to_string(static_cast<int>(sensor.error().code)) +
                                               " " + sensor.error().message;
        (void)!write(pipe_fds[1], report.data(), report.size());
        _exit(0);
    }
    close(pipe_fds[1]);
    std::string report;
    char buffer[512];
    ssize_t n;
    while ((n = read(pipe_fds[0], buffer, sizeof(buffer))) > 0) report.append(buffer, n);
    close(pipe_fds[0]);
    int status = 0;
    waitpid(child, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
    EXPECT_EQ(report.rfind(std::to_string(static_cast<int>(ErrorCode::kPermission)) + " ", 0), 0u)
        << report;
    EXPECT_NE(report.find("run gpuguard as root"), std::string::npos) << report;
}

}  // namespace
}  // namespace gpuguard::agent
