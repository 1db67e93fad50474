// The running agent into an HTTP sink end to end: `gpuguard run` with a
// splunk_hec output over HTTPS (the test CA as tls_ca_file) and a queue_dir,
// to a peer that answers as Splunk HEC does with indexer acknowledgement on;
// a miner's command line on the fake GPU node is detected while the peer is
// down, and after the agent is killed and started again the detection
// reaches the peer, once, in its HEC envelope, over the agent's data
// channel, acknowledged.
// Fixture: agent_detect_fixture.h; peer: tests/siem/http_peers.h.
#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/siem/http_peers.h"
#include "tests/siem/siem_fixtures.h"
#include "tests/support/child_process.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::Clock;
using gpuguard::testing::file_bytes;
using gpuguard::testing::HecOptions;
using gpuguard::testing::SplunkHecPeer;
using gpuguard::testing::Subprocess;

using AgentHttpSinkTest = AgentDetectTest;

// The peer is down while the first agent detects: the alert waits in the
// sink's queue_dir and the agent is killed. The peer comes back, a second
// agent starts on the same configuration and delivers it, once.
TEST_F(AgentHttpSinkTest, detection_reaches_an_https_splunk_hec_across_an_agent_restart) {
    GG_REQUIRE_TOOL("openssl");
    const auto pki_dir = dir_ / "pki";
    std::filesystem::create_directories(pki_dir);
    gpuguard::testing::TestPki pki;
    ASSERT_TRUE(gpuguard::testing::make_test_pki(pki_dir, &pki));
    HecOptions options;
    options.token = "0b5c7d3e-1111-2222-3333-444455556666";
    SplunkHecPeer peer(&pki, options, gpuguard::testing::free_port());  // down for now
    const auto queue = dir_ / "queue";
    std::ofstream(config_, std::ios::app)
        << "outputs:\n  - name: splunk\n    type: splunk_hec\n    address: " << peer.url()
        << "\n    token: " << options.token
        << "\n    index: gpuguard\n    tls_ca_file: " << pki.ca_cert.string()
        << "\n    queue_dir: " << queue.string()
        << "\n    retry_initial_ms: 20\n    retry_max_ms: 200\n    io_timeout_ms: 3000\n";

    pid_t child = -1;
    std::string alert_id;
    {
        Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
        ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
        // An idle process with XMRig's command line (bash with a sleep would
        // leave the sleep behind, holding the test's output open).
        child = start_child("gg-miner", {GPUGUARD_IDLE_PROCESS, "xmrig", "--cuda", "-o",
                                         "stratum+tcp://127.0.0.1:3333"});
        ASSERT_GT(child, 0);
        ChildReaper reaper(child);
        const auto detection = wait_for_detection(agent, child, "GG-CORR-0001", 5s);
        ASSERT_TRUE(detection) << agent.stderr_text();
        alert_id = (*detection)["event"]["id"].get<std::string>();
        // In a queue segment on disk before the agent goes.
        const auto deadline = Clock::now() + 5s;
        bool on_disk = false;
        while (!on_disk && Clock::now() < deadline) {
            std::error_code ec;
            for (const auto& entry : std::filesystem::directory_iterator(queue / "splunk", ec)) {
                if (file_bytes(entry.path()).find(alert_id) != std::string::npos) on_disk = true;
            }
            if (!on_disk) std::this_thread::sleep_for(10ms);
        }
        ASSERT_TRUE(on_disk) << agent.stderr_text();
        // A crash: nothing is drained or acknowledged on the way out.
        EXPECT_EQ(agent.stop(SIGKILL, 10s), 128 + SIGKILL) << agent.stderr_text();
    }
    EXPECT_TRUE(peer.requests().empty());

    ASSERT_TRUE(peer.start());
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    // Indexed on arrival; the agent then asks for its ackId until it reads
    // true (the peer's second query of it).
    const auto deadline = Clock::now() + 5s;
    while (peer.ack_queries() < static_cast<size_t>(options.ack_after_queries) &&
           Clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    EXPECT_GE(peer.ack_queries(), static_cast<size_t>(options.ack_after_queries));
    std::vector<nlohmann::json> received;
    for (const auto& event : peer.events()) {
        if (event["event"]["event"]["id"] == alert_id) received.push_back(event);
    }
    ASSERT_EQ(received.size(), 1u)
        << "peer got " << peer.events().size() << " events; " << agent.stderr_text();
    EXPECT_EQ(received[0]["source"], "gpuguard");
    EXPECT_EQ(received[0]["sourcetype"], "gpuguard:ecs_json");
    EXPECT_EQ(received[0]["index"], "gpuguard");
    EXPECT_EQ(received[0]["event"]["rule"]["id"], "GG-CORR-0001");
    EXPECT_EQ(received[0]["event"]["process"]["pid"], child);
    EXPECT_EQ(received[0]["host"], received[0]["event"]["host"]["hostname"]);
    EXPECT_EQ(peer.channels().size(), 1u);
    for (const auto& request : peer.requests()) {
        EXPECT_EQ(request.status, 200) << request.path << " " << request.body.substr(0, 200);
    }
    // What the first agent printed before its SIGKILL and the second after:
    // the miner's, exactly (named by its argv at exec, then on the GPU).
    expect_whole_output(
        agent,
        {{"GG-CORR-0012", child, "error", /*optional=*/true}, {"GG-CORR-0001", child, "critical"}},
        {child});
}

}  // namespace
