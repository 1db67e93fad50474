// The agent outside the host's pid namespace (a container without
// --pid=host, a pod without hostPID: true) would see only its container's
// processes and still report ready. It refuses to start instead, before it
// loads a program, and says how to run it.
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/agent_config.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;

TEST(PidNamespaceTest, the_agent_refuses_to_start_in_a_pid_namespace_of_its_own) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir dir("gg-pidns");
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << "control:\n  socket: " << (dir / "control.sock").string() << "\n"
                          << "enforcement:\n  dry_run: true\n"
                          << gpuguard::testing::scratch_paths_config(dir.path());
    // unshare(1) gives the agent a pid namespace and a /proc of its own.
    const auto inside =
        gpuguard::testing::run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc",
                                        GPUGUARD_BINARY, "run", "--config", config.string()},
                                       60s);
    // The agent's log goes to its stdout when that is not a terminal's.
    const std::string said = inside.stdout_text + inside.stderr_text;
    EXPECT_NE(inside.exit_code, 0) << said;
    EXPECT_NE(said.find("runs in a pid namespace of its own"), std::string::npos) << said;
    EXPECT_NE(said.find("--pid=host"), std::string::npos) << said;
    EXPECT_EQ(said.find("[agent] ready"), std::string::npos) << said;

    // The same command in the host's namespace passes that check.
    gpuguard::testing::Subprocess outside({GPUGUARD_BINARY, "run", "--config", config.string()});
    ASSERT_TRUE(outside.wait_for_agent_ready(30s)) << outside.stderr_text();
    EXPECT_EQ(outside.stop(SIGTERM, 10s), 0) << outside.stderr_text();
    // And says, as of any start that failed, why the one before it did not.
    EXPECT_NE(outside.stderr_text().find("1 start(s) failed"), std::string::npos)
        << outside.stderr_text();
    EXPECT_NE(outside.stderr_text().find("runs in a pid namespace of its own"), std::string::npos)
        << outside.stderr_text();

    // sensor.require_host_pid_namespace: false lets it start there, saying
    // so at critical (a runtime that ignores hostPID).
    {
        std::string text = gpuguard::testing::file_text(config);
        text.replace(text.find("enforcement:"), 0,
                     "sensor:\n  require_host_pid_namespace: false\n");
        std::ofstream(config) << text;
    }
    gpuguard::testing::Subprocess let({"/usr/bin/unshare", "--pid", "--fork", "--mount-proc",
                                       "--kill-child=SIGTERM", GPUGUARD_BINARY, "run", "--config",
                                       config.string()});
    ASSERT_TRUE(let.wait_for_agent_ready(30s)) << let.stderr_text();
    EXPECT_NE(
        let.stderr_text().find("critical [agent] gpuguard runs in a pid namespace of its own"),
        std::string::npos)
        << let.stderr_text();
    // unshare forwards no signal: the agent (its child, pid 1 inside) is
    // stopped by its host pid, and unshare ends with it.
    const std::string children = gpuguard::testing::file_text(
        "/proc/" + std::to_string(let.pid()) + "/task/" + std::to_string(let.pid()) + "/children");
    const pid_t agent = static_cast<pid_t>(std::strtol(children.c_str(), nullptr, 10));
    ASSERT_GT(agent, 1) << children;
    ASSERT_EQ(kill(agent, SIGTERM), 0);
    EXPECT_EQ(let.stop(0, 10s), 0) << let.stderr_text();
}

}  // namespace
