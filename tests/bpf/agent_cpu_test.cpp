// CPU miners that say nothing, live (GG-CORR-0023): a worker that connected
// to a peer before the agent started (its flow is found established in
// /proc once it is busy), then spins a core and sends small TLS records, is
// reported with its CPU, its peer and its silence in the evidence; a worker
// just as busy on the same peer that writes files, one that is busy with no
// peer (a password audit), and an idle one sending the same records are
// not. The peer is a namespace of the test's own behind a veth pair. The
// rule is the built-in one with its 3-minute windows cut to 4 s (same id,
// `rules.correlation_files`) and the CPU read every 500 ms; the windows
// themselves are the scenarios'. The journal replays to the same detection.
// And the same miner behind a real SOCKS5 proxy on loopback, and behind a
// plain forwarder (socat).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/netns.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::kQuietCpuRule;
using gpuguard::testing::RequestChild;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;

constexpr uint16_t kCpuPeerPort = 8443;  // not a miner's port: the address alone is suspect

TEST_F(AgentDetectTest, quiet_cpu_miner_on_an_established_tls_flow_is_detected_by_behaviour) {
    const gpuguard::testing::DiskScratchFile file("gg-cpu-writer");
    std::unique_ptr<RequestChild> miner, writer, audit, idle;
    std::optional<gpuguard::testing::VethPeer> peer;
    {
        // The workers are forked inside a namespace of the test's own, whose
        // veth peer 10.67.0.2 listens and holds what it accepts.
        gpuguard::testing::NetnsScope netns;
        ASSERT_EQ(netns.error(), "");
        peer.emplace(kCpuPeerPort, /*hold_connections=*/true);
        ASSERT_EQ(peer->error(), "");
        const auto worker = [&](const std::string& comm) {
            return gpuguard::testing::start_io_worker({.comm = comm,
                                                       .gpu_node = "",
                                                       .file = file.path(),
                                                       .tcp_port = kCpuPeerPort,
                                                       .tcp_address = "10.67.0.2"});
        };
        miner = worker("gg-cpuminer");
        writer = worker("gg-cpuwriter");
        audit = worker("gg-cpuaudit");
        idle = worker("gg-idlelink");
    }
    // Connected before the agent runs: no connect event can name these flows.
    for (auto* child : {miner.get(), writer.get(), idle.get()}) ASSERT_EQ(child->ask('c'), 0);
    const auto rules = dir_ / "quiet-cpu.yaml";
    std::ofstream(rules) << kQuietCpuRule;
    std::ofstream(config_, std::ios::app)
        << "  correlation_files: [" << rules.string() << "]\n"
        << "process_table:\n  cpu_interval_ms: 500\n  busy_cpu_percent: 20\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {miner.get(), writer.get(), audit.get()}) ASSERT_EQ(child->ask('b'), 0);
    const auto work = [&] {
        for (auto* child : {miner.get(), writer.get(), idle.get()}) ASSERT_EQ(child->ask('t'), 0);
        ASSERT_EQ(writer->ask('f'), 0);
    };
    std::optional<nlohmann::json> detection;
    const auto busy_since = Clock::now();
    for (const auto deadline = Clock::now() + time_bound(30s);
         !detection && Clock::now() < deadline;) {
        work();
        detection = wait_for_detection(agent, miner->pid(), "GG-CORR-0023", 300ms);
    }
    ASSERT_TRUE(detection) << agent.stderr_text();
    const auto took =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - busy_since);
    const std::string text = detection->dump();
    EXPECT_NE(text.find("10.67.0.2:8443 (no DNS answer named it), TLS"), std::string::npos) << text;
    EXPECT_NE(text.find("CPU p20 "), std::string::npos) << text;
    EXPECT_NE(text.find("no file writes at all: "), std::string::npos) << text;
    EXPECT_EQ((*detection)["log"]["level"], "error") << "raised by its supporting signal";
    EXPECT_EQ((*detection)["rule"]["name"],
              "Quiet CPU miner by its behaviour (the built-in rule with 4 s windows)");
    // The writer (busy, same peer, same records), the audit (busy, no peer)
    // and the idle worker (same peer, never busy) never are: neither in these
    // rounds nor in any line an earlier wait read.
    for (int i = 0; i < 12; ++i) {
        work();
        EXPECT_FALSE(wait_for_detection(agent, writer->pid(), "GG-CORR-0023", 250ms)) << i;
    }
    // The miner's detection and nothing at warning or above for the benign
    // ones (the workers are forks of this test binary: its scan allowed).
    expect_whole_output(
        agent,
        with_test_binary_scans({{"GG-CORR-0023", miner->pid(), "error"}},
                               {miner->pid(), writer->pid(), audit->pid(), idle->pid()}),
        {miner->pid(), writer->pid(), audit->pid(), idle->pid()});
    RecordProperty("detected_after_busy_ms", std::to_string(took.count()));

    // What the journal holds (cpu_usage readings, the established connects,
    // the busy processes' I/O counters) judges the miner the same.
    const auto replayed = replay_journal(rules);
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    const auto pids = replayed_pids(replayed, "GG-CORR-0023");
    for (const pid_t pid : pids) EXPECT_EQ(pid, miner->pid());
    EXPECT_FALSE(pids.empty()) << replayed.stdout_text.substr(0, 4000);
}

// The proxy tests: a miner worker and a benign one, busy, behind a process
// on loopback; the built-in GG-CORR-0023 with 4 s windows.
class AgentProxyTest : public AgentDetectTest {
  protected:
    void use_quiet_cpu_rule() {
        const auto rules = dir_ / "quiet-cpu.yaml";
        std::ofstream(rules) << kQuietCpuRule;
        std::ofstream(config_, std::ios::app)
            << "  correlation_files: [" << rules.string() << "]\n"
            << "process_table:\n  cpu_interval_ms: 500\n  busy_cpu_percent: 20\n";
    }
    // Rounds of small TLS records from both (after `before_round`) until
    // the miner's GG-CORR-0023, for 30 s at most.
    std::optional<nlohmann::json> detect(Subprocess& agent, RequestChild& miner,
                                         RequestChild& benign,
                                         const std::function<void()>& before_round) {
        std::optional<nlohmann::json> detection;
        for (const auto deadline = Clock::now() + time_bound(30s);
             !detection && Clock::now() < deadline;) {
            before_round();
            for (auto* child : {&miner, &benign}) EXPECT_EQ(child->ask('t'), 0);
            detection = wait_for_detection(agent, miner.pid(), "GG-CORR-0023", 300ms);
        }
        return detection;
    }
    // More rounds, and no behaviour rule ever named the benign worker.
    // Eight more rounds of the same work, then the whole output: the
    // miner's detection (an error: it writes no file at all) and nothing at
    // warning or above for the benign worker or the peers the test ran.
    void expect_silent(Subprocess& agent, RequestChild& miner, RequestChild& benign,
                       std::vector<pid_t> helpers) {
        for (int i = 0; i < 8; ++i) {
            for (auto* child : {&miner, &benign}) ASSERT_EQ(child->ask('t'), 0);
            EXPECT_FALSE(wait_for_detection(agent, benign.pid(), "GG-CORR-0023", 250ms)) << i;
        }
        helpers.push_back(miner.pid());
        helpers.push_back(benign.pid());
        expect_whole_output(agent,
                            with_test_binary_scans({{"GG-CORR-0023", miner.pid(), "error"}},
                                                   {miner.pid(), benign.pid()}),
                            helpers);
    }
};

// Behind a SOCKS5 proxy on loopback (issue 38 point 5): a real microsocks
// in the test's namespace, the miner's only connection is to it, and what
// it asks the proxy for (a bare address) is judged as its own peer, with the
// tunnelled TLS as that peer's first bytes. A worker as busy and as quiet
// that asks the same proxy for a host by name (resolved from a hosts file
// bound over /etc/hosts in the proxy's own mount namespace) is not reported.
TEST_F(AgentProxyTest, quiet_cpu_miner_behind_a_loopback_socks5_proxy_is_judged_by_its_target) {
    std::unique_ptr<RequestChild> miner, named;
    std::optional<gpuguard::testing::VethPeer> peer;
    const auto hosts = dir_ / "hosts";
    std::ofstream(hosts) << "127.0.0.1 localhost\n10.67.0.2 storage.example.internal\n";
    pid_t proxy = -1;
    {
        gpuguard::testing::NetnsScope netns;
        ASSERT_EQ(netns.error(), "");
        peer.emplace(kCpuPeerPort, /*hold_connections=*/true);
        ASSERT_EQ(peer->error(), "");
        proxy = gpuguard::testing::spawn_process(
            "/usr/bin/unshare",
            {"unshare", "-m", "--propagation", "private", "/bin/sh", "-c",
             "mount --bind " + hosts.string() +
                 " /etc/hosts && exec microsocks -i 127.0.0.1 -p 1080 >/dev/null"},
            "/", {"PATH=/usr/sbin:/usr/bin:/sbin:/bin"});
        ASSERT_GT(proxy, 0);
        const auto worker = [&](const std::string& comm, const std::string& target) {
            return gpuguard::testing::start_io_worker({.comm = comm,
                                                       .gpu_node = "",
                                                       .file = "",
                                                       .tcp_port = 1080,
                                                       .tcp_address = "127.0.0.1",
                                                       .socks_target = target,
                                                       .socks_port = kCpuPeerPort});
        };
        miner = worker("gg-socksminer", "10.67.0.2");
        named = worker("gg-socksnamed", "storage.example.internal");
    }
    gpuguard::testing::ChildReaper reap_proxy(proxy);
    use_quiet_cpu_rule();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {miner.get(), named.get()}) ASSERT_EQ(child->ask('b'), 0);
    // Through the proxy again every 2 s (the agent samples a busy process's
    // connections once it is watched), then small TLS records.
    auto reconnect_at = Clock::now();
    const auto detection = detect(agent, *miner, *named, [&] {
        if (Clock::now() < reconnect_at) return;
        for (auto* child : {miner.get(), named.get()}) {
            child->ask('x');
            EXPECT_EQ(child->ask('c'), 0);
            EXPECT_EQ(child->ask('p'), 0) << "the proxy refused the CONNECT";
            EXPECT_EQ(child->ask('h'), 0);
        }
        reconnect_at = Clock::now() + 2s;
    });
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("10.67.0.2:8443 (no DNS answer named it), TLS from the first byte, "
                        "through the SOCKS5 proxy at 127.0.0.1:1080"),
              std::string::npos)
        << text;
    expect_silent(agent, *miner, *named, {proxy});
}

// Behind a plain forwarder on loopback (socat, as an SSH -L tunnel or
// stunnel would be): no handshake says where it goes, so the agent finds
// the process that accepted the miner's loopback connection (socat's
// forked child, by the socket's inode in /proc) and judges that process's
// own connection as the miner's. A worker as busy talking to a local
// service with no connection of its own (an echo server) is not reported.
TEST_F(AgentProxyTest, quiet_cpu_miner_behind_a_loopback_forwarder_is_judged_by_its_upstream) {
    std::unique_ptr<RequestChild> miner, local;
    std::optional<gpuguard::testing::VethPeer> peer;
    pid_t forwarder = -1, echo = -1;
    {
        gpuguard::testing::NetnsScope netns;
        ASSERT_EQ(netns.error(), "");
        peer.emplace(kCpuPeerPort, /*hold_connections=*/true);
        ASSERT_EQ(peer->error(), "");
        forwarder = gpuguard::testing::spawn_process(
            "/usr/bin/socat",
            {"socat", "TCP-LISTEN:3333,bind=127.0.0.1,fork,reuseaddr", "TCP:10.67.0.2:8443"}, "/");
        echo = gpuguard::testing::spawn_process(
            "/usr/bin/socat",
            {"socat", "TCP-LISTEN:3334,bind=127.0.0.1,fork,reuseaddr", "EXEC:cat"}, "/");
        ASSERT_GT(forwarder, 0);
        ASSERT_GT(echo, 0);
        const auto worker = [&](const std::string& comm, uint16_t port) {
            return gpuguard::testing::start_io_worker(
                {.comm = comm, .gpu_node = "", .file = "", .tcp_port = port});
        };
        miner = worker("gg-fwdminer", 3333);
        local = worker("gg-fwdlocal", 3334);
        // socat listens once it has started: connect until it answers (bounded).
        for (auto* child : {miner.get(), local.get()}) {
            int connected = -1;
            for (const auto deadline = Clock::now() + 5s;
                 connected != 0 && Clock::now() < deadline;) {
                child->ask('x');
                connected = child->ask('c');
                if (connected != 0) std::this_thread::sleep_for(20ms);
            }
            ASSERT_EQ(connected, 0);
            ASSERT_EQ(child->ask('h'), 0);
        }
    }
    gpuguard::testing::ChildReaper reap_forwarder(forwarder), reap_echo(echo);
    use_quiet_cpu_rule();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {miner.get(), local.get()}) ASSERT_EQ(child->ask('b'), 0);
    const auto detection = detect(agent, *miner, *local, [] {});
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("10.67.0.2:8443 (no DNS answer named it), TLS from the first byte, "
                        "through pid "),
              std::string::npos)
        << text;
    EXPECT_NE(text.find(" (socat) listening on loopback port 3333"), std::string::npos) << text;
    expect_silent(agent, *miner, *local, {forwarder, echo});
}

}  // namespace
