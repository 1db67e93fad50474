// block_ip through nftables, only ever inside network namespaces the test
// creates: a namespace for "this host" (the table lives there) joined by a
// veth pair to a peer namespace that listens on TCP. The host's own ruleset
// is compared before and after.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/enforce/nft_blocker.h"
#include "tests/support/netns.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;
using gpuguard::testing::NetnsScope;
using gpuguard::testing::run_command;
using gpuguard::testing::tcp_connect;
using gpuguard::testing::VethPeer;
using gpuguard::testing::without_gpuguard_table;

constexpr int kPort = 14444;

std::string ruleset() { return run_command({"/usr/sbin/nft", "list", "ruleset"}).stdout_text; }

class NftBlockerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        host_ruleset_ = ruleset();
        netns_.emplace();
        ASSERT_EQ(netns_->error(), "");
        peer_.emplace(kPort);
        ASSERT_EQ(peer_->error(), "");
        ASSERT_EQ(tcp_connect("10.67.0.2", kPort, 1000), 0) << "veth pair not working";
        // Someone else's table in the test namespace: it must survive untouched.
        const auto made = run_command(
            {"/usr/sbin/nft",
             "add table ip other; add chain ip other out { type filter hook output "
             "priority 10; policy accept; }; add rule ip other out tcp dport 9 counter"});
        ASSERT_EQ(made.exit_code, 0) << made.stderr_text;
        other_ruleset_ = ruleset();
    }
    void TearDown() override {
        peer_.reset();
        netns_.reset();
        if (!host_ruleset_.empty() || !::testing::Test::IsSkipped()) {
            EXPECT_EQ(ruleset(), host_ruleset_) << "the host's ruleset changed";
        }
    }

    std::string host_ruleset_;
    std::string other_ruleset_;
    std::optional<NetnsScope> netns_;
    std::optional<VethPeer> peer_;
};

TEST_F(NftBlockerTest, blocked_addresses_fail_to_connect_and_others_succeed) {
    NftBlocker blocker(1h);
    ASSERT_TRUE(blocker.reconcile().ok());
    ASSERT_TRUE(blocker.block("10.67.0.2", 0s).ok());
    ASSERT_TRUE(blocker.block("fd00:67::2", 0s).ok());
    EXPECT_NE(tcp_connect("10.67.0.2", kPort, 500), 0);
    EXPECT_EQ(tcp_connect("10.67.0.3", kPort, 1000), 0);
    EXPECT_NE(tcp_connect("fd00:67::2", kPort, 500), 0);
    EXPECT_EQ(tcp_connect("fd00:67::3", kPort, 1000), 0);

    auto listed = blocker.list();
    ASSERT_TRUE(listed.ok()) << listed.error().message;
    ASSERT_EQ(listed->size(), 2u);
    EXPECT_EQ((*listed)[0].ip, "10.67.0.2");
    EXPECT_EQ((*listed)[0].timeout_s, 3600u);
    EXPECT_EQ((*listed)[1].ip, "fd00:67::2");
    EXPECT_EQ((*listed)[1].ip_version, 6);

    auto removed = blocker.unblock("10.67.0.2");
    ASSERT_TRUE(removed.ok());
    EXPECT_TRUE(*removed);
    EXPECT_FALSE(blocker.unblock("10.67.0.2").value()) << "second removal: not there";
    EXPECT_EQ(tcp_connect("10.67.0.2", kPort, 1000), 0);
    EXPECT_FALSE(blocker.block("10.67.0.2; delete table ip other", 0s).ok());
}

TEST_F(NftBlockerTest, elements_expire_after_their_ttl) {
    NftBlocker blocker(1h);
    ASSERT_TRUE(blocker.block("10.67.0.2", 2s).ok()) << "block() creates the table";
    EXPECT_NE(tcp_connect("10.67.0.2", kPort, 300), 0);
    const auto deadline = std::chrono::steady_clock::now() + 6s;
    while (!blocker.list()->empty() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(100ms);
    }
    EXPECT_TRUE(blocker.list()->empty()) << "element still there after its 2 s TTL";
    EXPECT_EQ(tcp_connect("10.67.0.2", kPort, 1000), 0);
}

TEST_F(NftBlockerTest, adds_are_idempotent_and_reconcile_keeps_elements) {
    {
        NftBlocker blocker(1h);
        ASSERT_TRUE(blocker.block("10.67.0.2", 0s).ok());
        ASSERT_TRUE(blocker.block("10.67.0.2", 0s).ok());
        EXPECT_EQ(blocker.list()->size(), 1u);
    }
    NftBlocker restarted(1h);  // the agent starting again
    ASSERT_TRUE(restarted.reconcile().ok());
    ASSERT_TRUE(restarted.reconcile().ok());
    EXPECT_EQ(restarted.list()->size(), 1u) << "elements survive a restart";
    const auto chain =
        run_command({"/usr/sbin/nft", "list", "chain", "inet", "gpuguard", "output"}).stdout_text;
    size_t rules = 0;
    for (size_t at = chain.find("drop"); at != std::string::npos; at = chain.find("drop", at + 1))
        ++rules;
    EXPECT_EQ(rules, 2u) << "reconcile must not duplicate rules:\n" << chain;
    EXPECT_NE(tcp_connect("10.67.0.2", kPort, 300), 0);
}

TEST_F(NftBlockerTest, only_our_table_changes_and_flush_all_removes_it) {
    NftBlocker blocker(1h);
    ASSERT_TRUE(blocker.block("10.67.0.2", 0s).ok());
    ASSERT_TRUE(blocker.block("fd00:67::3", 0s).ok());
    const std::string during = ruleset();
    EXPECT_NE(during.find("table inet gpuguard"), std::string::npos);
    EXPECT_EQ(without_gpuguard_table(during), without_gpuguard_table(other_ruleset_));

    ASSERT_TRUE(blocker.flush().ok());
    EXPECT_TRUE(blocker.list()->empty());
    EXPECT_TRUE(blocker.table_exists()) << "flush empties the sets, keeps the table";
    EXPECT_EQ(tcp_connect("10.67.0.2", kPort, 1000), 0);

    ASSERT_TRUE(blocker.remove_table().ok());
    EXPECT_FALSE(blocker.table_exists());
    ASSERT_TRUE(blocker.remove_table().ok()) << "removing a missing table is fine";
    EXPECT_EQ(ruleset(), other_ruleset_) << "flush --all leaves exactly what was there";
}

TEST_F(NftBlockerTest, the_enforcer_blocks_a_detections_peer) {
    NftBlocker blocker(1h);
    EnforcementConfig config;
    config.block_ttl_s = 60;
    EnforcerDependencies deps;
    deps.blocker = &blocker;
    Enforcer enforcer(config, deps);
    Detection detection;
    detection.action = "block_ip";
    detection.peer = DetectionPeer{"10.67.0.3", static_cast<uint16_t>(kPort), "pool.example", ""};
    const auto outcome = enforcer.enforce(detection);
    ASSERT_TRUE(outcome);
    EXPECT_EQ(outcome->outcome, "success") << outcome->reason;
    EXPECT_EQ(outcome->reason, "blocked 10.67.0.3 via nftables for 60 s");
    EXPECT_NE(tcp_connect("10.67.0.3", kPort, 300), 0);
    EXPECT_EQ(tcp_connect("10.67.0.2", kPort, 1000), 0);
    EXPECT_EQ(blocker.list()->at(0).timeout_s, 60u);
}

// A network namespace of its own for a "container" behind this namespace,
// which routes for it: client gg-d 10.68.0.2/24 -> gg-c 10.68.0.1 (here) ->
// the VethPeer at 10.67.0.2/.3, so its traffic crosses our forward chain.
class RoutedClient {
  public:
    RoutedClient() {
        int ready[2];
        if (pipe(ready) != 0) return;
        pid_ = fork();
        if (pid_ == 0) {
            close(ready[0]);
            if (unshare(CLONE_NEWNET) != 0) _exit(1);
            const char byte = 1;
            (void)!write(ready[1], &byte, 1);
            pause();
            _exit(0);
        }
        close(ready[1]);
        char byte = 0;
        const bool started = read(ready[0], &byte, 1) == 1;
        close(ready[0]);
        if (!started) return;
        ns_ = "/proc/" + std::to_string(pid_) + "/ns/net";
        for (const auto& command : std::vector<std::vector<std::string>>{
                 {"/usr/sbin/ip", "link", "add", "gg-c", "type", "veth", "peer", "name", "gg-d",
                  "netns", std::to_string(pid_)},
                 {"/usr/sbin/ip", "addr", "add", "10.68.0.1/24", "dev", "gg-c"},
                 {"/usr/sbin/ip", "link", "set", "gg-c", "up"},
                 {"/usr/bin/nsenter", "--net=" + ns_, "/usr/sbin/ip", "addr", "add", "10.68.0.2/24",
                  "dev", "gg-d"},
                 {"/usr/bin/nsenter", "--net=" + ns_, "/usr/sbin/ip", "link", "set", "gg-d", "up"},
                 {"/usr/bin/nsenter", "--net=" + ns_, "/usr/sbin/ip", "route", "add", "default",
                  "via", "10.68.0.1"}}) {
            const auto result = run_command(command);
            if (result.exit_code != 0) {
                error_ = command[0] + ": " + result.stderr_text;
                return;
            }
        }
        error_.clear();
    }
    ~RoutedClient() {
        if (pid_ <= 0) return;
        kill(pid_, SIGKILL);  // our own child; its namespace and gg-d go with it
        waitpid(pid_, nullptr, 0);
    }
    RoutedClient(const RoutedClient&) = delete;
    RoutedClient& operator=(const RoutedClient&) = delete;

    const std::string& error() const { return error_; }
    const std::string& ns() const { return ns_; }

    // tcp_connect() from inside the client's namespace (a forked child).
    int connect(const std::string& ip, int port, int timeout_ms) const {
        const pid_t child = fork();
        if (child == 0) {
            const int fd = open(ns_.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) _exit(250);
            _exit(std::min(tcp_connect(ip, port, timeout_ms), 249));
        }
        int status = 0;
        waitpid(child, &status, 0);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }

  private:
    pid_t pid_ = -1;
    std::string ns_;
    std::string error_ = "client namespace did not start";
};

// Containers' traffic is forwarded, not sent: the table's forward chain
// drops it too, and only for the blocked address.
TEST_F(NftBlockerTest, forwarded_traffic_from_a_routed_namespace_is_blocked_too) {
    RoutedClient client;
    ASSERT_EQ(client.error(), "") << client.error();
    // This namespace routes between the client and the peer (per-namespace sysctl).
    std::ofstream("/proc/sys/net/ipv4/ip_forward") << "1\n";
    ASSERT_EQ(
        run_command({"/usr/bin/nsenter", "--net=/proc/" + std::to_string(peer_->pid()) + "/ns/net",
                     "/usr/sbin/ip", "route", "add", "10.68.0.0/24", "via", "10.67.0.1"})
            .exit_code,
        0);
    ASSERT_EQ(client.connect("10.67.0.2", kPort, 2000), 0) << "not routed before the block";

    NftBlocker blocker(1h);
    ASSERT_TRUE(blocker.block("10.67.0.2", 0s).ok());
    EXPECT_NE(client.connect("10.67.0.2", kPort, 500), 0) << "forwarded connect got through";
    EXPECT_EQ(client.connect("10.67.0.3", kPort, 2000), 0) << "unblocked address refused";
    const auto forward =
        run_command({"/usr/sbin/nft", "list", "chain", "inet", "gpuguard", "forward"}).stdout_text;
    EXPECT_NE(forward.find("packets 0 "), forward.find("packets")) << forward;
    ASSERT_TRUE(blocker.remove_table().ok());
    EXPECT_EQ(client.connect("10.67.0.2", kPort, 2000), 0);
}

// The agent's start-up inside the test namespace: with no table it creates
// none (a host that never blocked gets no firewall table); with a damaged
// one (a set without timeouts, a missing set and chain, a stray rule) it
// reconciles: the table is repaired, its blocked address is kept and still
// blocked, and the other table is untouched.
TEST_F(NftBlockerTest, agent_start_repairs_a_damaged_table_and_keeps_its_elements) {
    gpuguard::testing::TempDir dir("gg-nft-agent");
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << "control:\n  socket: \"\"\n"
                          << "journal:\n  enabled: false\n"
                          << "rules:\n  main_file: " << (dir / "miner-rules.yaml").string()
                          << "\n  drop_in_dir: " << (dir / "rules.d").string() << "\n";
    const auto start_agent = [&] {
        auto agent = std::make_unique<gpuguard::testing::Subprocess>(
            std::vector<std::string>{GPUGUARD_BINARY, "run", "--config", config.string()});
        EXPECT_TRUE(agent->wait_for_agent_ready(30s)) << agent->stderr_text();
        return agent;
    };
    {
        auto agent = start_agent();
        EXPECT_EQ(agent->stop(SIGTERM, 10s), 0) << agent->stderr_text();
        EXPECT_EQ(ruleset(), other_ruleset_) << "an agent that blocked nothing made a table";
    }

    const auto damaged = run_command(
        {"/usr/sbin/nft",
         "add table inet gpuguard; add set inet gpuguard blocked_v4 { type ipv4_addr; }; "
         "add element inet gpuguard blocked_v4 { 10.67.0.2 }; add chain inet gpuguard output { "
         "type filter hook output priority 0; policy accept; }; add rule inet gpuguard output "
         "tcp dport 9 accept"});
    ASSERT_EQ(damaged.exit_code, 0) << damaged.stderr_text;
    EXPECT_EQ(tcp_connect("10.67.0.2", kPort, 1000), 0) << "the damaged table blocks nothing";

    auto agent = start_agent();
    EXPECT_NE(agent->stderr_text().find("was damaged"), std::string::npos) << agent->stderr_text();
    EXPECT_NE(agent->stderr_text().find("reconciled, 1 blocked address(es) kept"),
              std::string::npos)
        << agent->stderr_text();
    EXPECT_EQ(agent->stop(SIGTERM, 10s), 0) << agent->stderr_text();

    NftBlocker blocker(1h);
    auto listed = blocker.list();
    ASSERT_TRUE(listed.ok()) << listed.error().message;
    ASSERT_EQ(listed->size(), 1u);
    EXPECT_EQ((*listed)[0].ip, "10.67.0.2");
    const std::string table =
        run_command({"/usr/sbin/nft", "list", "table", "inet", "gpuguard"}).stdout_text;
    EXPECT_EQ(table.find("dport 9"), std::string::npos) << table;
    EXPECT_NE(table.find("set blocked_v6"), std::string::npos) << table;
    EXPECT_NE(table.find("chain forward"), std::string::npos) << table;
    size_t timeouts = 0;
    for (size_t at = table.find("flags timeout"); at != std::string::npos;
         at = table.find("flags timeout", at + 1)) {
        ++timeouts;
    }
    EXPECT_EQ(timeouts, 2u) << table;
    EXPECT_NE(tcp_connect("10.67.0.2", kPort, 500), 0) << "the kept element blocks again";
    EXPECT_EQ(tcp_connect("10.67.0.3", kPort, 1000), 0);
    EXPECT_EQ(without_gpuguard_table(ruleset()), without_gpuguard_table(other_ruleset_));
}

}  // namespace
}  // namespace gpuguard::agent
