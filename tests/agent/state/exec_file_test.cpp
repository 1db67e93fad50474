// complete_exec (gpuguard/state/file_context.h): an exec whose filename is an
// fd path or relative gets its exe from /proc/PID/exe; one whose filename is
// the executable's path is left alone. A fake /proc root, so each answer is
// the test's.
#include <filesystem>

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

}  // namespace
