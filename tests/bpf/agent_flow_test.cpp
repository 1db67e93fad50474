// Flows by their shape in the running agent: two GPU workers hold a TLS
// connection each to a peer of the test's own (a namespace the test made)
// that pushes a short line every 4.2 s, as a pool pushes jobs. One sends a
// small encrypted share now and then, never right after a job: its flow
// has a pool's shape, the kernel counts it (flow_shapes), the agent reads
// it as flow events and `mining_flow` reports it. The other answers every
// line at once (a consumer acknowledging its messages): the same bytes and
// spacing, not the shape. The rule's minimum age is cut to 10 s (the
// built-in's 2 minutes are the scenarios').
//
// And a DNS answer alone does not vouch for a peer (opaque_peer): the same
// two workers, their peer named by a DNS answer the agent read before they
// connected. The shaped flow is opaque all the same once two minutes old;
// the acknowledging one is vouched for by the name.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/bpf/stratum_test_pool.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/netns.h"
#include "tests/support/run_command.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;

constexpr uint16_t kPushPort = 8444;
constexpr auto kPushEvery = 4200ms;

// Listens on 10.67.0.1:kPushPort of the namespace it is made in; writes
// "job\n" to every connection it accepted every kPushEvery and reads (and
// drops) what they send, until destroyed.
class PushingPeer {
  public:
    PushingPeer() {
        listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_port = htons(kPushPort);
        inet_pton(AF_INET, "10.67.0.1", &in.sin_addr);
        const int on = 1;
        setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&in), sizeof(in)) != 0 ||
            listen(listen_fd_, 4) != 0) {
            close(listen_fd_);
            listen_fd_ = -1;
            return;
        }
        thread_ = std::thread([this] { serve(); });
    }
    ~PushingPeer() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        for (const int fd : clients_) close(fd);
        if (listen_fd_ >= 0) close(listen_fd_);
    }
    bool ok() const { return listen_fd_ >= 0; }

  private:
    void serve() {
        auto next_push = Clock::now() + kPushEvery;
        while (!stop_) {
            std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
            for (const int fd : clients_) fds.push_back({fd, POLLIN, 0});
            poll(fds.data(), fds.size(), 100);
            if (fds[0].revents & POLLIN) {
                const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
                if (client >= 0) clients_.push_back(client);
            }
            char drop[4096];
            for (size_t i = 1; i < fds.size(); ++i) {
                if (fds[i].revents & POLLIN) (void)!read(fds[i].fd, drop, sizeof(drop));
            }
            if (Clock::now() >= next_push) {
                for (const int fd : clients_) (void)!write(fd, "job\n", 4);
                next_push += kPushEvery;
            }
        }
    }
    int listen_fd_ = -1;
    std::vector<int> clients_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

// The workers and the peer in a namespace of the test's own (its veth
// address 10.67.0.1 is not a loopback one; the agent stays on the host):
// two GPU workers (gg_test_io_worker, holding `gpu_node`) that will connect
// to the pushing peer.
struct WorkersAndPeer {
    std::optional<gpuguard::testing::VethPeer> veth;
    std::optional<PushingPeer> peer;
    std::unique_ptr<gpuguard::testing::RequestChild> miner, consumer;
};

void start_workers_and_peer(const std::filesystem::path& gpu_node, const std::string& miner_comm,
                            const std::string& consumer_comm, WorkersAndPeer& out) {
    {
        gpuguard::testing::NetnsScope netns;
        ASSERT_EQ(netns.error(), "");
        out.veth.emplace(9, /*hold_connections=*/true);
        ASSERT_EQ(out.veth->error(), "");
        out.peer.emplace();
        ASSERT_TRUE(out.peer->ok());
        const auto worker = [&](const std::string& comm) {
            return gpuguard::testing::start_io_worker({.comm = comm,
                                                       .gpu_node = gpu_node.string(),
                                                       .file = "",
                                                       .tcp_port = kPushPort,
                                                       .tcp_address = "10.67.0.1",
                                                       .program = GPUGUARD_IO_WORKER});
        };
        out.miner = worker(miner_comm);
        out.consumer = worker(consumer_comm);
    }
    for (auto* child : {out.miner.get(), out.consumer.get()}) ASSERT_EQ(child->ask('g'), 0);
}

TEST_F(AgentDetectTest, a_flow_with_a_pools_shape_is_reported_and_an_acknowledging_one_is_not) {
    WorkersAndPeer pair;
    start_workers_and_peer(node_, "gg-shaped", "gg-acking", pair);
    if (HasFatalFailure()) return;
    auto& miner = pair.miner;
    auto& consumer = pair.consumer;
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 65,
         .memory_utilization = 30,
         .memory_used = 4ull << 30,
         .processes = {{miner->pid(), 2ull << 30, 55}, {consumer->pid(), 2ull << 30, 55}}});
    const auto rules = dir_ / "flow.yaml";
    std::ofstream(rules) << R"(rules:
  - id: GG-TEST-FLOW
    name: A GPU holder with a flow of a pool's shape (10 s old at least)
    severity: warning
    action: alert
    window: 1h
    when:
      gpu_held: true
      mining_flow: {min_age: 10s, min_pushes: 2}
)";
    use_fake_gpu(rules);
    replace_in_config("control:\n",
                      "process_table:\n  flow_interval_ms: 1000\n  flow_min_age_ms: 1000\n"
                      "control:\n");
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    for (auto* child : {miner.get(), consumer.get()}) {
        ASSERT_EQ(child->ask('c'), 0);
        ASSERT_EQ(child->ask('h'), 0);  // a TLS ClientHello first
    }
    // Each job: the consumer acknowledges it at once; the miner sends a
    // share 1.5 s later (not an answer), before the next job.
    std::optional<nlohmann::json> detection;
    for (const auto deadline = Clock::now() + time_bound(40s);
         !detection && Clock::now() < deadline;) {
        ASSERT_EQ(consumer->ask('r'), 0);
        ASSERT_EQ(consumer->ask('t'), 0);
        ASSERT_EQ(miner->ask('r'), 0);
        std::this_thread::sleep_for(1500ms);
        ASSERT_EQ(miner->ask('t'), 0);
        detection = wait_for_detection(agent, miner->pid(), "GG-TEST-FLOW", 200ms);
    }
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("10.67.0.1:8444: the peer pushed"), std::string::npos) << text;
    EXPECT_NE(text.find("messages unprompted, gaps mostly 4-8 s"), std::string::npos) << text;
    // Two more jobs for the consumer: answered, never the shape.
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(consumer->ask('r'), 0);
        ASSERT_EQ(consumer->ask('t'), 0);
    }
    EXPECT_FALSE(wait_for_detection(agent, consumer->pid(), "GG-TEST-FLOW", 1500ms));
    for (const auto& line : detections_for({consumer->pid()}, "GG-TEST-FLOW")) {
        ADD_FAILURE() << "the acknowledging consumer was reported: " << line;
    }
    // The whole output: the shaped flow's detection and nothing else at
    // warning or above for either worker.
    expect_whole_output(agent, {{"GG-TEST-FLOW", miner->pid(), "warning"}},
                        {miner->pid(), consumer->pid()});
    // The flow events are journaled: the journal alone reproduces it.
    const auto replayed = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "replay", "--correlation", rules.string(), (dir_ / "journal").string()},
        60s);
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    bool replayed_miner = false;
    std::istringstream lines(replayed.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        const auto record = nlohmann::json::parse(line, nullptr, false);
        if (record.is_discarded() || !record.contains("rule")) continue;
        if (record["rule"]["id"] != "GG-TEST-FLOW") continue;
        EXPECT_EQ(record["process"]["pid"], miner->pid()) << line;
        replayed_miner = replayed_miner || record["process"]["pid"] == miner->pid();
    }
    EXPECT_TRUE(replayed_miner) << replayed.stdout_text;
}

TEST_F(AgentDetectTest, a_dns_named_peer_with_a_pools_shape_is_opaque_and_an_answered_one_is_not) {
    WorkersAndPeer pair;
    start_workers_and_peer(node_, "gg-named-shape", "gg-named-acks", pair);
    if (HasFatalFailure()) return;
    auto& miner = pair.miner;
    auto& consumer = pair.consumer;
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 60,
         .memory_utilization = 30,
         .memory_used = 4ull << 30,
         .processes = {{miner->pid(), 2ull << 30, 50}, {consumer->pid(), 2ull << 30, 50}}});
    const auto rules = dir_ / "named.yaml";
    std::ofstream(rules) << R"(rules:
  - id: GG-TEST-NAMED
    name: A GPU holder with a peer nothing vouches for
    severity: warning
    action: alert
    window: 1h
    when:
      gpu_held: true
      opaque_peer: true
)";
    use_fake_gpu(rules);
    const uint16_t metrics_port = gpuguard::testing::free_loopback_port();
    replace_in_config("control:\n",
                      "process_table:\n  flow_interval_ms: 1000\n"
                      "  flow_min_age_ms: 1000\nmetrics:\n  enabled: true\n"
                      "  listen: 127.0.0.1\n  port: " +
                          std::to_string(metrics_port) + "\ncontrol:\n");
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // A process of the host looks the peer's name up: a real UDP query and
    // answer, from a resolver on 127.53.53.53:53 that knows that one name
    // (a domain of the operator's own, no pool signature knows it).
    ASSERT_EQ(gpuguard::testing::look_up_through_test_resolver("sync.example-models.test",
                                                               {10, 67, 0, 1}),
              0);
    // The workers connect only once the agent has read the answer.
    const auto dns_answers = [&] {
        const std::string metrics = gpuguard::testing::http_get(metrics_port, "/metrics");
        const auto at = metrics.find("\ngpuguard_dns_answers_total ");
        return at == std::string::npos ? 0.0 : std::strtod(metrics.c_str() + at + 28, nullptr);
    };
    bool answered = false;
    for (const auto deadline = Clock::now() + time_bound(10s); !answered && Clock::now() < deadline;
         std::this_thread::sleep_for(100ms)) {
        answered = dns_answers() >= 1;
    }
    ASSERT_TRUE(answered) << gpuguard::testing::http_get(metrics_port, "/metrics");
    for (auto* child : {miner.get(), consumer.get()}) {
        ASSERT_EQ(child->ask('c'), 0);
        ASSERT_EQ(child->ask('h'), 0);  // a TLS ClientHello first
    }
    // A pool's shape takes two minutes of flow (flow_shape.h): jobs every
    // 4.2 s, the miner's shares 1.5 s after them, the consumer's answers at once.
    std::optional<nlohmann::json> detection;
    for (const auto deadline = Clock::now() + time_bound(200s);
         !detection && Clock::now() < deadline;) {
        ASSERT_EQ(consumer->ask('r'), 0);
        ASSERT_EQ(consumer->ask('t'), 0);
        ASSERT_EQ(miner->ask('r'), 0);
        std::this_thread::sleep_for(1500ms);
        ASSERT_EQ(miner->ask('t'), 0);
        detection = wait_for_detection(agent, miner->pid(), "GG-TEST-NAMED", 200ms);
    }
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("10.67.0.1:8444 (a DNS answer named it, but its flow has a pool's shape)"),
              std::string::npos)
        << text;
    // The consumer's flow, as old and sampled in the same passes, was judged
    // alongside: named, answered, never opaque.
    for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(consumer->ask('r'), 0);
        ASSERT_EQ(consumer->ask('t'), 0);
    }
    EXPECT_FALSE(wait_for_detection(agent, consumer->pid(), "GG-TEST-NAMED", 1500ms));
    for (const auto& line : detections_for({consumer->pid()}, "GG-TEST-NAMED")) {
        ADD_FAILURE() << "the answered consumer was reported: " << line;
    }
    // The built-in GG-CORR-0013 judged the same flow on the same pass: a
    // quiet GPU miner over TLS to a host of its own domain, at error (no
    // file writes at all). Nothing about the consumer.
    expect_whole_output(
        agent,
        {{"GG-TEST-NAMED", miner->pid(), "warning"}, {"GG-CORR-0013", miner->pid(), "error"}},
        {miner->pid(), consumer->pid()});
}

}  // namespace
