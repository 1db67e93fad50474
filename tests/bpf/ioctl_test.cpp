// GPU ioctls: counted in the kernel per (process, device, request) exactly,
// first one emitted, non-GPU fds and non-GPU processes ignored.
#include <map>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/sensor_harness.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::run_in_child;

// Requests as the drivers define them (ENOTTY on 1:7 is fine: the syscall is traced).
const uint32_t kNvRmControl = _IOC(_IOC_READ | _IOC_WRITE, 'F', 0x2A, 32);  // nv_escape.h
const uint32_t kAmdgpuCs = _IOWR('d', 0x40 + 0x04, 24);                     // amdgpu_drm.h
const uint32_t kUvmInitialize = 0x30000001;                                 // uvm_linux_ioctl.h

class IoctlTracingTest : public ::testing::Test {
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

    // Aggregates of `pid`, keyed by request.
    std::map<uint32_t, IoctlAggregate> aggregates_of(uint32_t pid) {
        std::map<uint32_t, IoctlAggregate> found;
        auto all = harness_.sensor().read_ioctl_stats();
        EXPECT_TRUE(all.ok());
        for (const auto& entry : all.value()) {
            if (entry.pid == pid) found[entry.cmd] = entry;
        }
        return found;
    }

    gpuguard::testing::TempDir dir_{"gg-ioctl"};
    std::string node_;
    gpuguard::testing::SensorHarness harness_;
};

TEST_F(IoctlTracingTest, aggregates_count_every_request_exactly) {
    const pid_t child = run_in_child("gg-ioctl", [&] {
        const int gpu = open(node_.c_str(), O_RDWR);
        const int other = open("/dev/zero", O_RDONLY);  // not a GPU: never counted
        if (gpu < 0 || other < 0) return 1;
        for (int i = 0; i < 5; ++i) ioctl(gpu, kNvRmControl, nullptr);
        for (int i = 0; i < 3; ++i) ioctl(gpu, kAmdgpuCs, nullptr);
        ioctl(gpu, kUvmInitialize, nullptr);
        for (int i = 0; i < 10; ++i) ioctl(other, kNvRmControl, nullptr);
        return 0;
    });
    const auto firsts = harness_.of<GpuIoctl>(child, 1);
    ASSERT_EQ(firsts.size(), 1u) << "only the first GPU ioctl is a record";
    EXPECT_EQ(firsts[0].second.cmd, kNvRmControl);
    EXPECT_EQ(firsts[0].second.major, 1u);
    EXPECT_EQ(firsts[0].second.minor, 7u);
    EXPECT_EQ(firsts[0].first.task.comm, "gg-ioctl");

    const auto counts = aggregates_of(child);
    ASSERT_EQ(counts.size(), 3u);
    EXPECT_EQ(counts.at(kNvRmControl).count, 5u);
    EXPECT_EQ(counts.at(kAmdgpuCs).count, 3u);
    EXPECT_EQ(counts.at(kUvmInitialize).count, 1u);
    for (const auto& [cmd, entry] : counts) {
        EXPECT_EQ(entry.major, 1u);
        EXPECT_EQ(entry.minor, 7u);
        EXPECT_LE(entry.first_ns, entry.last_ns);
        EXPECT_GT(entry.first_ns, 0u);
    }
    EXPECT_LT(counts.at(kNvRmControl).first_ns, counts.at(kAmdgpuCs).first_ns);

    ASSERT_TRUE(harness_.sensor().forget_process(child).ok());
    EXPECT_TRUE(aggregates_of(child).empty());
}

TEST_F(IoctlTracingTest, process_without_gpu_fd_is_not_counted) {
    const pid_t child = run_in_child("gg-ioctl", [&] {
        const int other = open("/dev/zero", O_RDONLY);
        for (int i = 0; i < 10; ++i) ioctl(other, kNvRmControl, nullptr);
        return 0;
    });
    EXPECT_TRUE(harness_.of<GpuIoctl>(child, 0).empty());
    EXPECT_TRUE(aggregates_of(child).empty());
}

TEST_F(IoctlTracingTest, child_inherits_the_gpu_fd_and_its_ioctls_count) {
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const pid_t parent = run_in_child("gg-ioctl", [&] {
        const int gpu = open(node_.c_str(), O_RDWR);
        if (gpu < 0) return 1;
        const pid_t grandchild = fork();
        if (grandchild == 0) {
            ioctl(gpu, kAmdgpuCs, nullptr);
            ioctl(gpu, kAmdgpuCs, nullptr);
            _exit(0);
        }
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
    EXPECT_TRUE(forks[0].second.inherited_gpu);
    const auto counts = aggregates_of(grandchild);
    ASSERT_EQ(counts.size(), 1u);
    EXPECT_EQ(counts.at(kAmdgpuCs).count, 2u);
}

}  // namespace
}  // namespace gpuguard::agent
