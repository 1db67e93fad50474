// File changes seen by the real BPF programs (bpf/files.bpf.c): each
// syscall form, a relative path, a rename onto /etc/ld.so.preload, and
// nothing for read-only opens or unwatched paths. Every change is made by a
// child in a private mount namespace with a tmpfs over /etc: the host's
// files are never touched.
#include <chrono>
#include <string>
#include <tuple>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
using Change = std::tuple<std::string, std::string, std::string, std::string>;

class FileChangeTracingTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        auto error = harness_.open(gpuguard::testing::test_sensor_options());
        ASSERT_FALSE(error) << *error;
    }

    // (operation, syscall, kind, path) of `pid`'s file changes, polled for
    // `count` of them, then a little longer so an extra one would show.
    std::vector<Change> changes_of(pid_t pid, size_t count) {
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        while (matching(pid).size() < count && std::chrono::steady_clock::now() < deadline) {
            EXPECT_TRUE(harness_.sensor().poll(50ms).ok());
        }
        EXPECT_TRUE(harness_.sensor().poll(200ms).ok());
        return matching(pid);
    }

    std::vector<Change> matching(pid_t pid) {
        std::vector<Change> found;
        for (const auto& event : harness_.events()) {
            const auto* change = std::get_if<FileChange>(&event.data);
            if (!change || event.task.pid != static_cast<uint32_t>(pid)) continue;
            found.emplace_back(change->operation, change->syscall, change->kind, change->path);
        }
        return found;
    }

    gpuguard::testing::SensorHarness harness_;
    TempDir dir_{"gg-files"};
};

// A child's own /etc: private mounts, a tmpfs over /etc with cron.d in it.
int private_etc() {
    if (unshare(CLONE_NEWNS) != 0) return 10;
    if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 11;
    if (mount("gg-test", "/etc", "tmpfs", 0, nullptr) != 0) return 12;
    if (mkdir("/etc/cron.d", 0755) != 0) return 13;
    return 0;
}

int write_file(const char* path, int flags) {
    const int fd = open(path, flags | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

TEST_F(FileChangeTracingTest, each_syscall_form_on_watched_paths_is_reported) {
    const std::string home = dir_.path().string();
    int exit_code = -1;
    const pid_t child = run_in_child(
        "gg-writer",
        [&] {
            if (int failed = private_etc()) return failed;
            if (write_file("/etc/cron.d/a", O_WRONLY | O_CREAT | O_TRUNC)) return 20;
            const int created = static_cast<int>(syscall(SYS_creat, "/etc/cron.d/b", 0644));
            if (created < 0) return 21;
            close(created);
            if (syscall(SYS_rename, "/etc/cron.d/a", "/etc/cron.d/c")) return 22;
            if (syscall(SYS_renameat2, AT_FDCWD, "/etc/cron.d/b", AT_FDCWD, "/etc/cron.d/d", 0)) {
                return 23;
            }
            if (syscall(SYS_unlink, "/etc/cron.d/c")) return 24;
            if (unlinkat(AT_FDCWD, "/etc/cron.d/d", 0)) return 25;
            // A library list staged beside it, renamed onto ld.so.preload.
            if (write_file("/etc/.stage", O_WRONLY | O_CREAT)) return 26;  // not watched
            if (syscall(SYS_renameat, AT_FDCWD, "/etc/.stage", AT_FDCWD, "/etc/ld.so.preload")) {
                return 27;
            }
            // Read-only opens of watched paths are not changes.
            if (write_file("/etc/ld.so.preload", O_RDONLY)) return 28;
            // A relative path: named by its file name, reported as passed.
            if (chdir(home.c_str())) return 29;
            if (write_file(".bashrc", O_WRONLY | O_APPEND | O_CREAT)) return 30;
            if (write_file(".bashrc", O_RDONLY)) return 31;
            // A failed write-open of a watched path is not a change either.
            if (write_file("/etc/cron.d/missing/x", O_WRONLY | O_CREAT) == 0) return 32;
            return 0;
        },
        &exit_code);
    ASSERT_GT(child, 0);
    ASSERT_EQ(exit_code, 0) << "the child's step " << exit_code << " failed";
    const std::vector<Change> expected = {
        {"write", "openat", "cron", "/etc/cron.d/a"},
        {"write", "creat", "cron", "/etc/cron.d/b"},
        {"rename", "rename", "cron", "/etc/cron.d/c"},
        {"rename", "renameat2", "cron", "/etc/cron.d/d"},
        {"unlink", "unlink", "cron", "/etc/cron.d/c"},
        {"unlink", "unlinkat", "cron", "/etc/cron.d/d"},
        {"rename", "renameat", "preload", "/etc/ld.so.preload"},
        {"write", "openat", "shell_rc", ".bashrc"},
    };
    EXPECT_EQ(changes_of(child, expected.size()), expected);
    // Counted like every record type, so status and /metrics report their drops.
    const auto [emitted, dropped] = harness_.kernel_counts("file_change");
    ASSERT_NE(emitted, ~0ull) << "the sensor's stats have no file_change counter";
    EXPECT_GE(emitted, expected.size());
}

TEST_F(FileChangeTracingTest, a_watched_process_is_reported_wherever_it_writes) {
    const auto path = dir_ / "unwatched.txt";
    int go[2];
    ASSERT_EQ(pipe2(go, O_CLOEXEC), 0);
    // The child waits until the test put it on the watch list.
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        prctl(PR_SET_NAME, "gg-watched");
        close(go[1]);
        char byte;
        if (read(go[0], &byte, 1) != 1) _exit(40);
        _exit(write_file(path.c_str(), O_WRONLY | O_CREAT) ? 41 : 0);
    }
    gpuguard::testing::ChildReaper reaper(child);
    close(go[0]);
    ASSERT_TRUE(harness_.sensor().watch_process(static_cast<uint32_t>(child)).ok());
    ASSERT_EQ(write(go[1], "g", 1), 1);
    close(go[1]);
    const auto changes = changes_of(child, 1);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0], Change("write", "openat", "", path.string()));
}

}  // namespace
}  // namespace gpuguard::agent
