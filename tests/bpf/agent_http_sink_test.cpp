// The running agent into an HTTP sink end to end: `gpuguard run` with a
// splunk_hec output over HTTPS (the test CA as tls_ca_file) to a peer that
// answers as Splunk HEC does with indexer acknowledgement on; a miner's
// command line on the fake GPU node is detected, and the detection reaches
// the peer in its HEC envelope, over the agent's data channel, acknowledged.
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
using gpuguard::testing::HecOptions;
using gpuguard::testing::SplunkHecPeer;
using gpuguard::testing::Subprocess;

using AgentHttpSinkTest = AgentDetectTest;

TEST_F(AgentHttpSinkTest, detection_reaches_an_https_splunk_hec_with_indexer_ack) {
    GG_REQUIRE_TOOL("openssl");
    const auto pki_dir = dir_ / "pki";
    std::filesystem::create_directories(pki_dir);
    gpuguard::testing::TestPki pki;
    ASSERT_TRUE(gpuguard::testing::make_test_pki(pki_dir, &pki));
    HecOptions options;
    options.token = "0b5c7d3e-1111-2222-3333-444455556666";
    SplunkHecPeer peer(&pki, options);
    ASSERT_TRUE(peer.start());
    std::ofstream(config_, std::ios::app)
        << "outputs:\n  - name: splunk\n    type: splunk_hec\n    address: " << peer.url()
        << "\n    token: " << options.token
        << "\n    index: gpuguard\n    tls_ca_file: " << pki.ca_cert.string()
        << "\n    queue_dir: " << (dir_ / "queue").string()
        << "\n    retry_initial_ms: 20\n    retry_max_ms: 200\n    io_timeout_ms: 3000\n";

    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    // An idle process with XMRig's command line (bash with a sleep would leave
    // the sleep behind, holding the test's output open).
    const pid_t child = start_child("gg-miner", {GPUGUARD_IDLE_PROCESS, "xmrig", "--cuda", "-o",
                                                 "stratum+tcp://127.0.0.1:3333"});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);
    const auto detection = wait_for_detection(agent, child, "GG-CORR-0001", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();

    // The same alert at the peer, within a few seconds of the agent printing it.
    std::optional<nlohmann::json> received;
    const auto deadline = Clock::now() + 5s;
    while (!received && Clock::now() < deadline) {
        for (const auto& event : peer.events()) {
            if (event["event"]["event"]["id"] == (*detection)["event"]["id"]) received = event;
        }
        if (!received) std::this_thread::sleep_for(20ms);
    }
    ASSERT_TRUE(received) << "peer got " << peer.events().size() << " events; "
                          << agent.stderr_text();
    EXPECT_EQ((*received)["source"], "gpuguard");
    EXPECT_EQ((*received)["sourcetype"], "gpuguard:ecs_json");
    EXPECT_EQ((*received)["index"], "gpuguard");
    EXPECT_EQ((*received)["event"]["rule"]["id"], "GG-CORR-0001");
    EXPECT_EQ((*received)["event"]["process"]["pid"], child);
    EXPECT_EQ((*received)["host"], (*received)["event"]["host"]["hostname"]);
    EXPECT_EQ(peer.channels().size(), 1u);
    // Indexed on arrival; the agent then asks for its ackId until it reads true.
    const auto ack_deadline = Clock::now() + 5s;
    while (peer.ack_queries() < static_cast<size_t>(options.ack_after_queries) &&
           Clock::now() < ack_deadline) {
        std::this_thread::sleep_for(10ms);
    }
    EXPECT_GE(peer.ack_queries(), static_cast<size_t>(options.ack_after_queries));
    for (const auto& request : peer.requests()) {
        EXPECT_EQ(request.status, 200) << request.path << " " << request.body.substr(0, 200);
    }
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

}  // namespace
