// Sinks against a real rsyslogd on loopback: TCP, TLS and mutual TLS
// (openssl test CA), field-by-field comparison of what rsyslog parsed; the
// collector stopped and restarted under a connected sink; an outage with an
// agent crash in the middle; a fleet of three agents; UDP and the local
// socket.
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "gpuguard/siem/siem.h"
#include "siem/format_util.h"
#include "tests/siem/rsyslog_server.h"
#include "tests/siem/siem_fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::siem {
namespace {

using testing::RsyslogOptions;
using testing::RsyslogServer;

constexpr auto kWait = std::chrono::seconds(15);

SinkConfig sink_to(const RsyslogServer& server, SinkType type) {
    SinkConfig sink;
    sink.name = "collector";
    sink.type = type;
    sink.address = server.address();
    sink.retry_initial = std::chrono::milliseconds(20);
    sink.retry_max = std::chrono::milliseconds(200);
    sink.io_timeout = std::chrono::milliseconds(3000);
    return sink;
}

// Detection n: varied fields, one with a hostile 64 KiB command line.
Detection detection(int n) {
    auto d = testing::test_detection(fmt::format("det-{:04}", n));
    d.severity = kAllSeverities[n % 6];
    d.process.pid = 1000 + n;
    d.rule_id = fmt::format("rule.{}", n % 3);
    d.time_unix_ns = testing::kTestTimeNs + n * 1000000LL;
    if (n == 3) d.process.command_line = testing::hostile_command_line();
    return d;
}

// What rsyslog parsed must match what we sent, field by field.
void expect_matches(const nlohmann::json& got, const Detection& d, const HostInfo& host) {
    EXPECT_EQ(got["host"], host.hostname);
    EXPECT_EQ(got["app"], "gpuguard");
    EXPECT_EQ(got["procid"], std::to_string(getpid()));
    EXPECT_EQ(got["msgid"], "DETECTION");
    EXPECT_EQ(got["severity"], std::to_string(syslog_level(d.severity)));
    EXPECT_EQ(got["facility"], "16");
    EXPECT_EQ(got["sd"], fmt::format("[gpuguard@32473 id=\"{}\" rule=\"{}\" pid=\"{}\" "
                                     "severity=\"{}\"]",
                                     alert_id(d), d.rule_id, d.process.pid, to_string(d.severity)));
    const auto body = nlohmann::json::parse(got["msg"].get<std::string>());
    EXPECT_EQ(body, nlohmann::json::parse(format_ecs_json(d, host)));
    EXPECT_EQ(body["event"]["id"], alert_id(d));
    EXPECT_EQ(body["process"]["command_line"], sanitize_utf8(d.process.command_line));
    EXPECT_EQ(body["process"]["pid"], d.process.pid);
    EXPECT_EQ(body["rule"]["id"], d.rule_id);
}

void deliver_and_compare(RsyslogServer& server, SinkConfig sink, int count) {
    RouterOptions options;
    options.host = testing::test_host();
    options.sinks.push_back(sink);
    auto router = AlertRouter::start(options);
    ASSERT_TRUE(router) << router.error().message;
    for (int n = 0; n < count; ++n) (*router)->publish(detection(n));
    ASSERT_TRUE((*router)->flush(kWait)) << (*router)->counters()[0].last_error;
    const auto counters = (*router)->counters()[0];
    EXPECT_EQ(counters.sent, static_cast<uint64_t>(count));
    EXPECT_EQ(counters.dropped, 0u);
    const auto messages = server.wait_for(count, kWait);
    ASSERT_EQ(messages.size(), static_cast<size_t>(count)) << server.log();
    for (int n = 0; n < count; ++n) {
        SCOPED_TRACE(n);
        expect_matches(messages[n], detection(n), options.host);
    }
}

TEST(Rsyslog, tcp_octet_counted_alerts_arrive_field_by_field) {
    GG_REQUIRE_TOOL("rsyslogd");
    testing::TempDir dir;
    RsyslogServer server;
    ASSERT_EQ(server.start(dir.path(), {}), "");
    deliver_and_compare(server, sink_to(server, SinkType::kTcp), 50);
}

TEST(Rsyslog, tls_with_test_ca_arrives_field_by_field) {
    GG_REQUIRE_TOOL("rsyslogd");
    GG_REQUIRE_TOOL("openssl");
    testing::TempDir dir;
    RsyslogOptions options;
    options.tls = true;
    ASSERT_TRUE(testing::make_test_pki(dir.path(), &options.pki));
    RsyslogServer server;
    ASSERT_EQ(server.start(dir.path(), options), "");
    auto sink = sink_to(server, SinkType::kTls);
    sink.tls_ca_file = options.pki.ca_cert;
    sink.tls_server_name = "localhost";
    deliver_and_compare(server, sink, 30);
}

TEST(Rsyslog, tls_refuses_a_server_the_ca_did_not_sign) {
    GG_REQUIRE_TOOL("rsyslogd");
    GG_REQUIRE_TOOL("openssl");
    testing::TempDir dir;
    RsyslogOptions options;
    options.tls = true;
    ASSERT_TRUE(testing::make_test_pki(dir.path(), &options.pki));
    RsyslogServer server;
    ASSERT_EQ(server.start(dir.path(), options), "");
    RouterOptions router_options;
    router_options.host = testing::test_host();
    auto sink = sink_to(server, SinkType::kTls);
    sink.tls_ca_file = options.pki.other_ca_cert;
    router_options.sinks.push_back(sink);
    auto router = AlertRouter::start(router_options);
    ASSERT_TRUE(router) << router.error().message;
    (*router)->publish(detection(0));
    EXPECT_FALSE((*router)->flush(std::chrono::milliseconds(500)));
    const auto counters = (*router)->counters()[0];
    EXPECT_EQ(counters.sent, 0u);
    EXPECT_FALSE(counters.healthy);
    EXPECT_NE(counters.last_error.find("certificate"), std::string::npos) << counters.last_error;
    EXPECT_EQ(counters.queue_records, 1u);  // kept for when the config is fixed
    (*router)->stop(std::chrono::milliseconds(0));
    EXPECT_TRUE(server.messages().empty());
}

// rsyslog over TLS requiring a client certificate signed by the test CA
// (authMode x509/certvalid), and a TLS sink that trusts that CA.
class RsyslogMutualTls : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_TOOL("rsyslogd");
        GG_REQUIRE_TOOL("openssl");
        RsyslogOptions options;
        options.tls = true;
        options.require_client_cert = true;
        ASSERT_TRUE(testing::make_test_pki(dir_.path(), &options.pki));
        ASSERT_EQ(server_.start(dir_ / "rsyslog", options), "");
        pki_ = options.pki;
    }

    SinkConfig tls_sink() const {
        auto sink = sink_to(server_, SinkType::kTls);
        sink.tls_ca_file = pki_.ca_cert;
        return sink;
    }

    testing::TempDir dir_;
    RsyslogServer server_;
    testing::TestPki pki_;
};

// The sink presents a certificate the collector's CA signed: every alert
// arrives.
TEST_F(RsyslogMutualTls, client_certificate_accepted_alerts_arrive_field_by_field) {
    auto sink = tls_sink();
    sink.tls_cert_file = pki_.client_cert;
    sink.tls_key_file = pki_.client_key;
    deliver_and_compare(server_, sink, 30);
}

// The sink presents no certificate: rsyslog refuses the session (in TLS 1.3
// only after the client's side of the handshake is done, so the sink must
// wait for the server's verdict), nothing counts as sent, the alerts stay
// queued on disk, and once the certificate is configured they all arrive.
TEST_F(RsyslogMutualTls, no_client_certificate_delivers_nothing_and_keeps_alerts_queued) {
    auto sink = tls_sink();
    sink.queue_dir = dir_ / "queue";
    RouterOptions router_options;
    router_options.host = testing::test_host();
    router_options.sinks = {sink};
    {
        auto router = AlertRouter::start(router_options);
        ASSERT_TRUE(router) << router.error().message;
        for (int n = 0; n < 5; ++n) (*router)->publish(detection(n));
        EXPECT_FALSE((*router)->flush(std::chrono::milliseconds(1500)));
        const auto counters = (*router)->counters()[0];
        EXPECT_EQ(counters.sent, 0u);
        EXPECT_EQ(counters.dropped, 0u);
        EXPECT_GT(counters.retried, 0u);
        EXPECT_FALSE(counters.healthy);
        EXPECT_FALSE(counters.last_error.empty());
        EXPECT_EQ(counters.queue_records, 5u);
        (*router)->stop(std::chrono::milliseconds(0));
    }
    EXPECT_TRUE(server_.messages().empty()) << server_.messages().front().dump();

    router_options.sinks[0].tls_cert_file = pki_.client_cert;
    router_options.sinks[0].tls_key_file = pki_.client_key;
    auto router = AlertRouter::start(router_options);
    ASSERT_TRUE(router) << router.error().message;
    ASSERT_TRUE((*router)->flush(kWait)) << (*router)->counters()[0].last_error;
    const auto messages = server_.wait_for(5, kWait);
    ASSERT_EQ(messages.size(), 5u) << server_.log();
    for (int n = 0; n < 5; ++n) {
        SCOPED_TRACE(n);
        expect_matches(messages[n], detection(n), router_options.host);
    }
}

std::vector<std::string> alert_ids(const std::vector<nlohmann::json>& messages) {
    std::vector<std::string> ids;
    for (const auto& message : messages) {
        ids.push_back(nlohmann::json::parse(message["msg"].get<std::string>())["event"]["id"]);
    }
    return ids;
}

// The collector goes away while the sink is connected to it: alerts emitted
// meanwhile wait in the queue, and when rsyslog is back on the same port
// every id arrives exactly in order.
TEST(Rsyslog, collector_stopped_while_connected_and_restarted_loses_nothing) {
    GG_REQUIRE_TOOL("rsyslogd");
    testing::TempDir dir;
    RsyslogServer server;
    ASSERT_EQ(server.start(dir.path(), {}), "");
    RouterOptions router_options;
    router_options.host = testing::test_host();
    router_options.sinks = {sink_to(server, SinkType::kTcp)};
    auto router = AlertRouter::start(router_options);
    ASSERT_TRUE(router) << router.error().message;
    for (int n = 0; n < 100; ++n) (*router)->publish(detection(n));
    ASSERT_TRUE((*router)->flush(kWait)) << (*router)->counters()[0].last_error;
    ASSERT_EQ(server.wait_for(100, kWait).size(), 100u) << server.log();

    RsyslogOptions same_port;
    same_port.port = server.port();
    server.stop();  // the sink's connection is still open
    for (int n = 100; n < 300; ++n) (*router)->publish(detection(n));
    EXPECT_FALSE((*router)->flush(std::chrono::milliseconds(500)));
    auto counters = (*router)->counters()[0];
    EXPECT_EQ(counters.sent, 100u);
    EXPECT_EQ(counters.queue_records, 200u);
    EXPECT_FALSE(counters.healthy);

    ASSERT_EQ(server.start(dir.path(), same_port), "");
    ASSERT_TRUE((*router)->flush(kWait)) << (*router)->counters()[0].last_error;
    counters = (*router)->counters()[0];
    EXPECT_EQ(counters.sent, 300u);
    EXPECT_EQ(counters.dropped, 0u);
    EXPECT_TRUE(counters.healthy);
    const auto messages = server.wait_for(300, kWait);
    std::vector<std::string> expected;
    for (int n = 0; n < 300; ++n) expected.push_back(alert_id(detection(n)));
    EXPECT_EQ(alert_ids(messages), expected);
}

// rsyslog down; agent 1 queues 500 alerts and crashes (SIGKILL); agent 2
// resumes the queue and adds 500; rsyslog comes back: all 1000 ids arrive,
// in order (duplicates allowed).
TEST(Rsyslog, outage_with_agent_crash_loses_nothing) {
    GG_REQUIRE_TOOL("rsyslogd");
    testing::TempDir dir;
    const uint16_t port = testing::free_port();
    const std::string address = "127.0.0.1:" + std::to_string(port);
    const std::string queue = (dir / "queue").string();
    {
        testing::Subprocess agent({GPUGUARD_SIEM_EMIT, "--address", address, "--queue", queue,
                                   "--host", "host-a", "--first", "0", "--count", "500", "--hold",
                                   "1"});
        const auto line = agent.read_stdout_line(kWait);
        ASSERT_TRUE(line && *line == "queued") << agent.stderr_text();
        agent.stop(SIGKILL, std::chrono::seconds(5));
    }
    testing::Subprocess agent({GPUGUARD_SIEM_EMIT, "--address", address, "--queue", queue, "--host",
                               "host-a", "--first", "500", "--count", "500", "--flush-ms",
                               "20000"});
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // it retries meanwhile
    RsyslogServer server;
    RsyslogOptions options;
    options.port = port;
    ASSERT_EQ(server.start(dir / "rsyslog", options), "");
    const auto summary = agent.read_stdout_line(std::chrono::seconds(25));
    ASSERT_TRUE(summary) << agent.stderr_text();
    EXPECT_EQ(summary->rfind("flushed=1", 0), 0u) << *summary;
    EXPECT_NE(summary->find("dropped=0"), std::string::npos) << *summary;
    const auto messages = server.wait_for(1000, kWait);
    std::vector<std::string> order;
    std::set<std::string> seen;
    for (const auto& message : messages) {
        const auto body = nlohmann::json::parse(message["msg"].get<std::string>());
        const std::string id = body["gpuguard"]["detection"]["id"];
        if (seen.insert(id).second) order.push_back(id);
    }
    EXPECT_EQ(seen.size(), 1000u) << "received " << messages.size() << " messages";
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
    for (int n = 0; n < 1000; ++n) EXPECT_TRUE(seen.count(fmt::format("host-a-{:06}", n))) << n;
}

// Three agent processes ship to one collector: every alert of every host
// arrives, tagged with its host name.
TEST(Rsyslog, fleet_of_three_agents_to_one_collector) {
    GG_REQUIRE_TOOL("rsyslogd");
    testing::TempDir dir;
    RsyslogServer server;
    ASSERT_EQ(server.start(dir / "rsyslog", {}), "");
    const std::vector<std::string> hosts = {"gpu-a", "gpu-b", "gpu-c"};
    std::vector<std::unique_ptr<testing::Subprocess>> agents;
    for (const auto& host : hosts) {
        agents.push_back(std::make_unique<testing::Subprocess>(std::vector<std::string>{
            GPUGUARD_SIEM_EMIT, "--address", server.address(), "--queue",
            (dir / ("queue-" + host)).string(), "--host", host, "--count", "200"}));
    }
    for (auto& agent : agents) {
        const auto summary = agent->read_stdout_line(kWait);
        ASSERT_TRUE(summary) << agent->stderr_text();
        EXPECT_EQ(summary->rfind("flushed=1", 0), 0u) << *summary;
    }
    const auto messages = server.wait_for(600, kWait);
    std::map<std::string, std::set<std::string>> by_host;
    for (const auto& message : messages) {
        const auto body = nlohmann::json::parse(message["msg"].get<std::string>());
        const std::string host = message["host"];
        EXPECT_EQ(body["host"]["hostname"], host);
        by_host[host].insert(body["gpuguard"]["detection"]["id"].get<std::string>());
    }
    for (const auto& host : hosts) {
        ASSERT_EQ(by_host[host].size(), 200u) << host;
        EXPECT_EQ(by_host[host].count(host + "-000199"), 1u);
    }
}

TEST(Rsyslog, udp_and_local_socket_sinks_deliver) {
    GG_REQUIRE_TOOL("rsyslogd");
    testing::TempDir dir;
    RsyslogOptions options;
    options.udp = true;
    options.unix_socket = dir / "log.sock";
    RsyslogServer server;
    ASSERT_EQ(server.start(dir.path(), options), "");
    RouterOptions router_options;
    router_options.host = testing::test_host();
    auto udp = sink_to(server, SinkType::kUdp);
    udp.name = "udp";
    udp.format = Format::kCef;
    auto local = sink_to(server, SinkType::kLocalSyslog);
    local.name = "local";
    local.address = options.unix_socket.string();
    local.format = Format::kLeef;
    router_options.sinks = {udp, local};
    auto router = AlertRouter::start(router_options);
    ASSERT_TRUE(router) << router.error().message;
    for (int n = 0; n < 10; ++n) (*router)->publish(detection(n));
    ASSERT_TRUE((*router)->flush(kWait));
    const auto messages = server.wait_for(20, kWait);
    ASSERT_EQ(messages.size(), 20u) << server.log();
    size_t cef = 0, leef = 0;
    for (const auto& message : messages) {
        std::string msg = message["msg"];
        // RFC 3164 leaves the space after "tag:" in the message.
        if (!msg.empty() && msg.front() == ' ') msg.erase(0, 1);
        if (msg.rfind("CEF:0|", 0) == 0) {
            ++cef;
            EXPECT_EQ(message["host"], "gpu-node-7");
        } else if (msg.rfind("LEEF:2.0|", 0) == 0) {
            ++leef;
            EXPECT_EQ(message["app"], "gpuguard");
            EXPECT_NE(msg.find("\tsev="), std::string::npos) << msg.substr(0, 200);
        } else {
            ADD_FAILURE() << message.dump();
        }
    }
    EXPECT_EQ(cef, 10u);
    EXPECT_EQ(leef, 10u);
}

}  // namespace
}  // namespace gpuguard::siem
