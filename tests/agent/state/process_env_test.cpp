// read_process_env (gpuguard/state/file_context.h) over a fake /proc: the
// library variables of an environ, an empty environment, and the empty
// environ the kernel shows in the middle of an exec (stat's env_end still 0),
// which is named as such rather than taken for an environment without them.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "gpuguard/state/file_context.h"
#include "gpuguard/state/process_handle.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::string_literals;
using gpuguard::agent::read_proc_stat;
using gpuguard::agent::read_process_env;

// A stat line of 52 fields with env_end (field 51) `env_end`.
std::string stat_line(uint64_t env_end) {
    std::string line = "42 (sleep) S 1 42 42 0 -1 4194560";
    for (int field = 10; field <= 50; ++field) line += " 0";
    return line + " " + std::to_string(env_end) + " 0\n";
}

class ReadProcessEnv : public ::testing::Test {
  protected:
    void shows(const std::string& environ, uint64_t env_end) {
        std::filesystem::create_directories(proc_ / "42");
        std::ofstream(proc_ / "42/environ", std::ios::binary | std::ios::trunc) << environ;
        std::ofstream(proc_ / "42/stat", std::ios::trunc) << stat_line(env_end);
    }
    gpuguard::testing::TempDir proc_{"gg-env-proc"};
};

TEST_F(ReadProcessEnv, names_the_library_variables_and_leaves_unset_ones_out) {
    shows("PATH=/bin\0LD_PRELOAD=/tmp/x/a.so /tmp/y.so\0LD_LIBRARY_PATH=/opt/l\0"s, 1000);
    const auto env = read_process_env(42, proc_.path().string());
    EXPECT_EQ(env.ld_preload, "/tmp/x/a.so /tmp/y.so");
    EXPECT_EQ(env.ld_library_path, "/opt/l");
    EXPECT_EQ(env.error, "");
    shows("PATH=/bin\0"s, 1000);
    EXPECT_EQ(read_process_env(42, proc_.path().string()), gpuguard::agent::ProcessEnv{});
}

TEST_F(ReadProcessEnv, an_empty_environ_mid_exec_is_an_error_and_an_empty_environment_is_not) {
    shows("", 0);
    const auto mid_exec = read_process_env(42, proc_.path().string());
    EXPECT_FALSE(mid_exec.ld_preload);
    EXPECT_NE(mid_exec.error.find("42/environ: not set up yet"), std::string::npos)
        << mid_exec.error;
    shows("", 1000);  // execve(path, argv, {NULL})
    EXPECT_EQ(read_process_env(42, proc_.path().string()), gpuguard::agent::ProcessEnv{});
    EXPECT_NE(read_process_env(43, proc_.path().string()).error, "") << "gone";
}

TEST(ProcStatEnvEnd, is_set_for_a_running_process) {
    auto stat = read_proc_stat(static_cast<uint32_t>(getpid()));
    ASSERT_TRUE(stat) << stat.error().message;
    EXPECT_NE(stat->env_end, 0u);
}

}  // namespace
