// pool_answered (agent/detect/conditions/pool_answered.cpp): the agent's
// own probe of one of the process's peers (a pool_probe event) was answered
// in a mining pool's form; the evidence quotes the answer.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class PoolAnsweredTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when("{pool_answered: true}");
    static constexpr uint32_t kPid = 100;

    static PoolProbe probe(bool pool, std::string verdict) {
        PoolProbe probe;
        probe.address = "203.0.113.7";
        probe.port = 8443;
        probe.tls = true;
        probe.server_name = "cdn.example.net";
        probe.rule = "GG-CORR-0023";
        probe.protocol = pool ? "stratum1" : "";
        probe.answer = pool ? R"({"id":1,"result":[[["mining.notify","ae68"]],"08000002",4]})" : "";
        probe.pool = pool;
        probe.verdict = std::move(verdict);
        return probe;
    }
};

TEST_F(PoolAnsweredTest, a_probe_answered_in_a_pools_form_holds_quoting_the_answer) {
    exec(kPid, "/usr/bin/worker");
    evidence(kPid).probes.push_back(ProbeSeen{
        6 * kSecond, probe(true, "pool: stratum1 mining.subscribe answered with a subscription")});
    ASSERT_TRUE(holds(rule_, "pool_answered", kPid, 9 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 6 * kSecond);
    EXPECT_EQ(in_.extra[0].event_type, "pool_probe");
    EXPECT_EQ(in_.extra[0].field, "probe");
    EXPECT_EQ(details(),
              std::vector<std::string>{
                  "203.0.113.7:8443 answered over TLS (server name cdn.example.net) the agent's "
                  "stratum1 probe: pool: stratum1 mining.subscribe answered with a subscription; "
                  "answer: {\"id\":1,\"result\":[[[\"mining.notify\",\"ae68\"]],\"08000002\",4]}"});
}

TEST_F(PoolAnsweredTest, a_probe_that_found_no_pool_does_not_hold) {
    exec(kPid, "/usr/bin/worker");
    evidence(kPid).probes.push_back(ProbeSeen{6 * kSecond, probe(false, "not a pool: HTTP 400")});
    evidence(kPid).probes.push_back(ProbeSeen{7 * kSecond, probe(false, "no answer in 3000 ms")});
    EXPECT_FALSE(holds(rule_, "pool_answered", kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(PoolAnsweredTest, another_process_s_pool_is_not_its_own) {
    exec(kPid, "/usr/bin/worker");
    exec(kPid + 1, "/usr/bin/other");
    evidence(kPid + 1).probes.push_back(ProbeSeen{6 * kSecond, probe(true, "pool: pushed x")});
    EXPECT_FALSE(holds(rule_, "pool_answered", kPid, 9 * kSecond));
    EXPECT_TRUE(holds(rule_, "pool_answered", kPid + 1, 9 * kSecond));
    EXPECT_FALSE(find("pool_answered")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
