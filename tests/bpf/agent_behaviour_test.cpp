// Behaviour and precision in the running agent. The quiet-miner rule (GG-CORR-0013): a
// process that pegs its GPU (the fake NVML), writes nothing, and sends small
// periodic messages of a protocol gpuguard does not recognise to an address
// no DNS answer named is reported with each signal in its evidence; the same
// worker talking to loopback (a local service) and one that writes files are
// not. The peer is a namespace of the test's own behind a veth pair. The
// rule is the built-in one with its 2-minute windows cut to 2 s (same id,
// `rules.correlation_files`); the windows themselves are the scenarios'.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/netns.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::LoopbackPool;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;

constexpr uint16_t kOpaquePort = 8443;  // not a miner's port: the address alone is suspect

TEST_F(AgentDetectTest, quiet_gpu_miner_talking_to_an_unnamed_peer_is_detected_by_behaviour) {
    LoopbackPool local;
    ASSERT_GE(local.fd, 0);
    const gpuguard::testing::DiskScratchFile file("gg-quiet-writer");
    std::unique_ptr<gpuguard::testing::RequestChild> quiet, chatty_local, writer;
    std::optional<gpuguard::testing::VethPeer> peer;
    {
        // The workers are forked inside a namespace of the test's own, whose
        // veth peer 10.67.0.2 listens; the agent stays on the host.
        gpuguard::testing::NetnsScope netns;
        ASSERT_EQ(netns.error(), "");
        peer.emplace(kOpaquePort, /*hold_connections=*/true);
        ASSERT_EQ(peer->error(), "");
        const auto worker = [&](const std::string& comm, const std::string& address,
                                uint16_t port) {
            return gpuguard::testing::start_io_worker({.comm = comm,
                                                       .gpu_node = node_.string(),
                                                       .file = file.path(),
                                                       .tcp_port = port,
                                                       .tcp_address = address});
        };
        quiet = worker("gg-quiet", "10.67.0.2", kOpaquePort);
        writer = worker("gg-writer", "10.67.0.2", kOpaquePort);
    }
    chatty_local = gpuguard::testing::start_io_worker({.comm = "gg-local",
                                                       .gpu_node = node_.string(),
                                                       .file = file.path(),
                                                       .tcp_port = local.port});
    for (auto* child : {quiet.get(), writer.get(), chatty_local.get()}) {
        ASSERT_EQ(child->ask('g'), 0);
    }
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 99,
         .memory_utilization = 40,
         .memory_used = 6ull << 30,
         .processes = {{quiet->pid(), 2ull << 30, 98},
                       {writer->pid(), 2ull << 30, 98},
                       {chatty_local->pid(), 2ull << 30, 98}}});
    const auto rules = dir_ / "quiet.yaml";
    std::ofstream(rules) << R"(rules:
  - id: GG-CORR-0013
    name: Quiet GPU miner by its behaviour (2 s windows)
    severity: warning
    action: alert
    window: 1h
    when:
      gpu_held: true
      sustained_utilization: {above_percent: 90, for: 2s, max_connects: 3, min_connects: 1}
      quiet_io: {for: 2s, max_file_write_bytes: 256KB, max_net_send_bytes: 64KB,
                 max_bytes_per_send: 1KB, max_send_gap: 1s}
      opaque_peer: true
    supporting:
      severity: error
      signals:
        - name: no file writes at all
          quiet_io: {for: 2s, max_file_write_bytes: 0, max_net_send_bytes: 64KB,
                     max_bytes_per_send: 1KB, max_send_gap: 1s}
)";
    std::ofstream(config_, std::ios::app)
        << "  correlation_files: [" << rules.string() << "]\n"
        << "backends:\n  interval_ms: 200\n  nvml_library: \"" << GPUGUARD_FAKE_NVML_PATH << "\"\n";
    Subprocess agent({"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script.string(),
                      GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {quiet.get(), writer.get(), chatty_local.get()}) {
        ASSERT_EQ(child->ask('c'), 0);
    }
    const auto work = [&] {
        for (auto* child : {quiet.get(), writer.get(), chatty_local.get()}) {
            ASSERT_EQ(child->ask('s'), 0);
        }
        ASSERT_EQ(writer->ask('f'), 0);
    };
    std::optional<nlohmann::json> detection;
    for (const auto deadline = Clock::now() + time_bound(15s);
         !detection && Clock::now() < deadline;) {
        work();
        detection = wait_for_detection(agent, quiet->pid(), "GG-CORR-0013", 200ms);
    }
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("10.67.0.2:8443 (no DNS answer named it)"), std::string::npos) << text;
    EXPECT_NE(text.find("a protocol gpuguard does not recognise"), std::string::npos) << text;
    EXPECT_NE(text.find("compute above 90%"), std::string::npos) << text;
    EXPECT_NE(text.find("no file writes at all: "), std::string::npos) << text;
    // The loopback talker and the writer, pegged and sending the same, never are.
    for (int i = 0; i < 15; ++i) {
        work();
        EXPECT_FALSE(wait_for_detection(agent, writer->pid(), "GG-CORR-0013", 200ms)) << i;
        EXPECT_FALSE(wait_for_detection(agent, chatty_local->pid(), "GG-CORR-0013", 1ms)) << i;
    }
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

}  // namespace

namespace {

// Precision, live: GPU programs the agent finds running (its /proc
// bootstrap) from a temporary directory and from an executable a package
// upgrade replaced. The first is a notice and nothing more; the second,
// "/usr/local/lib/... (deleted)" where only a package manager writes, is
// nothing at all. The "package" lives on a tmpfs in a mount namespace of the
// child's own, so the host's /usr is never touched.
TEST_F(AgentDetectTest, temp_dir_and_upgraded_gpu_programs_are_at_most_a_notice) {
    // A CI job's freshly built GPU test binary, run from /tmp.
    const auto runner = dir_ / "gpu-runner";
    std::filesystem::copy_file("/usr/bin/sleep", runner);
    gpuguard::testing::OwnChild from_tmp(start_child("gpu-runner", {runner.string(), "60"}));

    // A daemon whose binary an upgrade replaced while it ran.
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const std::string node = node_.string();
    const pid_t daemon_pid = fork();
    if (daemon_pid == 0) {
        close(ready[0]);
        if (unshare(CLONE_NEWNS) != 0 ||
            mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
            mount("tmpfs", "/usr/local/lib", "tmpfs", 0, "size=16m") != 0) {
            _exit(2);
        }
        std::error_code ec;
        std::filesystem::copy_file("/usr/bin/sleep", "/usr/local/lib/gg-upgraded-daemon", ec);
        if (ec || open(node.c_str(), O_RDWR) < 0) _exit(3);
        prctl(PR_SET_NAME, "gg-upgraded-dae");
        (void)!write(ready[1], "x", 1);
        close(ready[1]);
        execl("/usr/local/lib/gg-upgraded-daemon", "gg-upgraded-daemon", "60", nullptr);
        _exit(4);
    }
    gpuguard::testing::OwnChild upgraded(daemon_pid);
    close(ready[1]);
    char byte = 0;
    ASSERT_EQ(read(ready[0], &byte, 1), 1) << "the daemon's mount namespace could not be made";
    close(ready[0]);
    std::this_thread::sleep_for(100ms);  // past its execl
    // The upgrade: a new file renamed over the running one.
    const std::string lib = "/proc/" + std::to_string(daemon_pid) + "/root/usr/local/lib/";
    std::filesystem::copy_file("/usr/bin/sleep", lib + "gg-upgraded-daemon.new");
    std::filesystem::rename(lib + "gg-upgraded-daemon.new", lib + "gg-upgraded-daemon");
    std::error_code ec;
    const auto exe =
        std::filesystem::read_symlink("/proc/" + std::to_string(daemon_pid) + "/exe", ec);
    ASSERT_EQ(exe.string(), "/usr/local/lib/gg-upgraded-daemon (deleted)");

    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto notice = wait_for_detection(agent, from_tmp.pid, "GG-CORR-0005", 5s);
    ASSERT_TRUE(notice) << agent.stderr_text();
    EXPECT_EQ((*notice)["log"]["level"], "notice") << notice->dump();
    // Nothing else about either, within a second more.
    wait_for_detection(agent, 0, "none", 1s);
    for (const auto& line : seen_) {
        const auto record = nlohmann::json::parse(line);
        const auto pid = record["process"]["pid"];
        if (pid == upgraded.pid) ADD_FAILURE() << "the upgraded daemon was reported: " << line;
        if (pid == from_tmp.pid && record["log"]["level"] != "notice") {
            ADD_FAILURE() << "more than a notice for the temp-dir runner: " << line;
        }
    }
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

}  // namespace
