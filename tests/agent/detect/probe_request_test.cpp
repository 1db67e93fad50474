// The correlator's probe requests (take_probe_requests, verify.active): a
// new detection by a rule whose `when` has opaque_peer asks for each peer
// nothing vouches for to be probed, once per process and peer; nothing is
// asked without request_probes (replay, verify off) or for a vouched-for
// peer. A pool_probe event answered as a pool raises GG-CORR-0027, quoting
// the answer; one that found no pool raises nothing.
#include <gtest/gtest.h>

#include "gpuguard/detect/correlator.h"
#include "gpuguard/rules/correlation.h"
#include "tests/agent/detect/correlator_fixture.h"

namespace gpuguard::agent {
namespace {

using correlator_testing::kSecond;

constexpr const char* kOpaqueRule = R"(rules:
  - id: SITE-OPAQUE
    name: Opaque peer
    severity: warning
    when:
      gpu_held: false
      opaque_peer: true
)";

class ProbeRequestTest : public correlator_testing::CorrelatorTest {
  protected:
    // The built-in rules and SITE-OPAQUE.
    void make_with(CorrelatorOptions options) {
        auto rules = correlator_testing::builtin_rules();
        auto site = rules::parse_correlation_rules(kOpaqueRule, "site.yaml");
        ASSERT_TRUE(site) << site.error().message;
        rules.insert(rules.end(), site->begin(), site->end());
        make(correlator_testing::rule_set(), std::move(rules), options);
    }

    std::vector<Detection> feed(uint64_t ts, uint32_t pid, EventData data) {
        return CorrelatorTest::feed(ts, pid, "worker", std::move(data));
    }

    // A worker connected to `address`:8443 whose first bytes were a TLS hello (or `bytes`).
    void connect_and_send(
        uint64_t ts, uint32_t pid, const std::string& address,
        std::string bytes = std::string("\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00", 10)) {
        feed(ts, pid, Connect{5, 0, 4, address, 8443});
        NetPayload payload;
        payload.fd = 5;
        payload.syscall = "write";
        payload.length = static_cast<uint32_t>(bytes.size());
        payload.flow = 0x1000 + pid;
        payload.remote_address = address;
        payload.remote_port = 8443;
        payload.data = std::move(bytes);
        feed(ts + 1, pid, payload);
    }

    static bool has_rule(const std::vector<Detection>& out, const std::string& id) {
        for (const auto& detection : out) {
            if (detection.rule_id == id) return true;
        }
        return false;
    }
};

TEST_F(ProbeRequestTest, a_detection_by_an_opaque_peer_rule_asks_once_per_peer) {
    make_with(CorrelatorOptions{.request_probes = true});
    feed(1 * kSecond, 500, Exec{"/usr/local/bin/worker", {"worker"}, false, false, 500});
    connect_and_send(2 * kSecond, 500, "203.0.113.7");
    auto requests = correlator_->take_probe_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].pid, 500u);
    EXPECT_EQ(requests[0].address, "203.0.113.7");
    EXPECT_EQ(requests[0].port, 8443);
    EXPECT_TRUE(requests[0].tls);
    EXPECT_EQ(requests[0].rule, "SITE-OPAQUE");
    // The same peer again, more evidence: asked already.
    connect_and_send(3 * kSecond, 500, "203.0.113.7");
    EXPECT_TRUE(correlator_->take_probe_requests().empty());
}

TEST_F(ProbeRequestTest, nothing_is_asked_without_request_probes_or_for_a_recognised_protocol) {
    make_with(CorrelatorOptions{});
    feed(1 * kSecond, 501, Exec{"/usr/local/bin/worker", {"worker"}, false, false, 501});
    connect_and_send(2 * kSecond, 501, "203.0.113.8");
    EXPECT_TRUE(correlator_->take_probe_requests().empty()) << "replay, or verify off";

    make_with(CorrelatorOptions{.request_probes = true});
    feed(1 * kSecond, 502, Exec{"/usr/bin/curl", {"curl"}, false, false, 502});
    connect_and_send(2 * kSecond, 502, "203.0.113.9", "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(correlator_->take_probe_requests().empty()) << "HTTP vouches for itself";
}

TEST_F(ProbeRequestTest, a_pool_answer_raises_gg_corr_0027_and_a_web_server_nothing) {
    make_with(CorrelatorOptions{.request_probes = true});
    feed(1 * kSecond, 503, Exec{"/usr/local/bin/worker", {"worker"}, false, false, 503});
    feed(1 * kSecond, 504, Exec{"/usr/local/bin/web", {"web"}, false, false, 504});
    PoolProbe web{"198.51.100.20",
                  8443,
                  false,
                  "",
                  "SITE-OPAQUE",
                  "stratum1",
                  "",
                  "HTTP/1.1 400 Bad Request\\r\\n",
                  false,
                  "not a pool: HTTP 400",
                  {"stratum1: not a pool: HTTP 400"},
                  3};
    EXPECT_FALSE(has_rule(feed(5 * kSecond, 504, web), "GG-CORR-0027"));
    PoolProbe pool{"203.0.113.7",
                   8443,
                   true,
                   "",
                   "SITE-OPAQUE",
                   "stratum1",
                   "",
                   R"({"id":1,"result":[[["mining.notify","ae68"]],"08000002",4],"error":null})",
                   true,
                   "pool: stratum1 mining.subscribe answered with a subscription",
                   {"stratum1: pool: stratum1 mining.subscribe answered with a subscription"},
                   9};
    const auto out = feed(6 * kSecond, 503, pool);
    ASSERT_TRUE(has_rule(out, "GG-CORR-0027"));
    for (const auto& detection : out) {
        if (detection.rule_id != "GG-CORR-0027") continue;
        EXPECT_EQ(detection.severity, Severity::kCritical);
        ASSERT_FALSE(detection.evidence.empty());
        EXPECT_NE(detection.evidence.back().detail.find("answer: {\"id\":1,\"result\""),
                  std::string::npos)
            << detection.evidence.back().detail;
    }
}

}  // namespace
}  // namespace gpuguard::agent
