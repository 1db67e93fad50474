// Sensor::open error paths: each gives one clear, documented error.
#include <fstream>

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/sensor/sensor.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::TempDir;

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
    EXPECT_GE(hooks.size(), 2u);
    EXPECT_EQ(hooks.at(0), "syscalls/sys_exit_openat");
    EXPECT_EQ(hooks.at(1), "syscalls/sys_exit_openat2");
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
