// GPU device opens seen by the real BPF programs on the running kernel.
// The "GPU" is a character node made with mknod whose number (1:7, /dev/full's:
// nothing else on the host opens it, and it is never read) the test registers; every expected event
// comes from a child the test forked, identified by pid and comm.
#include <chrono>
#include <thread>
#include <vector>

#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpuguard/sensor/sensor.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/sensor_harness.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;
using gpuguard::testing::run_in_child;
using gpuguard::testing::TempDir;

constexpr const char* kChildComm = "gg-opener";

class OpenTracingTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        node_ = dir_ / "gpu0";
        ASSERT_EQ(mknod(node_.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0) << strerror(errno);
        ASSERT_EQ(symlink(node_.c_str(), (dir_ / "gpu-link").c_str()), 0);
        open_sensor({GpuDeviceNumber{1, 7, "test"}});
    }

    void open_sensor(const std::vector<GpuDeviceNumber>& devices, uint32_t ignore_tgid = 0) {
        SensorOptions options = gpuguard::testing::test_sensor_options();
        options.config.extra_gpu_devices = devices;
        options.ignore_tgid = ignore_tgid;
        auto opened =
            Sensor::open(options, [this](const Event& event) { events_.push_back(event); });
        ASSERT_TRUE(opened.ok()) << opened.error().message;
        sensor_.emplace(std::move(opened).value());
    }

    // Polls until `count` events from `pid` arrived or 5 s passed, then a
    // little longer so that an unexpected extra event would be seen too.
    std::vector<GpuOpen> opens_of(pid_t pid, size_t count) {
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (matching(pid).size() < count && std::chrono::steady_clock::now() < deadline) {
            EXPECT_TRUE(sensor_->poll(50ms).ok());
        }
        EXPECT_TRUE(sensor_->poll(100ms).ok());
        return matching(pid);
    }

    std::vector<GpuOpen> matching(pid_t pid) const {
        std::vector<GpuOpen> found;
        for (const auto& event : events_) {
            if (event.task.pid != static_cast<uint32_t>(pid)) continue;
            if (!std::holds_alternative<GpuOpen>(event.data)) continue;  // fork/exec/exit
            EXPECT_EQ(event.task.comm, kChildComm);
            EXPECT_EQ(event.task.tid, event.task.pid);  // single-threaded child
            EXPECT_EQ(event.task.ppid, static_cast<uint32_t>(getpid()));
            EXPECT_EQ(event.task.uid, geteuid());
            EXPECT_GT(event.ts_ns, 0u);
            found.push_back(std::get<GpuOpen>(event.data));
        }
        return found;
    }

    // Kernel-side (emitted, dropped) of gpu_open records since the sensor opened.
    std::pair<uint64_t, uint64_t> gpu_open_counts() const {
        for (const auto& type : sensor_->stats().kernel) {
            if (type.type == "gpu_open") return {type.emitted, type.dropped};
        }
        ADD_FAILURE() << "no gpu_open counter";
        return {};
    }

    size_t delivered_gpu_opens() const {
        size_t count = 0;
        for (const auto& event : events_) count += std::holds_alternative<GpuOpen>(event.data);
        return count;
    }

    static void expect_device(const GpuOpen& open, uint32_t major, uint32_t minor) {
        EXPECT_TRUE(open.succeeded()) << open.result;
        EXPECT_EQ(open.major, major);
        EXPECT_EQ(open.minor, minor);
    }

    TempDir dir_{"gg-open"};
    std::filesystem::path node_;
    std::vector<Event> events_;
    std::optional<Sensor> sensor_;
};

TEST_F(OpenTracingTest, reports_open_by_absolute_path) {
    const std::string path = node_.string();
    const pid_t child = run_in_child(kChildComm, [&] {
        const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
        return fd >= 0 ? 0 : 1;
    });
    const auto opens = opens_of(child, 1);
    ASSERT_EQ(opens.size(), 1u);
    expect_device(opens[0], 1, 7);
    EXPECT_EQ(opens[0].path, path);
    EXPECT_EQ(opens[0].dirfd, AT_FDCWD);
    EXPECT_EQ(opens[0].syscall, OpenSyscall::kOpenat);
    EXPECT_EQ(opens[0].open_flags & O_ACCMODE, static_cast<uint64_t>(O_RDONLY));
    EXPECT_TRUE(opens[0].open_flags & O_CLOEXEC);
    EXPECT_GE(opens[0].result, 0);
}

TEST_F(OpenTracingTest, reports_open_through_symlink) {
    const std::string link = (dir_ / "gpu-link").string();
    const pid_t child =
        run_in_child(kChildComm, [&] { return open(link.c_str(), O_RDWR) >= 0 ? 0 : 1; });
    const auto opens = opens_of(child, 1);
    ASSERT_EQ(opens.size(), 1u);
    expect_device(opens[0], 1, 7);
    EXPECT_EQ(opens[0].path, link);
    EXPECT_EQ(opens[0].open_flags & O_ACCMODE, static_cast<uint64_t>(O_RDWR));
}

TEST_F(OpenTracingTest, reports_open_relative_to_dirfd) {
    const std::string dir = dir_.path().string();
    constexpr int kDirfd = 100;  // fixed number so the event's dirfd can be checked
    const pid_t child = run_in_child(kChildComm, [&] {
        const int dirfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
        if (dirfd < 0 || dup2(dirfd, kDirfd) != kDirfd) return 1;
        return openat(kDirfd, "gpu0", O_WRONLY) >= 0 ? 0 : 2;
    });
    const auto opens = opens_of(child, 1);
    ASSERT_EQ(opens.size(), 1u);
    expect_device(opens[0], 1, 7);
    EXPECT_EQ(opens[0].path, "gpu0");
    EXPECT_EQ(opens[0].dirfd, kDirfd);
    EXPECT_EQ(opens[0].open_flags & O_ACCMODE, static_cast<uint64_t>(O_WRONLY));
}

TEST_F(OpenTracingTest, reports_openat2) {
    const std::string path = node_.string();
    const pid_t child = run_in_child(kChildComm, [&] {
        open_how how{};
        how.flags = O_RDWR | O_CLOEXEC;
        how.resolve = RESOLVE_NO_MAGICLINKS;
        return syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof(how)) >= 0 ? 0 : 1;
    });
    const auto opens = opens_of(child, 1);
    ASSERT_EQ(opens.size(), 1u);
    expect_device(opens[0], 1, 7);
    EXPECT_EQ(opens[0].syscall, OpenSyscall::kOpenat2);
    EXPECT_EQ(opens[0].path, path);
    EXPECT_EQ(opens[0].open_flags, static_cast<uint64_t>(O_RDWR | O_CLOEXEC));
}

#if defined(SYS_open) && defined(SYS_creat)
TEST_F(OpenTracingTest, reports_legacy_open_and_creat) {
    const std::string path = node_.string();
    const pid_t child = run_in_child(kChildComm, [&] {
        if (syscall(SYS_open, path.c_str(), O_RDONLY) < 0) return 1;
        return syscall(SYS_creat, path.c_str(), 0644) >= 0 ? 0 : 2;
    });
    const auto opens = opens_of(child, 2);
    ASSERT_EQ(opens.size(), 2u);
    expect_device(opens[0], 1, 7);
    EXPECT_EQ(opens[0].syscall, OpenSyscall::kOpen);
    EXPECT_EQ(opens[0].dirfd, AT_FDCWD);
    EXPECT_EQ(opens[0].path, path);
    expect_device(opens[1], 1, 7);
    EXPECT_EQ(opens[1].syscall, OpenSyscall::kCreat);
    EXPECT_EQ(opens[1].open_flags, static_cast<uint64_t>(O_CREAT | O_WRONLY | O_TRUNC));
}
#endif

TEST_F(OpenTracingTest, long_paths_are_truncated_and_flagged_exactly) {
    // 255 bytes fit the 256-byte buffer with its NUL; 300 do not.
    const std::string fits = "/dev/nvidia" + std::string(255 - 11, 'x');
    const std::string too_long = "/dev/nvidia" + std::string(300 - 11, 'y');
    const pid_t child = run_in_child(kChildComm, [&] {
        const bool both_fail =
            open(fits.c_str(), O_RDONLY) < 0 && open(too_long.c_str(), O_RDONLY) < 0;
        return both_fail ? 0 : 1;
    });
    const auto opens = opens_of(child, 2);
    ASSERT_EQ(opens.size(), 2u);
    EXPECT_EQ(opens[0].path, fits);
    EXPECT_FALSE(opens[0].path_truncated);
    EXPECT_EQ(opens[0].result, -ENOENT);
    EXPECT_EQ(opens[1].path, too_long.substr(0, 255));
    EXPECT_TRUE(opens[1].path_truncated);
    EXPECT_EQ(opens[1].result, -ENAMETOOLONG);
}

TEST_F(OpenTracingTest, reports_failed_open_of_gpu_path_with_errno) {
    const std::string missing = "/dev/nvidia-gpuguard-test-" + std::to_string(getpid());
    const std::string not_gpu = (dir_ / "missing").string();
    int exit_code = -1;
    const pid_t child = run_in_child(
        kChildComm,
        [&] {
            if (open(not_gpu.c_str(), O_RDONLY) >= 0) return 1;  // not a GPU path: no event
            return open(missing.c_str(), O_RDWR) < 0 && errno == ENOENT ? 0 : 2;
        },
        &exit_code);
    ASSERT_EQ(exit_code, 0);
    const auto opens = opens_of(child, 1);
    ASSERT_EQ(opens.size(), 1u);
    EXPECT_FALSE(opens[0].succeeded());
    EXPECT_EQ(opens[0].result, -ENOENT);
    EXPECT_EQ(opens[0].path, missing);
    EXPECT_EQ(opens[0].major, 0u);
}

TEST_F(OpenTracingTest, whole_major_registration_matches_every_minor) {
    const auto zero = dir_ / "zero";  // 1:5 opens like /dev/zero
    ASSERT_EQ(mknod(zero.c_str(), S_IFCHR | 0666, makedev(1, 5)), 0);
    const std::string path = zero.string();
    const auto open_zero = [&] { return open(path.c_str(), O_RDONLY) >= 0 ? 0 : 1; };

    const pid_t before = run_in_child(kChildComm, open_zero);
    EXPECT_TRUE(opens_of(before, 0).empty()) << "1:5 is not registered yet";

    ASSERT_TRUE(sensor_->add_gpu_device(GpuDeviceNumber{1, std::nullopt, "test"}).ok());
    const pid_t after = run_in_child(kChildComm, open_zero);
    ASSERT_TRUE(sensor_->remove_gpu_device(GpuDeviceNumber{1, std::nullopt, "test"}).ok());
    const auto opens = opens_of(after, 1);
    ASSERT_EQ(opens.size(), 1u);
    expect_device(opens[0], 1, 5);
}

TEST_F(OpenTracingTest, removed_device_is_no_longer_reported) {
    ASSERT_TRUE(sensor_->remove_gpu_device(GpuDeviceNumber{1, 7, "test"}).ok());
    const std::string path = node_.string();
    const pid_t child =
        run_in_child(kChildComm, [&] { return open(path.c_str(), O_RDONLY) >= 0 ? 0 : 1; });
    EXPECT_TRUE(opens_of(child, 0).empty());
}

// 100 000 opens of a regular file must not reach user space. Only 1:7
// (/dev/full, which nothing on a test host opens) is registered, so the
// delivered counter is not disturbed by other processes opening /dev/null.
TEST_F(OpenTracingTest, burst_of_non_gpu_opens_emits_nothing) {
    sensor_.reset();
    events_.clear();
    const auto full = dir_ / "full";
    ASSERT_EQ(mknod(full.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    open_sensor({GpuDeviceNumber{1, 7, "test"}});
    const auto regular = dir_ / "regular";
    {
        std::FILE* f = std::fopen(regular.c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fclose(f);
    }

    const std::string path = regular.string();
    int exit_code = -1;
    const pid_t child = run_in_child(
        kChildComm,
        [&] {
            for (int i = 0; i < 100000; ++i) {
                const int fd = open(path.c_str(), O_RDONLY);
                if (fd < 0) return 1;
                close(fd);
            }
            return 0;
        },
        &exit_code);
    ASSERT_EQ(exit_code, 0);
    ASSERT_TRUE(sensor_->poll(200ms).ok());
    EXPECT_EQ(gpu_open_counts(), (std::pair<uint64_t, uint64_t>{0, 0}));
    EXPECT_EQ(delivered_gpu_opens(), 0u);
    EXPECT_TRUE(opens_of(child, 0).empty());

    // The sensor was live all along: one open of the registered node is one event.
    const std::string full_path = full.string();
    const pid_t prober =
        run_in_child(kChildComm, [&] { return open(full_path.c_str(), O_RDONLY) >= 0 ? 0 : 1; });
    const auto opens = opens_of(prober, 1);
    ASSERT_EQ(opens.size(), 1u);
    expect_device(opens[0], 1, 7);
    EXPECT_EQ(delivered_gpu_opens(), 1u);
    EXPECT_EQ(gpu_open_counts(), (std::pair<uint64_t, uint64_t>{1, 0}));
}

// The agent's own opens (NVML's, on every telemetry sample) are not a GPU
// user's: with ignore_tgid set to this process, its open is not reported
// and it is not marked, so a child it forks inherits no mark and that
// child's ioctl on the inherited fd is not counted. A child's own open is.
TEST_F(OpenTracingTest, the_ignored_process_opens_unseen_and_unmarked) {
    sensor_.reset();
    events_.clear();
    open_sensor({GpuDeviceNumber{1, 7, "test"}}, static_cast<uint32_t>(getpid()));
    const int fd = open(node_.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << strerror(errno);
    int exit_code = -1;
    const pid_t inheritor = run_in_child(
        kChildComm,
        [&] {
            (void)ioctl(fd, _IOWR('d', 0x44, 24), nullptr);  // ENOTTY: counted all the same
            return 0;
        },
        &exit_code);
    EXPECT_EQ(exit_code, 0);
    close(fd);
    const std::string path = node_.string();
    const pid_t opener =
        run_in_child(kChildComm, [&] { return open(path.c_str(), O_RDONLY) >= 0 ? 0 : 1; });
    const auto opens = opens_of(opener, 1);  // polls until the child's open is in
    ASSERT_EQ(opens.size(), 1u);
    expect_device(opens[0], 1, 7);
    for (const auto& event : events_) {
        const bool gpu_event = std::holds_alternative<GpuOpen>(event.data) ||
                               std::holds_alternative<GpuIoctl>(event.data);
        EXPECT_FALSE(gpu_event && event.task.pid == static_cast<uint32_t>(getpid()))
            << "the ignored process was reported";
        EXPECT_FALSE(gpu_event && event.task.pid == static_cast<uint32_t>(inheritor))
            << "a child of the ignored process inherited a GPU mark";
        if (const auto* fork = std::get_if<Fork>(&event.data);
            fork && fork->child_pid == static_cast<uint32_t>(inheritor)) {
            EXPECT_FALSE(fork->inherited_gpu);
        }
    }
    EXPECT_EQ(gpu_open_counts(), (std::pair<uint64_t, uint64_t>{1, 0}));
}

TEST_F(OpenTracingTest, destroying_the_sensor_unloads_every_program) {
    const auto ids = sensor_->program_ids();
    ASSERT_GE(ids.size(), 2u);  // openat and openat2
    for (uint32_t id : ids) {
        const int fd = bpf_prog_get_fd_by_id(id);
        EXPECT_GE(fd, 0) << "program " << id << " should be loaded";
        if (fd >= 0) close(fd);
    }
    sensor_.reset();
    // Programs are freed after an RCU grace period; allow a moment.
    const auto deadline = std::chrono::steady_clock::now() + 3s;
    for (uint32_t id : ids) {
        int fd = bpf_prog_get_fd_by_id(id);
        while (fd >= 0 && std::chrono::steady_clock::now() < deadline) {
            close(fd);
            std::this_thread::sleep_for(20ms);
            fd = bpf_prog_get_fd_by_id(id);
        }
        EXPECT_LT(fd, 0) << "program " << id << " still loaded";
        if (fd >= 0) close(fd);
    }
}

}  // namespace
}  // namespace gpuguard::agent
