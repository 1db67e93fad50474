// NetIntel between the sensor and the correlator: DNS answers name connects,
// payload samples become Stratum events, and the built-in correlation rules
// (GG-CORR-0002 pool domain, GG-CORR-0003 stratum) fire on them -- live and,
// from the derived events' JSON form, in replay.
#include "gpuguard/netintel/net_intel.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "gpuguard/detect/correlator.h"
#include "gpuguard/detect/pipeline.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/siem/siem.h"
#include "tests/support/dns_wire.h"

namespace gpuguard::agent {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;
constexpr uint32_t kPid = 4242;
constexpr uint64_t kFlow = 0xffff'8880'0000'1000ull;

std::shared_ptr<const rules::RuleSet> rule_set(const std::string& user_yaml = "") {
    static auto pack = [] {
        auto builtin = rules::compile_builtin_pack();
        EXPECT_TRUE(builtin) << builtin.error().message;
        return *builtin;
    }();
    std::vector<rules::RuleFile> files;
    if (!user_yaml.empty()) files.push_back({"test-rules.yaml", user_yaml});
    auto built = rules::RuleSet::build(pack, files);
    EXPECT_TRUE(built) << built.error().message;
    return std::make_shared<const rules::RuleSet>(std::move(*built));
}

// A DNS response: `name` A `address` (dotted quad), TTL 300.
std::string dns_answer(const std::string& name, std::array<uint8_t, 4> address) {
    std::string out = {0x12, 0x34, char(0x81), char(0x80), 0, 1, 0, 1, 0, 0, 0, 0};
    out += gpuguard::testing::dns_question_a(name);
    out += std::string{char(0xc0), 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4};
    for (uint8_t byte : address) out += static_cast<char>(byte);
    return out;
}

// The sample of that answer as the payload programs report it (from a stub
// resolver on 127.0.0.53).
NetPayload dns_payload(const std::string& name, std::array<uint8_t, 4> address) {
    NetPayload answer;
    answer.direction = NetPayload::Direction::kIn;
    answer.syscall = "recvfrom";
    answer.stream = false;
    answer.dns = true;
    answer.remote_address = "127.0.0.53";
    answer.remote_port = 53;
    answer.data = dns_answer(name, address);
    return answer;
}

class NetIntelTest : public ::testing::Test {
  protected:
    void SetUp() override { make(rule_set()); }

    void make(std::shared_ptr<const rules::RuleSet> set) {
        ProcessTableOptions options;
        options.read_host = false;
        table_ = std::make_unique<ProcessTable>(options, [](uint32_t, uint32_t) { return true; });
        auto parsed = rules::builtin_correlation_rules();
        ASSERT_TRUE(parsed) << parsed.error().message;
        auto created = Correlator::create(*parsed, std::move(set), *table_);
        ASSERT_TRUE(created) << created.error().message;
        correlator_ = std::move(*created);
        pipeline_ = make_pipeline(intel_);
    }

    // The agent's pipeline over this fixture's table and correlator, with
    // `intel` as its network intelligence; every event it judged goes to
    // journal_ as JSON, every detection to out_.
    std::unique_ptr<Pipeline> make_pipeline(NetIntel& intel) {
        PipelineHooks hooks;
        hooks.emit = [this](const Detection& detection) { out_.push_back(detection); };
        hooks.on_judged = [this](const Event& event) {
            journal_.push_back(event_to_json(event, 0));
        };
        return std::make_unique<Pipeline>(
            PipelineStages{table_.get(), &intel, nullptr, correlator_.get(), nullptr},
            std::move(hooks));
    }

    // One event through the pipeline (NetIntel, table, correlator, for the
    // event and every event it derived). Returns the detections.
    std::vector<Detection> feed(uint64_t ts, EventData data, uint32_t pid = kPid) {
        out_.clear();
        pipeline_->feed(
            Event{ts, TaskInfo{pid, pid, 1, 1000, 1000, 1, "python3"}, std::move(data)});
        return std::move(out_);
    }

    std::vector<Detection> payload(uint64_t ts, NetPayload::Direction direction, std::string data,
                                   uint32_t seq, uint64_t flow = kFlow) {
        NetPayload sample;
        sample.fd = 7;
        sample.direction = direction;
        sample.syscall = direction == NetPayload::Direction::kOut ? "write" : "read";
        sample.length = static_cast<uint32_t>(data.size());
        sample.seq = seq;
        sample.flow = flow;
        sample.remote_address = "198.51.100.20";
        sample.remote_port = 443;
        sample.data = std::move(data);
        return feed(ts, sample);
    }

    void hold_gpu(uint64_t ts) {
        feed(ts, Exec{"/usr/bin/python3", {"python3", "job.py"}, false, false, kPid});
        feed(ts + 1, GpuOpen{195, 0, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
    }

    static const Detection* find(const std::vector<Detection>& detections, const std::string& id) {
        const auto found = std::find_if(detections.begin(), detections.end(),
                                        [&](const Detection& d) { return d.rule_id == id; });
        return found == detections.end() ? nullptr : &*found;
    }

    std::vector<Stratum> stratum_events() const {
        std::vector<Stratum> out;
        for (const auto& line : journal_) {
            auto parsed = event_from_json(line, "journal");
            EXPECT_TRUE(parsed) << parsed.error().message;
            if (auto* stratum = std::get_if<Stratum>(&parsed->event.data)) out.push_back(*stratum);
        }
        return out;
    }

    NetIntel intel_{NetIntelOptions{0, 64, 16, 128}};
    std::unique_ptr<ProcessTable> table_;
    std::unique_ptr<Correlator> correlator_;
    std::unique_ptr<Pipeline> pipeline_;
    std::vector<Detection> out_;
    std::vector<std::string> journal_;  // JSON Lines of every event judged
};

TEST_F(NetIntelTest, observed_dns_answer_names_the_connect_and_the_pool_domain_rule_fires) {
    hold_gpu(1 * kSecond);
    feed(2 * kSecond, dns_payload("xmr-eu1.nanopool.org", {203, 0, 113, 5}));
    EXPECT_EQ(intel_.stats().dns_answers, 1u);

    const auto detections =
        feed(3 * kSecond, Connect{9, 0, 4, "203.0.113.5", 10300, true, false, false, false, false});
    const Detection* pool = find(detections, "GG-CORR-0002");
    ASSERT_NE(pool, nullptr);
    ASSERT_TRUE(pool->peer);
    EXPECT_EQ(pool->peer->domain, "xmr-eu1.nanopool.org");
    EXPECT_TRUE(std::any_of(pool->signature_ids.begin(), pool->signature_ids.end(),
                            [](const std::string& id) { return id.starts_with("GG-POOL-"); }));
    EXPECT_NE(journal_.back().find(R"("domain":"xmr-eu1.nanopool.org")"), std::string::npos);
}

// The live agent's watch list of pool addresses: NetIntel keeps what DNS
// answers gave (only when asked to), and the correlator tells pool domains.
TEST_F(NetIntelTest, dns_answers_are_kept_for_the_watch_list_only_when_asked) {
    NetPayload answer = dns_payload("xmr-eu1.nanopool.org", {203, 0, 113, 5});
    feed(2 * kSecond, answer);
    EXPECT_EQ(intel_.stats().dns_answers, 1u);
    EXPECT_TRUE(intel_.take_resolutions().empty()) << "max_pending_resolutions 0: none kept";

    NetIntel keeping(NetIntelOptions{.max_pending_resolutions = 2});
    pipeline_ = make_pipeline(keeping);
    feed(3 * kSecond, answer);
    answer.data = dns_answer("www.example.org", {192, 0, 2, 7});
    feed(4 * kSecond, answer);
    auto named = keeping.take_resolutions();
    ASSERT_EQ(named.size(), 2u);
    EXPECT_EQ(named[0].name, "xmr-eu1.nanopool.org");
    EXPECT_EQ(named[0].address, "203.0.113.5");
    EXPECT_EQ(named[0].ttl_s, 300u);
    EXPECT_EQ(named[1].address, "192.0.2.7");
    EXPECT_TRUE(keeping.take_resolutions().empty()) << "taken";
    EXPECT_TRUE(correlator_->pool_domain(named[0].name));
    EXPECT_FALSE(correlator_->pool_domain(named[1].name));

    // Bounded: the oldest go.
    for (uint8_t i = 1; i <= 3; ++i) {
        answer.data = dns_answer("pool.supportxmr.com", {198, 51, 100, i});
        feed((10 + i) * kSecond, answer);
    }
    named = keeping.take_resolutions();
    ASSERT_EQ(named.size(), 2u);
    EXPECT_EQ(named[0].address, "198.51.100.2");
    EXPECT_EQ(named[1].address, "198.51.100.3");
}

TEST_F(NetIntelTest, connect_to_an_address_nobody_resolved_has_no_domain) {
    hold_gpu(1 * kSecond);
    const auto detections =
        feed(3 * kSecond, Connect{9, 0, 4, "203.0.113.5", 10300, true, false, false, false, false});
    EXPECT_EQ(find(detections, "GG-CORR-0002"), nullptr);
    EXPECT_EQ(journal_.back().find("\"domain\""), std::string::npos);
}

TEST_F(NetIntelTest, stratum_login_raises_the_stratum_rule_within_one_message) {
    const auto detections = payload(
        5 * kSecond, NetPayload::Direction::kOut,
        R"({"id":1,"jsonrpc":"2.0","method":"login","params":{"login":"44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3Xjrp","pass":"x","agent":"XMRig/6.21.0"}})"
        "\n",
        0);
    const Detection* stratum = find(detections, "GG-CORR-0003");
    ASSERT_NE(stratum, nullptr);
    EXPECT_TRUE(std::find(stratum->signature_ids.begin(), stratum->signature_ids.end(),
                          "GG-STRATUM-0016") != stratum->signature_ids.end());
    ASSERT_TRUE(stratum->peer);
    EXPECT_EQ(stratum->peer->protocol, "cryptonote");
    EXPECT_EQ(stratum->peer->ip, "198.51.100.20");
    const auto events = stratum_events();
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(events[0].login, "44AFFq5k\u2026");
}

TEST_F(NetIntelTest, hash_rate_above_the_threshold_is_evidence) {
    make(rule_set("hash_rate_threshold: 1kH/s\n"));
    payload(1 * kSecond, NetPayload::Direction::kOut,
            R"({"id":1,"method":"mining.subscribe","params":[]})"
            "\n",
            0);
    payload(1 * kSecond + 1, NetPayload::Direction::kIn,
            R"({"id":null,"method":"mining.set_difficulty","params":[1]})"
            "\n",
            0);
    std::vector<Detection> last;
    for (uint32_t i = 0; i < 4; ++i) {
        auto detections = payload((2 + i) * kSecond, NetPayload::Direction::kOut,
                                  R"({"id":)" + std::to_string(10 + i) +
                                      R"(,"method":"mining.submit","params":["w","j","e","t","n"]})"
                                      "\n",
                                  1 + i);
        if (!detections.empty()) last = detections;
    }
    const Detection* stratum = find(last, "GG-CORR-0003");
    ASSERT_NE(stratum, nullptr);
    EXPECT_TRUE(std::any_of(stratum->evidence.begin(), stratum->evidence.end(),
                            [](const Evidence& e) { return e.detail.starts_with("hash rate "); }));
    const auto sessions = intel_.sessions();
    ASSERT_EQ(sessions.size(), 1u);
    ASSERT_TRUE(sessions[0].stratum.hash_rate);
    // Over the session: four shares of 2^32 hashes (difficulty 1) from the
    // first job (1 s + 1 ns) to the last message (5 s), not the gaps between shares.
    const double rate = 4.0 * 4294967296.0 / ((5e9 - (1e9 + 1)) / 1e9);
    EXPECT_DOUBLE_EQ(*sessions[0].stratum.hash_rate, rate);
    // Its 95 % interval from four shares (Garwood: 1.090 to 10.24 of 4).
    ASSERT_TRUE(sessions[0].stratum.hash_rate_low && sessions[0].stratum.hash_rate_high);
    EXPECT_NEAR(*sessions[0].stratum.hash_rate_low / rate, 1.0899 / 4, 0.01);
    EXPECT_NEAR(*sessions[0].stratum.hash_rate_high / rate, 10.2416 / 4, 0.03);
}

// The login of each dialect carries the whole wallet; the alert (ECS JSON of
// GG-CORR-0003, every update) and `gpuguard ps` show its first 8 characters.
TEST_F(NetIntelTest, wallets_never_reach_the_alerts_or_ps_whole) {
    const std::string xmr =
        "44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2VBBEt7f2wfn3R";
    const std::string btc = "bc1qtestwalletaddressxxxxxxxxxxxxxxxxx";
    const std::string eth = "0xb85150eb365e7df0941f0cf08235f987ba91506a";
    const std::vector<std::pair<std::string, std::vector<std::string>>> sessions = {
        {xmr,
         {R"({"id":1,"jsonrpc":"2.0","method":"login","params":{"login":")" + xmr +
          R"(+1000","pass":"x","agent":"XMRig/6.21.0"}})"}},
        {btc,
         {R"({"id":1,"method":"mining.subscribe","params":["cgminer/4.10.0"]})",
          R"({"params":[")" + btc + R"(.rig1","x"],"id":2,"method":"mining.authorize"})",
          R"({"params":[")" + btc +
              R"(.rig1","bf","01","504e86ed","b2957c02"],"id":3,"method":"mining.submit"})"}},
        {eth,
         {R"({"id":1,"jsonrpc":"2.0","method":"eth_submitLogin","params":[")" + eth +
              R"("],"worker":"rig3"})",
          R"({"id":2,"jsonrpc":"2.0","method":"eth_submitHashrate","params":["0x1dcd6500",")" +
              eth + R"("]})"}},
    };
    uint64_t flow = 1;
    for (const auto& [wallet, lines] : sessions) {
        SCOPED_TRACE(wallet);
        std::vector<Detection> detections;
        for (size_t i = 0; i < lines.size(); ++i) {
            for (auto& d : payload((10 * flow + i) * kSecond, NetPayload::Direction::kOut,
                                   lines[i] + "\n", static_cast<uint32_t>(i), flow)) {
                detections.push_back(std::move(d));
            }
        }
        size_t alerts = 0;
        std::string last_ecs;
        for (const auto& detection : detections) {
            if (detection.rule_id != "GG-CORR-0003") continue;
            ++alerts;
            const std::string ecs = siem::format_ecs_json(detection, HostInfo{});
            EXPECT_EQ(ecs.find(wallet), std::string::npos) << ecs;
            EXPECT_EQ(ecs.find(wallet.substr(0, 9)), std::string::npos) << ecs;
            last_ecs = ecs;
        }
        EXPECT_EQ(alerts, lines.size()) << "one detection and an update per line";
        EXPECT_NE(last_ecs.find(wallet.substr(0, 8) + "\u2026"), std::string::npos) << last_ecs;
        for (const auto& session : intel_.sessions()) {
            if (session.stratum.flow != flow) continue;
            EXPECT_EQ(session.stratum.messages.size(), lines.size());
            for (const auto& message : session.stratum.messages) {
                EXPECT_EQ(message.find(wallet), std::string::npos) << message;
            }
        }
        ++flow;
    }
    // The journal keeps the raw lines: replay matches signatures on them.
    EXPECT_TRUE(std::any_of(journal_.begin(), journal_.end(), [&](const std::string& line) {
        return line.find(btc) != std::string::npos && line.find("\"stratum\"") != std::string::npos;
    }));
}

// hash_rate_threshold raises GG-CORR-0011 on its own: here every stratum
// payload signature is disabled, so GG-CORR-0003 cannot fire; the rate alone
// does, once two shares give one, and only above the threshold.
TEST_F(NetIntelTest, hash_rate_above_the_threshold_raises_a_detection_on_its_own) {
    const std::string no_payload_signatures =
        "signatures:\n  disable: [GG-STRATUM-0009, GG-STRATUM-0010, GG-STRATUM-0011, "
        "GG-STRATUM-0012]\n";
    const auto mine = [&](uint64_t flow, uint32_t pid) {
        std::vector<Detection> all;
        const auto keep = [&](std::vector<Detection> detections) {
            for (auto& d : detections) all.push_back(std::move(d));
        };
        const auto send = [&](uint64_t ts, NetPayload::Direction direction, std::string line,
                              uint32_t seq) {
            NetPayload sample;
            sample.direction = direction;
            sample.length = static_cast<uint32_t>(line.size() + 1);
            sample.seq = seq;
            sample.flow = flow;
            sample.remote_address = "198.51.100.20";
            sample.remote_port = 3333;
            sample.data = std::move(line) + "\n";
            keep(feed(ts, sample, pid));
        };
        send(1 * kSecond, NetPayload::Direction::kOut,
             R"({"id":1,"method":"mining.subscribe","params":[]})", 0);
        send(1 * kSecond + 1, NetPayload::Direction::kIn,
             R"({"id":null,"method":"mining.set_difficulty","params":[1]})", 0);
        // 2^32 hashes per share, one share a second: 4.29 GH/s.
        for (uint32_t i = 0; i < 3; ++i) {
            send((2 + i) * kSecond, NetPayload::Direction::kOut,
                 R"({"id":)" + std::to_string(10 + i) +
                     R"(,"method":"mining.submit","params":["w","j","e","t","n"]})",
                 1 + i);
        }
        return all;
    };
    const auto fired = [](const std::vector<Detection>& all, const std::string& rule) {
        return std::count_if(all.begin(), all.end(), [&](const Detection& d) {
            return d.rule_id == rule && d.update == 0;
        });
    };

    make(rule_set(no_payload_signatures + "hash_rate_threshold: 1GH/s\n"));
    const auto above = mine(1, 5001);
    EXPECT_EQ(fired(above, "GG-CORR-0003"), 0);
    ASSERT_EQ(fired(above, "GG-CORR-0011"), 1);
    const auto detection = std::find_if(
        above.begin(), above.end(), [](const Detection& d) { return d.rule_id == "GG-CORR-0011"; });
    EXPECT_EQ(detection->first_seen_ns, 3 * kSecond) << "raised by the second share";
    ASSERT_EQ(detection->evidence.size(), 1u);
    EXPECT_EQ(detection->evidence[0].field, "hash_rate");
    EXPECT_EQ(detection->evidence[0].detail,
              "hash rate 4.295e+09 H/s (95 %: 4.8e+08 to 1.6e+10) above hash_rate_threshold 1e+09 "
              "H/s")
        << "two shares: the 95 % interval spans a factor of 30";
    ASSERT_TRUE(detection->peer);
    EXPECT_EQ(detection->peer->protocol, "stratum1");
    EXPECT_EQ(detection->action, "alert");

    make(rule_set(no_payload_signatures + "hash_rate_threshold: 5GH/s\n"));
    EXPECT_EQ(fired(mine(2, 5002), "GG-CORR-0011"), 0) << "below the threshold";
    make(rule_set(no_payload_signatures));
    EXPECT_EQ(fired(mine(3, 5003), "GG-CORR-0011"), 0) << "no threshold set";
}

TEST_F(NetIntelTest, non_mining_json_rpc_raises_nothing) {
    std::vector<Detection> all;
    for (
        const auto& detection : payload(
            1 * kSecond, NetPayload::Direction::kOut,
            R"({"jsonrpc":"2.0","method":"eth_getBalance","params":["0xb85150eb365e7df0941f0cf08235f987ba91506a","latest"],"id":1})"
            "\n",
            0)) {
        all.push_back(detection);
    }
    for (const auto& detection : payload(1 * kSecond + 5, NetPayload::Direction::kIn,
                                         R"({"jsonrpc":"2.0","id":1,"result":"0x0234c8a3397aab58"})"
                                         "\n",
                                         0)) {
        all.push_back(detection);
    }
    EXPECT_TRUE(all.empty());
    EXPECT_TRUE(stratum_events().empty());
    EXPECT_EQ(intel_.stats().sessions_recognised, 0u);
}

TEST_F(NetIntelTest, replaying_the_journaled_events_reproduces_the_detections) {
    hold_gpu(1 * kSecond);
    NetPayload answer;
    answer.direction = NetPayload::Direction::kIn;
    answer.stream = false;
    answer.dns = true;
    answer.remote_port = 53;
    answer.data = dns_answer("pool.supportxmr.com", {198, 51, 100, 20});
    std::vector<std::string> live;
    const auto collect = [&](const std::vector<Detection>& detections) {
        for (const auto& d : detections) live.push_back(d.rule_id + "/" + std::to_string(d.update));
    };
    collect(feed(2 * kSecond, answer));
    collect(feed(3 * kSecond,
                 Connect{7, 0, 4, "198.51.100.20", 443, true, false, false, false, false}));
    collect(payload(4 * kSecond, NetPayload::Direction::kOut,
                    R"({"id":1,"method":"mining.subscribe","params":["x/1"]})"
                    "\n",
                    0));
    ASSERT_FALSE(live.empty());
    EXPECT_EQ(stratum_events().at(0).pool_domain, "pool.supportxmr.com");

    // Replay: a fresh table, correlator and NetIntel, the journaled JSON
    // (payloads and the stratum events live derived from them) through the
    // same pipeline. The stratum events are derived again and the recorded
    // copies dropped, so nothing is judged twice.
    const auto lines = journal_;
    make(rule_set());
    NetIntel fresh{NetIntelOptions{0, 64, 16, 128}};
    auto replay = make_pipeline(fresh);
    std::vector<std::string> replayed;
    size_t recorded_stratum = 0;
    for (const auto& line : lines) {
        auto parsed = event_from_json(line, "journal");
        ASSERT_TRUE(parsed) << parsed.error().message;
        if (std::holds_alternative<Stratum>(parsed->event.data)) ++recorded_stratum;
        out_.clear();
        replay->feed(parsed->event);
        for (const auto& d : out_) replayed.push_back(d.rule_id + "/" + std::to_string(d.update));
    }
    EXPECT_EQ(replayed, live);
    ASSERT_GT(recorded_stratum, 0u);
    EXPECT_EQ(replay->stats().derived, recorded_stratum);
    EXPECT_EQ(replay->stats().rederived, recorded_stratum);

    // Without the derived events (a stream of raw kernel events only) the
    // pipeline derives them itself: the same detections.
    make(rule_set());
    NetIntel again{NetIntelOptions{0, 64, 16, 128}};
    auto raw = make_pipeline(again);
    std::vector<std::string> from_raw;
    for (const auto& line : lines) {
        auto parsed = event_from_json(line, "journal");
        ASSERT_TRUE(parsed);
        if (std::holds_alternative<Stratum>(parsed->event.data)) continue;
        out_.clear();
        raw->feed(parsed->event);
        for (const auto& d : out_) from_raw.push_back(d.rule_id + "/" + std::to_string(d.update));
    }
    EXPECT_EQ(from_raw, live);
    EXPECT_EQ(raw->stats().rederived, 0u);
}

// A recorded stratum event no payload of the stream derives again (a
// hand-made file) is judged as it is.
TEST_F(NetIntelTest, a_stratum_event_without_its_payload_is_judged_as_recorded) {
    hold_gpu(1 * kSecond);
    Stratum session;
    session.flow = kFlow;
    session.protocol = "stratum1";
    session.pool_address = "198.51.100.20";
    session.pool_port = 3333;
    session.methods = {"mining.subscribe"};
    session.messages = {R"({"id":1,"method":"mining.subscribe","params":["x/1"]})"};
    const auto detections = feed(2 * kSecond, session);
    EXPECT_TRUE(find(detections, "GG-CORR-0003"));
    EXPECT_EQ(pipeline_->stats().rederived, 0u);
    EXPECT_EQ(stratum_events().size(), 1u);
}

TEST_F(NetIntelTest, exit_forgets_the_process_sessions) {
    payload(1 * kSecond, NetPayload::Direction::kOut,
            R"({"id":1,"method":"mining.subscribe","params":[]})"
            "\n",
            0);
    EXPECT_EQ(intel_.sessions().size(), 1u);
    feed(2 * kSecond, Exit{0, false});
    EXPECT_TRUE(intel_.sessions().empty());
}

TEST_F(NetIntelTest, unrecognised_flows_are_bounded) {
    for (uint64_t flow = 1; flow <= 200; ++flow) {
        payload(flow, NetPayload::Direction::kOut, R"({"jsonrpc":"2.0","method":"ping"})", 0, flow);
    }
    // Only sessions() of recognised flows are visible; the table itself stays bounded.
    payload(1000, NetPayload::Direction::kOut, R"({"id":1,"method":"mining.subscribe"})", 0, 999);
    EXPECT_EQ(intel_.sessions().size(), 1u);
}

}  // namespace
}  // namespace gpuguard::agent
