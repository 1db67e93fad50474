// HTTP sinks. The generic status handling (retry on 503, a refused record
// resent alone, then dropped and counted) against a server that fails the
// first K requests; then each receiver as its documentation describes it
// (tests/siem/http_peers.h), over HTTPS with a test CA, in batches: the
// Elasticsearch _bulk items settled one by one, Splunk HEC with and without
// indexer acknowledgement, the webhook's bearer token and headers, a CA that
// did not sign the peer, and a disk queue carried across a restart while
// the peer is down.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "gpuguard/siem/siem.h"
#include "tests/siem/http_peers.h"
#include "tests/siem/siem_fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::siem {
namespace {

// Answers 503 to the first `fail_first` requests, then calls `accept`.
class FlakyServer {
  public:
    using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
    FlakyServer(int fail_first, Handler accept)
        : fail_first_(fail_first), accept_(std::move(accept)) {
        const auto handle = [this](const httplib::Request& request, httplib::Response& response) {
            std::lock_guard lock(mutex_);
            requests_.push_back(request);
            if (++count_ <= fail_first_) {
                response.status = 503;
                response.set_content("try later", "text/plain");
                return;
            }
            accept_(request, response);
        };
        server_.Post(".*", handle);
        port_ = server_.bind_to_any_port("127.0.0.1");
        thread_ = std::thread([this] { server_.listen_after_bind(); });
        for (int i = 0; i < 500 && !server_.is_running(); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
    ~FlakyServer() {
        server_.stop();
        thread_.join();
    }
    std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
    std::vector<httplib::Request> requests() {
        std::lock_guard lock(mutex_);
        return requests_;
    }

  private:
    int fail_first_;
    int count_ = 0;
    Handler accept_;
    httplib::Server server_;
    int port_ = 0;
    std::thread thread_;
    std::mutex mutex_;
    std::vector<httplib::Request> requests_;
};

SinkConfig http_sink(SinkType type, const std::string& url) {
    SinkConfig sink;
    sink.name = "http";
    sink.type = type;
    sink.address = url;
    sink.retry_initial = std::chrono::milliseconds(10);
    sink.retry_max = std::chrono::milliseconds(50);
    sink.io_timeout = std::chrono::milliseconds(3000);
    return sink;
}

std::unique_ptr<AlertRouter> start(const SinkConfig& sink) {
    RouterOptions options;
    options.host = testing::test_host();
    options.sinks.push_back(sink);
    auto router = AlertRouter::start(options);
    EXPECT_TRUE(router) << router.error().message;
    return router ? std::move(router.value()) : nullptr;
}

TEST(HttpSink, webhook_retries_until_the_server_accepts) {
    FlakyServer server(3, [](const auto&, auto& response) { response.status = 204; });
    auto router = start(http_sink(SinkType::kWebhook, server.url() + "/hook"));
    ASSERT_TRUE(router);
    for (int n = 0; n < 20; ++n) router->publish(testing::test_detection(fmt::format("w{}", n)));
    router->publish(testing::test_outcome());
    ASSERT_TRUE(router->flush(std::chrono::seconds(10)));
    const auto counters = router->counters()[0];
    EXPECT_EQ(counters.sent, 21u);
    EXPECT_EQ(counters.dropped, 0u);
    EXPECT_GE(counters.retried, 3u);
    std::set<std::string> ids;
    for (const auto& request : server.requests()) {
        EXPECT_EQ(request.path, "/hook");
        EXPECT_EQ(request.get_header_value("Content-Type"), "application/json");
        ids.insert(nlohmann::json::parse(request.body)["event"]["id"].get<std::string>());
    }
    EXPECT_EQ(ids.size(), 21u);
}

TEST(HttpSink, permanently_rejected_record_is_dropped_and_counted) {
    FlakyServer server(0, [](const auto&, auto& response) {
        response.status = 400;
        response.set_content("bad event", "text/plain");
    });
    auto sink = http_sink(SinkType::kSplunkHec, server.url());
    sink.batch_max_records = 10;
    auto router = start(sink);
    ASSERT_TRUE(router);
    for (int n = 0; n < 3; ++n) router->publish(testing::test_detection(fmt::format("r{}", n)));
    ASSERT_TRUE(router->flush(std::chrono::seconds(10)));
    const auto counters = router->counters()[0];
    EXPECT_EQ(counters.sent, 0u);
    EXPECT_EQ(counters.dropped, 3u);
    EXPECT_EQ(counters.queue_records, 0u);
}

// ---- receivers as documented, over HTTPS ------------------------------------

using testing::ElasticsearchPeer;
using testing::HecOptions;
using testing::SplunkHecPeer;
using testing::WebhookPeer;

constexpr auto kWait = std::chrono::seconds(10);

std::string detection_id(int n) { return fmt::format("d{:03}", n); }
std::string alert_of(int n) { return alert_id(testing::test_detection(detection_id(n))); }

// Polls `done` until it holds or `timeout` passes.
template <typename Predicate>
bool wait_until(Predicate done, std::chrono::milliseconds timeout = kWait) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

class HttpSinkTest : public ::testing::Test {
  protected:
    // One test PKI (openssl CLI) for the whole suite.
    static void SetUpTestSuite() {
        if (testing::find_tool("openssl").empty()) return;
        pki_dir_ = std::make_unique<testing::TempDir>("gg-http-pki");
        if (!testing::make_test_pki(pki_dir_->path(), &pki_)) pki_ = {};
    }
    static void TearDownTestSuite() { pki_dir_.reset(); }

    void SetUp() override {
        GG_REQUIRE_TOOL("openssl");
        ASSERT_FALSE(pki_.ca_cert.empty()) << "the test PKI could not be made";
    }

    SinkConfig https_sink(SinkType type, const testing::HttpPeer& peer,
                          const std::string& name = "http") const {
        SinkConfig sink = http_sink(type, peer.url());
        sink.name = name;
        sink.tls_ca_file = pki_.ca_cert.string();
        return sink;
    }

    // Publishes detections first..first+count-1 while the peer is down and
    // waits until all are queued, so that the first accepted request holds
    // a full batch; then brings the peer up.
    static void publish_then_start(AlertRouter& router, testing::HttpPeer& peer, int first,
                                   int count) {
        for (int n = first; n < first + count; ++n) {
            router.publish(testing::test_detection(detection_id(n)));
        }
        ASSERT_TRUE(wait_until(
            [&] { return router.counters()[0].queued >= static_cast<uint64_t>(first + count); }));
        ASSERT_TRUE(peer.start());
    }

    // A router with `sink` that was given `count` detections while the peer
    // was down and delivered them all once it came up (nullptr after a failure).
    static std::unique_ptr<AlertRouter> deliver_all(const SinkConfig& sink, testing::HttpPeer& peer,
                                                    int count) {
        auto router = start(sink);
        if (!router) return nullptr;
        publish_then_start(*router, peer, 0, count);
        EXPECT_TRUE(router->flush(kWait)) << router->counters()[0].last_error;
        return router;
    }

    testing::TempDir dir_{"gg-http-sink"};
    static inline std::unique_ptr<testing::TempDir> pki_dir_;
    static inline testing::TestPki pki_;
};

// Item 3 exists already (409: delivered), item 5 is throttled once (429:
// only it is sent again), item 7 has a mapping error (400: dropped and
// counted). Every other item is sent exactly once.
TEST_F(HttpSinkTest, elasticsearch_bulk_settles_each_item_on_its_own) {
    ElasticsearchPeer peer(&pki_, "api-key", testing::free_port());
    peer.preload(alert_of(3));
    peer.fail_item(alert_of(5), 429, 1);
    peer.fail_item(alert_of(7), 400, -1);
    auto sink = https_sink(SinkType::kElasticsearch, peer);
    sink.token = "api-key";
    auto router = deliver_all(sink, peer, 40);
    ASSERT_TRUE(router);

    const auto counters = router->counters()[0];
    EXPECT_EQ(counters.sent, 39u);
    EXPECT_EQ(counters.dropped, 1u);
    EXPECT_EQ(counters.queue_records, 0u);
    const auto attempts = peer.attempts();
    ASSERT_EQ(attempts.size(), 40u);
    for (int n = 0; n < 40; ++n) {
        EXPECT_EQ(attempts.at(alert_of(n)), n == 5 ? 2 : 1) << alert_of(n);
    }
    const auto documents = peer.documents();
    EXPECT_EQ(documents.size(), 39u);
    EXPECT_EQ(documents.count(alert_of(7)), 0u);
    EXPECT_EQ(documents.at(alert_of(12))["event"]["id"], alert_of(12));
    const auto batches = peer.batch_sizes();
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[0], 40u);
    EXPECT_EQ(batches[1], 1u);  // item 5 alone
    const auto requests = peer.requests();
    EXPECT_EQ(requests.back().path, "/_bulk");
    EXPECT_EQ(requests.back().header("content-type"), "application/x-ndjson");
}

// Indexer acknowledgement on: every request carries the sink's data
// channel, and a batch counts once /services/collector/ack says its ackId
// is true. The peer loses the first batch (never indexed, never
// acknowledged): it must be sent again, and every event arrives once.
TEST_F(HttpSinkTest, splunk_hec_with_indexer_ack_counts_a_batch_once_acknowledged) {
    HecOptions options;
    options.token = "11111111-2222-3333-4444-555555555555";
    options.lose_batches = 1;
    SplunkHecPeer peer(&pki_, options, testing::free_port());
    auto sink = https_sink(SinkType::kSplunkHec, peer);
    sink.token = options.token;
    sink.index = "soc";
    sink.batch_max_records = 20;
    // Also the wait for an ack: the lost batch waits it out. Long enough that
    // a delivered batch's two ack queries (over TLS, on a loaded host) never
    // outlast it, which would send that batch again too (at least once, as
    // with Splunk itself) and break the count of one each below.
    sink.io_timeout = std::chrono::milliseconds(1500);
    auto router = deliver_all(sink, peer, 50);
    ASSERT_TRUE(router);

    const auto counters = router->counters()[0];
    EXPECT_EQ(counters.sent, 50u);
    EXPECT_EQ(counters.dropped, 0u);
    EXPECT_GE(counters.retried, 20u);
    std::map<std::string, int> seen;
    for (const auto& event : peer.events()) {
        EXPECT_EQ(event["time"], "1714564800.250000");
        EXPECT_EQ(event["host"], "gpu-node-7");
        EXPECT_EQ(event["source"], "gpuguard");
        EXPECT_EQ(event["sourcetype"], "gpuguard:ecs_json");
        EXPECT_EQ(event["index"], "soc");
        EXPECT_EQ(event["event"]["rule"]["id"], "miner.xmrig.cmdline");
        ++seen[event["event"]["event"]["id"].get<std::string>()];
    }
    EXPECT_EQ(seen.size(), 50u);
    for (const auto& [id, count] : seen) EXPECT_EQ(count, 1) << id;
    const auto batches = peer.batch_sizes();
    ASSERT_FALSE(batches.empty());
    EXPECT_GT(*std::max_element(batches.begin(), batches.end()), 1u);
    EXPECT_EQ(peer.channels().size(), 1u);
    EXPECT_GE(peer.ack_queries(), 2 * batches.size());  // each ackId reads true on its 2nd query
    for (const auto& request : peer.requests()) {
        EXPECT_EQ(request.header("authorization"), "Splunk " + options.token);
        EXPECT_EQ(request.status, 200) << request.path << " " << request.body.substr(0, 200);
    }
}

// Acknowledgement off: "Success" without an ackId delivers, and the sink
// never asks the ack endpoint (which would answer "ACK is disabled").
TEST_F(HttpSinkTest, splunk_hec_without_indexer_ack_delivers_on_success) {
    HecOptions options;
    options.token = "hec-token";
    options.acks = false;
    SplunkHecPeer peer(&pki_, options, testing::free_port());
    auto sink = https_sink(SinkType::kSplunkHec, peer);
    sink.token = options.token;
    auto router = deliver_all(sink, peer, 30);
    ASSERT_TRUE(router);
    EXPECT_EQ(router->counters()[0].sent, 30u);
    EXPECT_EQ(peer.events().size(), 30u);
    EXPECT_EQ(peer.batch_sizes(), std::vector<size_t>{30});
    EXPECT_EQ(peer.ack_queries(), 0u);
}

// An index the token may not write is a setting, not bad data: HEC's 400
// "Incorrect index" (code 7) keeps the records queued for a fixed
// configuration instead of dropping them.
TEST_F(HttpSinkTest, splunk_hec_incorrect_index_keeps_records_queued) {
    HecOptions options;
    options.token = "hec-token";
    options.indexes = {"soc"};
    SplunkHecPeer peer(&pki_, options);
    ASSERT_TRUE(peer.start());
    auto sink = https_sink(SinkType::kSplunkHec, peer);
    sink.token = options.token;
    sink.index = "main";
    auto router = start(sink);
    ASSERT_TRUE(router);
    for (int n = 0; n < 3; ++n) router->publish(testing::test_detection(detection_id(n)));
    ASSERT_TRUE(wait_until([&] { return router->counters()[0].retried >= 3; }));
    router->stop(std::chrono::milliseconds(0));
    const auto counters = router->counters()[0];
    EXPECT_EQ(counters.sent, 0u);
    EXPECT_EQ(counters.dropped, 0u);
    EXPECT_EQ(counters.queue_records, 3u);
    EXPECT_NE(counters.last_error.find("Incorrect index"), std::string::npos)
        << counters.last_error;
    EXPECT_TRUE(peer.events().empty());
}

// The webhook checks the bearer token and the configured header: the sink
// that sends both delivers in batches of 10; one with a wrong token (403) and
// one without the header (403) deliver nothing, drop nothing and keep their
// records queued.
TEST_F(HttpSinkTest, webhook_sends_its_bearer_token_and_headers) {
    WebhookPeer peer(&pki_, "s3cret", {{"X-Team", "soc"}}, testing::free_port());
    auto good = https_sink(SinkType::kWebhook, peer, "good");
    good.token = "s3cret";
    good.http_headers = {"X-Team: soc"};
    good.batch_max_records = 10;
    auto wrong_token = good;
    wrong_token.name = "wrong-token";
    wrong_token.token = "guess";
    auto no_header = good;
    no_header.name = "no-header";
    no_header.http_headers.clear();
    RouterOptions router_options;
    router_options.host = testing::test_host();
    router_options.sinks = {good, wrong_token, no_header};
    auto started = AlertRouter::start(router_options);
    ASSERT_TRUE(started) << started.error().message;
    auto& router = *started;
    publish_then_start(*router, peer, 0, 25);
    ASSERT_TRUE(wait_until([&] {
        const auto counters = router->counters();
        return counters[0].sent == 25 && !counters[1].last_error.empty() &&
               counters[1].last_error.find("Failed to connect") == std::string::npos &&
               counters[2].last_error.find("Failed to connect") == std::string::npos &&
               !counters[2].last_error.empty();
    })) << router->counters()[0].last_error;
    router->stop(std::chrono::milliseconds(0));

    const auto counters = router->counters();
    EXPECT_EQ(counters[0].sent, 25u) << counters[0].last_error;
    std::set<std::string> ids;
    for (const auto& record : peer.records()) ids.insert(record["event"]["id"].get<std::string>());
    EXPECT_EQ(ids.size(), 25u);
    EXPECT_EQ(peer.batch_sizes(), (std::vector<size_t>{10, 10, 5}));
    for (size_t i : {1, 2}) {
        EXPECT_EQ(counters[i].sent, 0u) << counters[i].name;
        EXPECT_EQ(counters[i].dropped, 0u) << counters[i].name;
        EXPECT_EQ(counters[i].queue_records, 25u) << counters[i].name;
        EXPECT_NE(counters[i].last_error.find("HTTP 403"), std::string::npos)
            << counters[i].last_error;
    }
}

// tls_ca_file is what the peer's certificate is checked against: a CA that
// did not sign it gets nothing delivered.
TEST_F(HttpSinkTest, https_peer_the_ca_did_not_sign_gets_nothing) {
    WebhookPeer peer(&pki_, "s3cret", {});
    ASSERT_TRUE(peer.start());
    auto sink = https_sink(SinkType::kWebhook, peer);
    sink.token = "s3cret";
    sink.tls_ca_file = pki_.other_ca_cert.string();
    auto router = start(sink);
    ASSERT_TRUE(router);
    router->publish(testing::test_detection());
    ASSERT_TRUE(wait_until([&] { return !router->counters()[0].last_error.empty(); }));
    router->stop(std::chrono::milliseconds(0));
    const auto counters = router->counters()[0];
    EXPECT_EQ(counters.sent, 0u);
    EXPECT_EQ(counters.queue_records, 1u);
    EXPECT_NE(counters.last_error.find("certificate"), std::string::npos) << counters.last_error;
    EXPECT_TRUE(peer.records().empty());
}

// queue_dir: the peer is down, the first router queues 30 records on disk
// and stops; a second one resumes them, adds 20, and when the peer comes
// back every record arrives exactly once.
TEST_F(HttpSinkTest, queue_dir_carries_records_across_a_restart_while_the_peer_is_down) {
    HecOptions options;
    options.token = "hec-token";
    SplunkHecPeer peer(&pki_, options, testing::free_port());
    auto sink = https_sink(SinkType::kSplunkHec, peer);
    sink.token = options.token;
    sink.queue_dir = dir_ / "queue";
    {
        auto first = start(sink);
        ASSERT_TRUE(first);
        for (int n = 0; n < 30; ++n) first->publish(testing::test_detection(detection_id(n)));
        ASSERT_TRUE(wait_until([&] { return first->counters()[0].persisted == 30; }));
        first->stop(std::chrono::milliseconds(0));
        EXPECT_EQ(first->counters()[0].sent, 0u);
        EXPECT_EQ(first->counters()[0].queue_records, 30u);
    }
    auto second = start(sink);
    ASSERT_TRUE(second);
    EXPECT_EQ(second->counters()[0].queue_records, 30u);
    for (int n = 30; n < 50; ++n) second->publish(testing::test_detection(detection_id(n)));
    ASSERT_TRUE(peer.start());
    ASSERT_TRUE(second->flush(kWait)) << second->counters()[0].last_error;
    EXPECT_EQ(second->counters()[0].sent, 50u);
    EXPECT_EQ(second->counters()[0].dropped, 0u);
    std::map<std::string, int> seen;
    for (const auto& event : peer.events())
        ++seen[event["event"]["event"]["id"].get<std::string>()];
    EXPECT_EQ(seen.size(), 50u);
    for (int n = 0; n < 50; ++n) EXPECT_EQ(seen[alert_of(n)], 1) << alert_of(n);
}

}  // namespace
}  // namespace gpuguard::siem
