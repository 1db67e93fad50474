// The live agent's enforcement in cgroup programs (AgentDetectTest,
// agent_detect_fixture.h): deny_gpu, block_ip through the connect fallback,
// and pinned enforcement that outlives a killed agent and is taken over.
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/netns.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::copy_sleep;
using gpuguard::testing::LoopbackPool;
using gpuguard::testing::NetnsScope;
using gpuguard::testing::OwnChild;
using gpuguard::testing::RequestChild;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TestCgroup;

// A network namespace the test made, 10.77.0.1 on its loopback interface
// (127/8 is never blocked) and a "pool" listening there on a miner port.
struct PoolNetns {
    NetnsScope netns;
    std::optional<LoopbackPool> pool;
    std::string error;
    PoolNetns() {
        if (error = netns.error(); !error.empty()) return;
        const auto added = gpuguard::testing::run_command(
            {"/usr/sbin/ip", "addr", "add", "10.77.0.1/32", "dev", "lo"}, 10s);
        if (added.exit_code != 0) {
            error = "ip addr add: " + added.stderr_text;
            return;
        }
        pool.emplace(INADDR_ANY);
        if (pool->fd < 0) error = "no free miner port";
    }
};

// A child the test started that acts when asked, named `comm`: 'O' opens
// the fake GPU node and keeps it open, 'o' opens and closes it, 'c' connects
// to `ip`:`port`. Each request is answered with the errno (0: it worked).
std::function<int(char)> gpu_probe(const std::string& node, const std::string& ip = "",
                                   int port = 0) {
    return [node, ip, port](char request) {
        if (request == 'c') return gpuguard::testing::tcp_connect(ip, port, 1000);
        const int fd = open(node.c_str(), O_RDWR);
        const int result = fd >= 0 ? 0 : errno;
        if (fd >= 0 && request == 'o') close(fd);
        return result;
    };
}
std::function<void()> named(const std::string& comm) {
    return [comm] { prctl(PR_SET_NAME, comm.c_str()); };
}
RequestChild gpu_prober(const std::string& comm, const std::string& node,
                        const std::string& ip = "", int port = 0) {
    return RequestChild(gpu_probe(node, ip, port), named(comm));
}

// deny_gpu from a rule: the live agent attaches cgroup/dev to the cgroup of
// the detected process (a cgroup the test made), so its next open of the
// fake GPU node fails with EPERM; this process, outside it, still opens the
// node, and the denial ends with the agent. BPF LSM: loaded where the kernel
// runs it, else one warning says so.
TEST_F(AgentDetectTest, deny_gpu_rule_denies_the_gpu_node_to_the_detections_cgroup) {
    TestCgroup cgroup("gpuguard-deny");
    ASSERT_EQ(cgroup.error(), "");
    std::ofstream(dir_ / "miner-rules.yaml") << R"(rules:
  - id: local-deny-gpu
    name: Renamed miner denied the GPU
    severity: critical
    confidence: 0.9
    action: deny_gpu
    process_name: ["gg-deny-*"]
)";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const bool lsm = gpuguard::agent::probe_bpf_lsm("").available;
    const auto& log = agent.stderr_text();
    const auto warned = log.find("deny_gpu: BPF LSM unavailable");
    if (lsm) {
        EXPECT_EQ(warned, std::string::npos) << log;
    } else {
        ASSERT_NE(warned, std::string::npos) << log;
        EXPECT_EQ(log.find("BPF LSM unavailable", log.find('\n', warned)), std::string::npos)
            << "one line\n"
            << log;
    }

    auto child = gpu_prober("gg-deny-1", node_.string());
    ASSERT_GT(child.pid(), 0);
    ASSERT_TRUE(cgroup.add(child.pid()));
    ASSERT_EQ(child.ask('O'), 0) << "opens the GPU before the deny";
    const auto reason = enforced_reason(agent, child.pid(), "GG-CORR-0001", "deny_gpu", alerts);
    ASSERT_NE(reason, "");
    EXPECT_NE(reason.find("GPU devices denied to cgroup " + cgroup.path()), std::string::npos)
        << reason;
    EXPECT_EQ(child.ask('o'), EPERM) << "opened the GPU after the deny";
    const int fd = open(node_.c_str(), O_RDWR);
    EXPECT_GE(fd, 0) << "outside the denied cgroup the node still opens";
    if (fd >= 0) close(fd);

    // The prober is a fork of this test binary: its YARA verdict allowed.
    expect_whole_output(agent,
                        with_test_binary_scans({{"GG-CORR-0001", child.pid(), "critical"},
                                                {"GG-CORR-0012", child.pid(), "error"}},
                                               {child.pid()}),
                        {child.pid()});
    EXPECT_EQ(child.ask('o'), 0) << "the denial ends with the agent";
}

// block_ip through the cgroup/connect4/6 fallback
// (enforcement.connect_fallback_cgroup), in a network namespace the test
// made: a GPU process in the test's cgroup connects to a "pool" on this
// namespace's loopback interface (10.77.0.1: 127/8 is never blocked), the
// agent blocks the peer, and the process's next connect is refused while
// connects from outside the cgroup still work. No nftables table appears.
TEST_F(AgentDetectTest, block_ip_through_the_connect_fallback_refuses_the_cgroups_connects) {
    PoolNetns netns;
    ASSERT_EQ(netns.error, "");
    const LoopbackPool& pool = *netns.pool;
    TestCgroup cgroup("gpuguard-block");
    ASSERT_EQ(cgroup.error(), "");
    std::ofstream(rules_dir_ / "10-block.yaml")
        << "signatures:\n  override:\n    - id: GG-PORT-0001\n      action: block_ip\n";
    std::ofstream(config_, std::ios::app)
        << "enforcement:\n  connect_fallback_cgroup: \"" << cgroup.path() << "\"\n";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    EXPECT_NE(agent.stderr_text().find("block_ip: cgroup/connect4/6 on cgroup " + cgroup.path()),
              std::string::npos)
        << agent.stderr_text();

    auto child = gpu_prober("gg-pool-client", node_.string(), "10.77.0.1", pool.port);
    ASSERT_GT(child.pid(), 0);
    ASSERT_TRUE(cgroup.add(child.pid()));
    ASSERT_EQ(child.ask('O'), 0);
    ASSERT_EQ(child.ask('c'), 0) << "the first connect goes through (and is detected)";
    const auto reason = enforced_reason(agent, child.pid(), "GG-CORR-0002", "block_ip", alerts);
    ASSERT_NE(reason, "");
    EXPECT_NE(reason.find("blocked 10.77.0.1 via cgroup_connect"), std::string::npos) << reason;
    EXPECT_EQ(child.ask('c'), EPERM) << "connect after the block";
    EXPECT_EQ(gpuguard::testing::tcp_connect("10.77.0.1", pool.port, 1000), 0)
        << "outside the cgroup: not filtered";
    EXPECT_EQ(gpuguard::testing::run_command({"/usr/sbin/nft", "list", "ruleset"}).stdout_text, "")
        << "the fallback must not create an nftables table";
    expect_whole_output(
        agent, with_test_binary_scans({{"GG-CORR-0002", child.pid(), "error"}}, {child.pid()}),
        {child.pid()});
}

// A pinned link's kernel ids (the link, the program it runs); zeros when
// nothing is pinned at `file`.
struct PinnedLink {
    uint32_t id = 0;
    uint32_t prog_id = 0;
};
PinnedLink pinned_link(const std::filesystem::path& file) {
    PinnedLink ids;
    const int fd = bpf_obj_get(file.c_str());
    if (fd < 0) return ids;
    bpf_link_info info{};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &length) == 0) ids = {info.id, info.prog_id};
    close(fd);
    return ids;
}

// Programs attached to the cgroup directory `dir` for `type`.
uint32_t attached_programs(const std::string& dir, bpf_attach_type type) {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint32_t ids[8] = {}, count = 8, flags = 0;
    if (bpf_prog_query(fd, type, 0, &flags, ids, &count) != 0) count = 0;
    close(fd);
    return count;
}

// enforcement.pin_path: the agent dies by SIGKILL and its in-kernel
// enforcement stays in force (a known-bad name dies at exec, the denied
// cgroup cannot open the GPU nor reach the blocked pool); the next agent
// takes it over without attaching anything twice: the cgroup links are the
// same links running its programs, the tracepoint links are its own and the
// old ones are gone. A clean stop then lifts all of it. Everything is pinned
// in a bpf filesystem the test mounts, never the host's /sys/fs/bpf.
TEST_F(AgentDetectTest, pinned_enforcement_outlives_a_killed_agent_and_is_taken_over) {
    const auto bpffs = dir_ / "bpffs";
    std::filesystem::create_directory(bpffs);
    ASSERT_EQ(mount("bpf", bpffs.c_str(), "bpf", 0, nullptr), 0) << std::strerror(errno);
    struct Unmount {
        std::string path;
        ~Unmount() { umount2(path.c_str(), MNT_DETACH); }  // drops whatever is still pinned
    } unmount{bpffs.string()};
    const auto pins = bpffs / "gpuguard";
    PoolNetns netns;
    ASSERT_EQ(netns.error, "");
    const LoopbackPool& pool = *netns.pool;
    TestCgroup cgroup("gpuguard-pin");
    ASSERT_EQ(cgroup.error(), "");
    const auto doomed = dir_ / "gg-doomed";
    copy_sleep(doomed, "");
    std::ofstream(dir_ / "miner-rules.yaml") << R"(rules:
  - id: local-doomed
    action: kill_now
    process_name: [gg-doomed]
  - id: local-deny-gpu
    severity: critical
    action: deny_gpu
    process_name: ["gg-deny-*"]
)";
    std::ofstream(rules_dir_ / "10-block.yaml")
        << "signatures:\n  override:\n    - id: GG-PORT-0001\n      action: block_ip\n";
    std::ofstream(config_, std::ios::app)
        << "enforcement:\n  connect_fallback_cgroup: \"" << cgroup.path() << "\"\n"
        << "  pin_path: " << pins.string() << "\n";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    use_control_socket();
    const std::vector<std::string> run = {GPUGUARD_BINARY, "run", "--config", config_.string(),
                                          "--json"};
    auto doomed_dies = [&doomed] {
        const std::string file = doomed.string();
        OwnChild child(fork());
        if (child.pid == 0) {
            execl(file.c_str(), file.c_str(), "0", nullptr);
            _exit(127);
        }
        return child.wait_exit(5s) && child.killed_by_sigkill();
    };

    // Started after the agent: one found running at start would be judged
    // by its name there and denied before its first GPU open.
    std::unique_ptr<RequestChild> prober;
    std::map<std::string, PinnedLink> first;
    {
        Subprocess agent(run);
        ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
        prober = std::make_unique<RequestChild>(gpu_probe(node_.string(), "10.77.0.1", pool.port),
                                                named("gg-deny-miner"));
        ASSERT_GT(prober->pid(), 0);
        ASSERT_TRUE(cgroup.add(prober->pid()));
        ASSERT_EQ(prober->ask('O'), 0) << "opens the GPU before the deny";
        ASSERT_NE(enforced_reason(agent, prober->pid(), "GG-CORR-0001", "deny_gpu", alerts), "");
        ASSERT_EQ(prober->ask('c'), 0) << "the first connect goes through (and is detected)";
        ASSERT_NE(enforced_reason(agent, prober->pid(), "GG-CORR-0002", "block_ip", alerts), "");
        for (const auto& entry : std::filesystem::directory_iterator(pins / "links")) {
            first[entry.path().filename().string()] = pinned_link(entry.path());
        }
        EXPECT_EQ(agent.stop(SIGKILL, 10s), 128 + SIGKILL) << agent.stderr_text();
    }
    const std::string cgroup_name = gpuguard::agent::escape_pin_name(cgroup.path());
    for (const std::string& name :
         {"dev@" + cgroup_name, "connect4@" + cgroup_name, "connect6@" + cgroup_name,
          std::string("sensor-gg_sched_exec")}) {
        ASSERT_TRUE(first.contains(name) && first[name].id != 0) << name << " is not pinned";
    }
    // The GPU-open check, in whichever attachment mode auto chose.
    EXPECT_TRUE(first.contains("sensor-gg_exit_openat") || first.contains("sensor-gg_fn_openat") ||
                first.contains("sensor-gg_btf_sys_exit") ||
                first.contains("sensor-gg_raw_sys_exit"))
        << "no GPU-open hook pinned";

    // No agent runs: the kernel enforces on its own.
    EXPECT_TRUE(doomed_dies()) << "kill_now at exec without an agent";
    EXPECT_EQ(prober->ask('o'), EPERM) << "GPU open in the denied cgroup without an agent";
    EXPECT_EQ(prober->ask('c'), EPERM) << "connect to the blocked pool without an agent";

    Subprocess agent(run);
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const std::string log = agent.stderr_text();
    EXPECT_NE(log.find("GPU devices still denied to cgroup " + cgroup.path() + " (taken over)"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("cgroup/connect4/6 on cgroup " + cgroup.path() + " (taken over)"),
              std::string::npos)
        << log;
    for (const auto& [name, before] : first) {
        const PinnedLink now = pinned_link(pins / "links" / name);
        ASSERT_NE(now.id, 0u) << name << " is no longer pinned";
        EXPECT_NE(now.prog_id, before.prog_id) << name << " still runs the dead agent's program";
        if (name.starts_with("sensor-")) {
            EXPECT_NE(now.id, before.id) << name;
            const int old_fd = bpf_link_get_fd_by_id(before.id);
            EXPECT_LT(old_fd, 0) << name << ": the dead agent's link is still attached";
            if (old_fd >= 0) close(old_fd);
        } else {
            EXPECT_EQ(now.id, before.id) << name << " was replaced, not taken over";
        }
    }
    EXPECT_EQ(attached_programs(cgroup.dir(), BPF_CGROUP_DEVICE), 1u);
    EXPECT_EQ(attached_programs(cgroup.dir(), BPF_CGROUP_INET4_CONNECT), 1u);
    EXPECT_EQ(attached_programs(cgroup.dir(), BPF_CGROUP_INET6_CONNECT), 1u);
    EXPECT_TRUE(doomed_dies()) << "kill_now at exec under the second agent";
    EXPECT_EQ(prober->ask('o'), EPERM);
    EXPECT_EQ(prober->ask('c'), EPERM);
    const auto report = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()}, 10s);
    ASSERT_EQ(report.exit_code, 0) << report.stderr_text;
    const auto enforcement = nlohmann::json::parse(report.stdout_text)["enforcement"];
    EXPECT_EQ(enforcement["pinned"]["path"], pins.string()) << enforcement.dump();
    EXPECT_EQ(enforcement["pinned"]["links_taken_over"], 3) << enforcement.dump();
    EXPECT_EQ(enforcement["pinned"]["maps_dropped"], 0) << enforcement.dump();
    EXPECT_EQ(enforcement["denied_cgroups"], nlohmann::json::array({cgroup.path()}))
        << enforcement.dump();

    // A clean stop lifts it all. What both agents printed about the prober
    // (the first: named, on the GPU, at its pool; the second: found running
    // at its start) is checked whole; its YARA verdict allowed (a fork of
    // this test binary).
    const pid_t prober_pid = prober->pid();
    expect_whole_output(agent,
                        with_test_binary_scans({{"GG-CORR-0012", prober_pid, "error"},
                                                {"GG-CORR-0001", prober_pid, "critical"},
                                                {"GG-CORR-0002", prober_pid, "error"}},
                                               {prober_pid}),
                        {prober_pid});
    EXPECT_FALSE(std::filesystem::exists(pins)) << "pins left after a clean stop";
    EXPECT_EQ(attached_programs(cgroup.dir(), BPF_CGROUP_DEVICE), 0u);
    EXPECT_EQ(prober->ask('o'), 0) << "the denial ends with a clean stop";
    EXPECT_EQ(prober->ask('c'), 0) << "the block ends with a clean stop";
    EXPECT_FALSE(doomed_dies()) << "kill_now ends with a clean stop";
}

}  // namespace
