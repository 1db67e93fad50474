// opaque_peer (agent/detect/conditions/opaque_peer.cpp): an outbound peer
// nothing vouches for — unnamed and TLS or unrecognised, or a miner's port
// unless it spoke a known protocol there.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class OpaquePeerTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when("{opaque_peer: true}");

    void peer(std::string address, uint16_t port, bool named, bool pool_port,
              std::string protocol) {
        evidence(kPid).peers.push_back(
            Peer{kSecond, std::move(address), port, named, pool_port, std::move(protocol)});
    }
    static constexpr uint32_t kPid = 100;
};

TEST_F(OpaquePeerTest, an_unnamed_peer_speaking_tls_or_nothing_known_holds) {
    exec(kPid, "/usr/bin/worker");
    peer("203.0.113.7", 8443, false, false, "tls");
    ASSERT_TRUE(holds(rule_, "opaque_peer", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "203.0.113.7:8443 (no DNS answer named it), TLS from the first byte"});
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].event_type, "connect");
    EXPECT_EQ(in_.extra[0].field, "peer");
    EXPECT_EQ(in_.extra[0].ts_ns, 5 * kSecond);

    evidence(kPid).peers.clear();
    peer("2001:db8::7", 4444, false, false, "opaque");
    ASSERT_TRUE(holds(rule_, "opaque_peer", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"[2001:db8::7]:4444 (no DNS answer named it), a "
                                                  "protocol gpuguard does not recognise"});
}

TEST_F(OpaquePeerTest, a_named_peer_or_a_known_protocol_vouches_for_it) {
    exec(kPid, "/usr/bin/worker");
    peer("198.51.100.1", 443, true, false, "tls");     // DNS named it
    peer("198.51.100.2", 8080, false, false, "http");  // HTTP
    peer("198.51.100.3", 22, false, false, "ssh");     // SSH
    peer("198.51.100.4", 9000, false, false, "json");  // JSON-RPC: net_intel's
    peer("198.51.100.5", 7000, false, false, "");      // nothing sent seen yet
    EXPECT_FALSE(holds(rule_, "opaque_peer", kPid, 5 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(OpaquePeerTest, a_miners_port_holds_unless_it_spoke_a_known_protocol) {
    exec(kPid, "/usr/bin/worker");
    peer("198.51.100.9", 3333, true, true, "");
    ASSERT_TRUE(holds(rule_, "opaque_peer", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "198.51.100.9:3333 (a miner's port), nothing sent captured"});

    evidence(kPid).peers.clear();
    peer("198.51.100.9", 3333, false, true, "http");
    EXPECT_FALSE(holds(rule_, "opaque_peer", kPid, 5 * kSecond));
}

TEST_F(OpaquePeerTest, does_not_depend_on_time) {
    exec(kPid, "/usr/bin/worker");
    EXPECT_FALSE(holds(rule_, "opaque_peer", kPid, kSecond));  // no peer at all
    EXPECT_FALSE(find("opaque_peer")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
