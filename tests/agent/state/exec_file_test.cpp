// complete_exec (gpuguard/state/file_context.h): an exec whose filename is an
// fd path or relative gets its exe from /proc/PID/exe; one whose filename is
// the executable's path is left alone. A fake /proc root, so each answer is
// the test's.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "gpuguard/state/file_context.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuguard::agent::complete_exec;
using gpuguard::agent::Exec;

TEST(CompleteExec, fd_paths_and_relative_ones_take_proc_exe_and_paths_stay) {
    gpuguard::testing::TempDir proc("gg-exec-proc");
    std::filesystem::create_directories(proc.path() / "42");
    std::filesystem::create_symlink("/memfd:x (deleted)", proc.path() / "42" / "exe");
    const auto exe_of = [&](const std::string& filename, uint32_t pid = 42) {
        Exec exec;
        exec.filename = filename;
        complete_exec(pid, exec, proc.path().string());
        return exec.exe;
    };
    for (const char* fd_path : {"/proc/self/fd/3", "/proc/thread-self/fd/12", "/proc/42/fd/3",
                                "/dev/fd/4", "/dev/fd/5/miner", "./miner", "miner"}) {
        EXPECT_EQ(exe_of(fd_path), "/memfd:x (deleted)") << fd_path;
    }
    for (const char* path : {"/usr/bin/python3", "/proc/self/fdx/3", "/proc/self/fd/",
                             "/proc/self/fd/3x", "/dev/fd/", "/dev/fdx/3", "/proc/me/fd/3"}) {
        EXPECT_EQ(exe_of(path), "") << path;
    }
    EXPECT_EQ(exe_of("/proc/self/fd/3", 43), "") << "gone: left empty";
}

// An absolute filename that is not the file's real path (a symlink, "..",
// "//", /proc/self/root in it): exe is the real path inside the process's
// root, so locations are judged where the file is.
TEST(CompleteExec, a_spelled_or_symlinked_path_gets_its_real_path_inside_the_root) {
    gpuguard::testing::TempDir proc("gg-exec-root");
    const auto root = proc.path() / "rootfs";
    std::filesystem::create_directories(proc.path() / "42");
    std::filesystem::create_directories(root / "tmp");
    std::filesystem::create_directories(root / "var/lib/gg");
    std::ofstream(root / "tmp/real") << "#!/bin/sh\n";
    std::filesystem::create_symlink("/tmp/real", root / "var/lib/gg/link");
    std::filesystem::create_symlink(root, proc.path() / "42" / "root");
    const auto exe_of = [&](const std::string& filename) {
        Exec exec;
        exec.filename = filename;
        complete_exec(42, exec, proc.path().string());
        return exec.exe;
    };
    for (const char* spelled : {"/var/lib/gg/link", "//tmp//real", "/var/lib/gg/../../../tmp/real",
                                "/proc/self/root/tmp/real", "/proc/42/root/var/lib/gg/link"}) {
        EXPECT_EQ(exe_of(spelled), "/tmp/real") << spelled;
    }
    EXPECT_EQ(exe_of("/tmp/real"), "") << "already its real path";
    EXPECT_EQ(exe_of("/tmp/gone"), "") << "missing: the filename stands";
}

}  // namespace
