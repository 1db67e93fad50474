// The real agent against real processes writing persistence and preload
// files (GG-CORR-0014, 0015, 0016), always inside a private mount namespace
// the test's child creates (unshare -m, / made rprivate, tmpfs over the
// watched directories): the host's /etc is never written.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include "gpuguard/state/file_context.h"
#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::spawn_process;
using gpuguard::testing::Subprocess;

// `argv` started in a mount namespace of its own (unshare -m execs it in
// place: the pid the test gets is the process that writes).
pid_t spawn_process_in_namespace(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& env) {
    std::vector<std::string> full = {"unshare", "-m", "--propagation", "private"};
    full.insert(full.end(), argv.begin(), argv.end());
    return gpuguard::testing::spawn_process("/usr/bin/unshare", full, "/", env);
}

// The persistence evidence of a detection: "KIND DETAIL" per item.
std::set<std::string> persistence_of(const nlohmann::json& detection) {
    std::set<std::string> out;
    for (const auto& item : detection["gpuguard"]["detection"]["evidence"]) {
        if (item["kind"] == "persistence") {
            out.insert(item["field"].get<std::string>() + " " + item["detail"].get<std::string>());
        }
    }
    return out;
}

class AgentFilesTest : public AgentDetectTest {
  protected:
    // The shell that a child runs inside its own mount namespace, first
    // making every mount private and covering `dirs` with tmpfs.
    static std::string private_mounts(const std::vector<std::string>& dirs) {
        std::string script = "mount --make-rprivate / || exit 3; ";
        for (const auto& dir : dirs) script += "mount -t tmpfs gg-test " + dir + " || exit 4; ";
        return script;
    }

    // Waits (bounded) for `path` to exist: the test's go-ahead to a child.
    static std::string wait_for(const std::filesystem::path& path) {
        return "for i in $(seq 200); do [ -e " + path.string() + " ] && break; sleep 0.05; done; ";
    }
};

TEST_F(AgentFilesTest, miner_persistence_after_its_detection_is_listed_in_the_evidence) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto home = dir_ / "home";
    std::filesystem::create_directories(home);
    const auto go = dir_ / "go";
    // A "miner" (xmrig's options in its command line, the fake GPU open):
    // once detected, it writes a cron entry and a systemd unit (tmpfs over
    // their directories in its namespace), appends to ~/.bashrc and to
    // ~/.ssh/authorized_keys (HOME in the test's directory).
    const std::string script =
        private_mounts({"/etc/cron.d", "/etc/systemd/system"}) + wait_for(go) +
        "echo '* * * * * root /tmp/.x/xmrig' > /etc/cron.d/gg-update; "
        "printf '[Service]\\nExecStart=/tmp/.x/xmrig\\n' > /etc/systemd/system/gg-update.service; "
        "echo '/tmp/.x/xmrig &' >> $HOME/.bashrc; mkdir -p $HOME/.ssh; "
        "echo 'ssh-ed25519 AAAA gg-test' >> $HOME/.ssh/authorized_keys; sleep 10";
    const std::string node = node_.string();
    const pid_t child =
        spawn_process_in_namespace({"/bin/bash", "-c", "exec 7<>" + node + "; " + script, "xmrig",
                                    "--cuda", "-o", "stratum+tcp://127.0.0.1:3333", "-u", "wallet"},
                                   {"HOME=" + home.string(), "PATH=/usr/sbin:/usr/bin:/sbin:/bin"});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);

    auto miner = wait_for_detection(agent, child, "GG-CORR-0001", 10s);
    ASSERT_TRUE(miner) << agent.stderr_text();
    EXPECT_TRUE(persistence_of(*miner).empty());
    std::ofstream(go) << "go";

    // Each write adds to the persistence list; wait for the one with all four.
    const std::set<std::string> expected = {
        "cron wrote /etc/cron.d/gg-update by pid " + std::to_string(child) + " (bash)",
        "systemd wrote /etc/systemd/system/gg-update.service by pid " + std::to_string(child) +
            " (bash)",
        "shell_rc wrote " + (home / ".bashrc").string() + " by pid " + std::to_string(child) +
            " (bash)",
        "ssh_keys wrote " + (home / ".ssh/authorized_keys").string() + " by pid " +
            std::to_string(child) + " (bash)"};
    std::optional<nlohmann::json> persistence;
    const auto deadline = gpuguard::testing::Clock::now() + 10s;
    while (gpuguard::testing::Clock::now() < deadline) {
        persistence = wait_for_detection(agent, child, "GG-CORR-0015", 1s);
        if (persistence && persistence_of(*persistence) == expected) break;
    }
    ASSERT_TRUE(persistence) << agent.stderr_text();
    EXPECT_EQ(persistence_of(*persistence), expected) << persistence->dump();
    EXPECT_EQ((*persistence)["rule"]["name"], "Persistence written by a flagged process");
    // The host's directories were never written.
    EXPECT_FALSE(std::filesystem::exists("/etc/cron.d/gg-update"));
    EXPECT_FALSE(std::filesystem::exists("/etc/systemd/system/gg-update.service"));
    // The miner named by its command line at exec and on the GPU, its
    // persistence: exactly these.
    expect_whole_output(agent,
                        {{"GG-CORR-0012", child, "error"},
                         {"GG-CORR-0001", child, "critical"},
                         {"GG-CORR-0015", child, "critical"}},
                        {child});

    // The incident bundle of the first detection lists the writes in its summary.
    std::set<std::string> summarised;
    for (const auto& incident :
         std::filesystem::directory_iterator(dir_ / "journal" / "incidents")) {
        const auto summary = nlohmann::json::parse(
            gpuguard::testing::file_bytes(incident.path() / "summary.json"), nullptr, false);
        if (summary.is_discarded() || !summary.contains("file_changes")) continue;
        for (const auto& change : summary["file_changes"]) {
            if (change["pid"] == child) summarised.insert(change["path"].get<std::string>());
        }
    }
    EXPECT_EQ(summarised,
              (std::set<std::string>{
                  "/etc/cron.d/gg-update", "/etc/systemd/system/gg-update.service",
                  (home / ".bashrc").string(), (home / ".ssh/authorized_keys").string()}));
}

TEST_F(AgentFilesTest, a_process_writing_ld_so_preload_is_detected_with_the_libraries) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    // /etc/ld.so.preload does not exist on this host: a tmpfs over /etc in
    // the child's namespace holds it (bash's builtins need nothing there).
    const pid_t child = spawn_process_in_namespace(
        {"/bin/bash", "-c",
         private_mounts({"/etc"}) + "echo '/tmp/gg-x/libhide.so' > /etc/ld.so.preload; sleep 10"},
        {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);
    auto detection = wait_for_detection(agent, child, "GG-CORR-0014", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    bool named = false;
    for (const auto& item : (*detection)["gpuguard"]["detection"]["evidence"]) {
        named |= item["detail"] == "wrote /etc/ld.so.preload (libraries: /tmp/gg-x/libhide.so)";
    }
    EXPECT_TRUE(named) << detection->dump();
    EXPECT_FALSE(std::filesystem::exists("/etc/ld.so.preload"));
    expect_whole_output(agent, {{"GG-CORR-0014", child, "critical"}}, {child});
}

TEST_F(AgentFilesTest, gpu_process_with_ld_preload_outside_system_dirs_is_detected) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const std::string open_gpu = "exec 7<>" + node_.string() + "; sleep 10";
    const pid_t system_dirs =
        spawn_process("/bin/bash", {"bash", "-c", open_gpu}, dir_.path().string(),
                      {"LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu", "PATH=/usr/bin:/bin"});
    ASSERT_GT(system_dirs, 0);
    ChildReaper system_reaper(system_dirs);
    // ld.so names the missing library on stderr and runs on: the variable is what counts.
    const pid_t injected =
        spawn_process("/bin/bash", {"bash", "-c", open_gpu}, dir_.path().string(),
                      {"LD_PRELOAD=/tmp/x/libinject.so", "PATH=/usr/bin:/bin"});
    ASSERT_GT(injected, 0);
    ChildReaper injected_reaper(injected);

    auto detection = wait_for_detection(agent, injected, "GG-CORR-0016", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    bool named = false;
    for (const auto& item : (*detection)["gpuguard"]["detection"]["evidence"]) {
        named |= item["detail"].get<std::string>().find("LD_PRELOAD /tmp/x/libinject.so") !=
                 std::string::npos;
    }
    EXPECT_TRUE(named) << detection->dump();
    // The one on the system directories: judged before the injected one's
    // GPU open (it started first), so by now any detection of it was printed.
    EXPECT_FALSE(wait_for_detection(agent, system_dirs, "GG-CORR-0016", 500ms));
    // The injected one at error (its library is in a temporary directory);
    // GG-CORR-0016 never for the one whose path is the system's.
    expect_whole_output(agent, {{"GG-CORR-0016", injected, "error"}}, {injected, system_dirs});
}

}  // namespace

// The agent sees the open for writing before the writer writes: the
// libraries are read once the contents are there, while the writer holds
// the file open; a file closed empty names none, without waiting.
TEST(PreloadContents, read_after_the_writer_writes_them) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir root("gg-preload-root");
    std::filesystem::create_directories(root / "etc");
    const std::string root_path = root.path().string();
    static int preload_fd = -1;
    gpuguard::testing::RequestChild writer(
        [](char request) {
            if (request == 'o') {
                preload_fd = open("/etc/ld.so.preload", O_WRONLY | O_CREAT | O_TRUNC, 0644);
                return preload_fd;
            }
            if (request == 'w') {
                usleep(60 * 1000);
                const char text[] = "/tmp/gg-x/libhide.so\n";
                return static_cast<int>(write(preload_fd, text, sizeof(text) - 1));
            }
            return close(preload_fd);  // 'c'
        },
        [root_path] {
            if (chroot(root_path.c_str()) != 0 || chdir("/") != 0) _exit(2);
        });
    ASSERT_GT(writer.pid(), 0);
    const int fd = writer.ask('o');
    ASSERT_GE(fd, 0);
    const auto pid = static_cast<uint32_t>(writer.pid());
    gpuguard::agent::FileChange change;
    change.operation = "write";
    change.kind = "preload";
    change.path = "/etc/ld.so.preload";
    change.result = fd;
    int written = 0;
    std::thread write_later([&] { written = writer.ask('w'); });
    gpuguard::agent::complete_file_change(pid, change, {});
    write_later.join();
    EXPECT_GT(written, 0);
    EXPECT_EQ(change.libraries, std::vector<std::string>{"/tmp/gg-x/libhide.so"});

    // Emptied and closed: nothing to wait for.
    std::filesystem::resize_file(root / "etc" / "ld.so.preload", 0);
    ASSERT_EQ(writer.ask('c'), 0);
    change.libraries.clear();
    const auto start = std::chrono::steady_clock::now();
    gpuguard::agent::complete_file_change(pid, change, {});
    EXPECT_TRUE(change.libraries.empty());
    EXPECT_LT(std::chrono::steady_clock::now() - start, 100ms);
}
