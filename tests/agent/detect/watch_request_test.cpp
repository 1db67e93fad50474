// The correlator's watch requests (take_watch_requests): a process whose
// name, executable, command line, config or YARA scan matched a miner
// signature is asked into the kernel watch list once, GPU or not; one whose
// only evidence is on the network (it is already captured), a generic one
// (an executable in /tmp), or none, is not.
#include <gtest/gtest.h>

#include "gpuguard/detect/correlator.h"
#include "gpuguard/rules/correlation.h"
#include "tests/agent/detect/correlator_fixture.h"

namespace gpuguard::agent {
namespace {

using correlator_testing::kSecond;

class WatchRequestTest : public ::testing::Test {
  protected:
    void make(CorrelatorOptions options) {
        // The pack compiled once for the suite (correlator_fixture.h).
        auto set = rules::RuleSet::build(correlator_testing::pack(), {});
        ASSERT_TRUE(set) << set.error().message;
        auto parsed = rules::builtin_correlation_rules();
        ASSERT_TRUE(parsed) << parsed.error().message;
        ProcessTableOptions table_options;
        table_options.read_host = false;
        table_ =
            std::make_unique<ProcessTable>(table_options, [](uint32_t, uint32_t) { return true; });
        auto created = Correlator::create(
            *parsed, std::make_shared<const rules::RuleSet>(std::move(*set)), *table_, options);
        ASSERT_TRUE(created) << created.error().message;
        correlator_ = std::move(*created);
    }

    void feed(uint64_t ts, uint32_t pid, const std::string& comm, EventData data) {
        Event event{ts, TaskInfo{pid, pid, 1, 1000, 1000, 1, comm}, std::move(data)};
        table_->apply(event);
        std::vector<Detection> out;
        correlator_->observe(event, out);
    }

    void exec(uint64_t ts, uint32_t pid, const std::string& exe, std::vector<std::string> argv) {
        const std::string comm = exe.substr(exe.rfind('/') + 1);
        feed(ts, pid, comm, Exec{exe, std::move(argv), false, false, pid});
    }

    std::unique_ptr<ProcessTable> table_;
    std::unique_ptr<Correlator> correlator_;
};

TEST_F(WatchRequestTest, a_pool_url_in_argv_asks_once_without_a_gpu) {
    make(CorrelatorOptions{.request_watches = true});
    exec(1 * kSecond, 400, "/tmp/.cache/worker",
         {"xmrig", "-o", "stratum+tcp://127.0.0.1:10300", "-u", "WALLET"});
    auto requests = correlator_->take_watch_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].pid, 400u);
    EXPECT_EQ(requests[0].ts_ns, 1 * kSecond);
    EXPECT_EQ(requests[0].signature_id, "GG-STRATUM-0001");
    EXPECT_NE(requests[0].detail.find("stratum+tcp://"), std::string::npos);
    // More evidence, a new image: it is in the list already.
    feed(2 * kSecond, 400, "worker", Connect{5, 0, 4, "127.0.0.1", 10300});
    exec(3 * kSecond, 400, "/opt/xmrig/xmrig", {"xmrig"});
    EXPECT_TRUE(correlator_->take_watch_requests().empty());
}

TEST_F(WatchRequestTest, a_miner_name_asks_and_a_benign_process_does_not) {
    make(CorrelatorOptions{.request_watches = true});
    exec(1 * kSecond, 401, "/usr/bin/python3", {"python3", "train.py", "--epochs", "3"});
    feed(2 * kSecond, 401, "python3", Connect{5, 0, 4, "192.0.2.10", 443});
    EXPECT_TRUE(correlator_->take_watch_requests().empty()) << "no miner signature";
    exec(3 * kSecond, 402, "/opt/miners/xmrig", {"xmrig"});
    const auto requests = correlator_->take_watch_requests();
    ASSERT_EQ(requests.size(), 1u);
    EXPECT_EQ(requests[0].pid, 402u);
}

TEST_F(WatchRequestTest, a_generic_sign_alone_asks_nothing) {
    make(CorrelatorOptions{.request_watches = true});
    exec(1 * kSecond, 405, "/tmp/build/run-tests", {"run-tests", "--all"});  // GG-GPUABUSE-0001
    EXPECT_TRUE(correlator_->take_watch_requests().empty());
}

TEST_F(WatchRequestTest, network_evidence_alone_asks_nothing) {
    make(CorrelatorOptions{.request_watches = true});
    exec(1 * kSecond, 403, "/usr/bin/curl", {"curl", "https://example.org"});
    Connect pool{5, 0, 4, "203.0.113.5", 3333};
    pool.domain = "xmr-eu1.nanopool.org";
    feed(2 * kSecond, 403, "curl", pool);  // port and domain hits: already captured
    EXPECT_TRUE(correlator_->take_watch_requests().empty());
}

TEST_F(WatchRequestTest, requests_are_off_by_default) {
    make(CorrelatorOptions{});
    exec(1 * kSecond, 404, "/opt/miners/xmrig", {"xmrig", "-o", "stratum+tcp://127.0.0.1:10300"});
    EXPECT_TRUE(correlator_->take_watch_requests().empty());
}

}  // namespace
}  // namespace gpuguard::agent
