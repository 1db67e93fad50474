// mining_flow (agent/detect/conditions/mining_flow.cpp) and the flow shape
// it reads (agent/detect/flow_shape.cpp): a pool's session — long-lived,
// the peer pushing small jobs unprompted every few seconds to minutes,
// shares that do not answer them — against what benign long-lived flows
// look like: telemetry answered at once, a long poll, a consumer that
// acknowledges, a download, a chatty stream. And opaque_peer: a DNS answer
// alone no longer vouches for a peer whose flow has that shape.
#include "condition_fixture.h"
#include "flow_shape.h"

namespace gpuguard::agent::condition_testing {
namespace {

constexpr uint64_t kMinute = 60 * kSecond;

// Six minutes of an XMRig session over TLS: a job every 16-32 s, a share
// every 8-16 s, a few hundred bytes each.
Flow pool_session() {
    Flow flow;
    flow.flow = 0xffff888012345678ull;
    flow.address = "203.0.113.77";
    flow.port = 443;
    flow.age_ns = 6 * kMinute;
    flow.since_send_ns = 3 * kSecond;
    flow.since_receive_ns = 9 * kSecond;
    flow.bytes_out = 24 * 380;
    flow.bytes_in = 15 * 610;
    flow.sends = 26;
    flow.receives = 30;
    flow.send_bursts = 24;
    flow.receive_bursts = 15;
    flow.pushes = 14;
    flow.replies = 2;
    flow.send_gaps = {{8, 15}, {16, 8}};
    flow.receive_gaps = {{16, 12}, {32, 2}};
    return flow;
}

TEST(FlowShape, a_pool_session_has_the_shape_and_says_why) {
    const auto why = mining_shape(pool_session());
    ASSERT_TRUE(why);
    EXPECT_EQ(*why,
              "203.0.113.77:443: the peer pushed 14 of its 15 messages unprompted, gaps mostly "
              "16-32 s (100 % of 4 s or more), 3.0 KB a minute both ways");
    EXPECT_EQ(describe_flow(pool_session()),
              "6 min old, 8.9 KB sent in 24 messages, 8.9 KB received in 15 (14 unprompted), "
              "receive gaps mostly 16-32 s");
}

TEST(FlowShape, each_limit_is_a_border) {
    Flow young = pool_session();
    young.age_ns = 119 * kSecond;
    EXPECT_FALSE(mining_shape(young)) << "younger than two minutes";

    Flow answered = pool_session();  // telemetry: every answer within a second of the request
    answered.pushes = 0;
    EXPECT_FALSE(mining_shape(answered));

    Flow long_poll = pool_session();  // a CI runner: the answer comes late, the next poll at once
    long_poll.replies = 14;
    EXPECT_FALSE(mining_shape(long_poll));
    long_poll.replies = 7;  // half of the pushes answered: still a pool's
    EXPECT_TRUE(mining_shape(long_poll));

    Flow chatty = pool_session();  // a stream: most messages under 4 s apart
    chatty.receive_gaps = {{1, 10}, {2, 3}, {16, 2}};
    EXPECT_FALSE(mining_shape(chatty));

    Flow download = pool_session();
    download.bytes_in = 6 * 64 * 1024;  // 64 KB a minute and the sends on top
    EXPECT_FALSE(mining_shape(download));

    Flow big_pushes = pool_session();
    big_pushes.bytes_in = 15 * 17 * 1024;
    big_pushes.age_ns = 60 * kMinute;  // under 64 KB a minute, but 17 KB a message
    EXPECT_FALSE(mining_shape(big_pushes));

    Flow two_pushes = pool_session();
    two_pushes.pushes = 2;
    two_pushes.receive_bursts = 2;
    two_pushes.replies = 0;
    EXPECT_FALSE(mining_shape(two_pushes)) << "fewer than three pushes";

    Flow no_gaps = pool_session();
    no_gaps.receive_gaps.clear();
    EXPECT_FALSE(mining_shape(no_gaps));
}

class MiningFlowTest : public ConditionTest {
  protected:
    static constexpr uint32_t kPid = 420;
    const rules::CorrelationRule rule_ = rule_when("{mining_flow: true}");

    void peer(std::string address, uint16_t port, bool named, std::string protocol) {
        evidence(kPid).peers.push_back(
            Peer{kSecond, std::move(address), port, named, false, std::move(protocol)});
    }
};

TEST_F(MiningFlowTest, holds_for_an_outbound_peer_whose_flow_has_the_shape) {
    exec(kPid, "/usr/bin/python3");
    evidence(kPid).flows.push_back(pool_session());
    EXPECT_FALSE(holds(rule_, "mining_flow", kPid, 7 * kMinute)) << "no connect to that peer";
    peer("203.0.113.77", 443, true, "tls");
    ASSERT_TRUE(holds(rule_, "mining_flow", kPid, 7 * kMinute));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].event_type, "flow");
    EXPECT_NE(details()[0].find("the peer pushed 14 of its 15 messages unprompted"),
              std::string::npos)
        << details()[0];
    evidence(kPid).flows[0].replies = 14;
    EXPECT_FALSE(holds(rule_, "mining_flow", kPid, 7 * kMinute));
    EXPECT_FALSE(find("mining_flow")->time_dependent());
}

TEST_F(MiningFlowTest, a_rule_sets_the_age_pushes_and_bytes_it_takes) {
    exec(kPid, "/usr/bin/python3");
    Flow young = pool_session();
    young.age_ns = 20 * kSecond;
    young.pushes = 2;
    young.receive_bursts = 2;
    young.replies = 0;
    evidence(kPid).flows.push_back(young);
    peer("203.0.113.77", 443, false, "tls");
    EXPECT_FALSE(holds(rule_, "mining_flow", kPid, kMinute)) << "the defaults: 2 min, 3 pushes";
    EXPECT_TRUE(holds(rule_when("{mining_flow: {min_age: 15s, min_pushes: 2}}"), "mining_flow",
                      kPid, kMinute));
    EXPECT_FALSE(holds(rule_when("{mining_flow: {min_age: 15s, min_pushes: 2, "
                                 "max_bytes_per_minute: 1KB}}"),
                       "mining_flow", kPid, kMinute));
    EXPECT_FALSE(rule_when("{mining_flow: false}").mining_flow) << "no condition at all";
}

TEST(MiningFlowRule, bad_keys_and_values_are_refused_with_their_place) {
    const auto parse = [](const std::string& when) {
        return rules::parse_correlation_rules(
            "rules:\n  - id: T\n    name: t\n    severity: warning\n    when: " + when + "\n",
            "t.yaml");
    };
    const auto good =
        parse("{mining_flow: {min_age: 30s, min_pushes: 4, max_bytes_per_minute: 8KiB}}");
    ASSERT_TRUE(good) << good.error().message;
    ASSERT_TRUE(good->front().mining_flow);
    EXPECT_EQ(good->front().mining_flow->min_age, std::chrono::seconds(30));
    EXPECT_EQ(good->front().mining_flow->min_pushes, 4u);
    EXPECT_EQ(good->front().mining_flow->max_bytes_per_minute, 8u * 1024);
    const auto unknown = parse("{mining_flow: {min_jobs: 3}}");
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("min_jobs"), std::string::npos)
        << unknown.error().message;
    const auto zero = parse("{mining_flow: {min_pushes: 0}}");
    ASSERT_FALSE(zero);
    EXPECT_NE(zero.error().message.find("mining_flow.min_pushes"), std::string::npos)
        << zero.error().message;
}

TEST_F(MiningFlowTest, a_proxied_peer_takes_the_shape_of_its_loopback_flow) {
    exec(kPid, "/usr/bin/python3");
    Flow to_proxy = pool_session();
    to_proxy.address = "127.0.0.1";
    to_proxy.port = 1080;
    evidence(kPid).flows.push_back(to_proxy);
    peer("14.222.139.241", 443, false, "tls");
    evidence(kPid).peers.back().via = "the SOCKS5 proxy at 127.0.0.1:1080";
    evidence(kPid).peers.back().via_flow = to_proxy.flow;
    EXPECT_TRUE(holds(rule_, "mining_flow", kPid, 7 * kMinute));
    evidence(kPid).peers.back().via_flow = 1;  // another loopback flow
    EXPECT_FALSE(holds(rule_, "mining_flow", kPid, 7 * kMinute));
}

TEST_F(MiningFlowTest, a_dns_answer_alone_no_longer_vouches_for_an_opaque_peer) {
    exec(kPid, "/usr/bin/python3");
    const auto opaque = rule_when("{opaque_peer: true}");
    peer("203.0.113.77", 443, true, "tls");  // a DNS answer named it
    EXPECT_FALSE(holds(opaque, "opaque_peer", kPid, 7 * kMinute)) << "no flow read yet";
    Flow telemetry = pool_session();
    telemetry.pushes = 0;
    evidence(kPid).flows.push_back(telemetry);
    EXPECT_FALSE(holds(opaque, "opaque_peer", kPid, 7 * kMinute)) << "answers, not pushes";
    evidence(kPid).flows.push_back(pool_session());  // a later report of the same flow
    ASSERT_TRUE(holds(opaque, "opaque_peer", kPid, 7 * kMinute));
    EXPECT_EQ(details()[0].rfind("203.0.113.77:443 (a DNS answer named it, but its flow has a "
                                 "pool's shape), TLS from the first byte; 203.0.113.77:443: the "
                                 "peer pushed 14",
                                 0),
              0u)
        << details()[0];
    // What it spoke was recognised: the shape does not make HTTP opaque.
    evidence(kPid).peers.back().protocol = "http";
    EXPECT_FALSE(holds(opaque, "opaque_peer", kPid, 7 * kMinute));
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
