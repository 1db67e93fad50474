// HTTP sinks against a local cpp-httplib server that fails the first K
// requests: webhook, Splunk HEC and Elasticsearch _bulk bodies are checked,
// and every alert must arrive.
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "gpuguard/siem/siem.h"
#include "tests/siem/siem_fixtures.h"

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

std::vector<nlohmann::json> json_lines(const std::string& body) {
    std::vector<nlohmann::json> out;
    std::istringstream in(body);
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    }
    return out;
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

TEST(HttpSink, splunk_hec_posts_event_envelopes_with_token) {
    FlakyServer server(2, [](const auto&, auto& response) {
        response.set_content(R"({"text":"Success","code":0})", "application/json");
    });
    auto sink = http_sink(SinkType::kSplunkHec, server.url());
    sink.token = "11111111-2222-3333-4444-555555555555";
    sink.index = "soc";
    auto router = start(sink);
    ASSERT_TRUE(router);
    for (int n = 0; n < 50; ++n) router->publish(testing::test_detection(fmt::format("h{}", n)));
    ASSERT_TRUE(router->flush(std::chrono::seconds(10)));
    EXPECT_EQ(router->counters()[0].sent, 50u);
    std::set<std::string> ids;
    const auto requests = server.requests();
    for (size_t i = 2; i < requests.size(); ++i) {
        const auto& request = requests[i];
        EXPECT_EQ(request.path, "/services/collector/event");
        EXPECT_EQ(request.get_header_value("Authorization"), "Splunk " + sink.token);
        for (const auto& event : json_lines(request.body)) {
            EXPECT_EQ(event["time"], "1714564800.250000");
            EXPECT_EQ(event["host"], "gpu-node-7");
            EXPECT_EQ(event["source"], "gpuguard");
            EXPECT_EQ(event["sourcetype"], "gpuguard:ecs_json");
            EXPECT_EQ(event["index"], "soc");
            EXPECT_EQ(event["event"]["rule"]["id"], "miner.xmrig.cmdline");
            ids.insert(event["event"]["event"]["id"].get<std::string>());
        }
    }
    EXPECT_EQ(ids.size(), 50u);
}

// _bulk with create and _id = alert id. The first accepted request fails
// item 5 with 429: items before it count as delivered, the rest is resent
// (a resent item that already exists would be answered 409, also delivered).
TEST(HttpSink, elasticsearch_bulk_creates_each_alert_once) {
    std::mutex mutex;
    std::map<std::string, nlohmann::json> index;
    bool throttled = false;
    FlakyServer server(2, [&](const httplib::Request& request, httplib::Response& response) {
        std::lock_guard lock(mutex);
        const auto lines = json_lines(request.body);
        nlohmann::json items = nlohmann::json::array();
        for (size_t i = 0; i + 1 < lines.size(); i += 2) {
            const auto& action = lines[i]["create"];
            const std::string id = action["_id"];
            EXPECT_EQ(action["_index"], "gpuguard-alerts");
            EXPECT_EQ(lines[i + 1]["event"]["id"], id);
            int status = 201;
            if (!throttled && i / 2 == 5) {
                throttled = true;
                status = 429;
            } else if (index.count(id)) {
                status = 409;
            } else {
                index[id] = lines[i + 1];
            }
            items.push_back({{"create", {{"_id", id}, {"status", status}}}});
        }
        nlohmann::json body = {{"took", 1}, {"errors", true}, {"items", items}};
        response.set_content(body.dump(), "application/json");
    });
    auto sink = http_sink(SinkType::kElasticsearch, server.url());
    sink.token = "api-key";
    auto router = start(sink);
    ASSERT_TRUE(router);
    for (int n = 0; n < 40; ++n) router->publish(testing::test_detection(fmt::format("b{}", n)));
    ASSERT_TRUE(router->flush(std::chrono::seconds(10)));
    const auto counters = router->counters()[0];
    EXPECT_EQ(counters.sent, 40u);
    EXPECT_GE(counters.retried, 1u);
    EXPECT_EQ(counters.dropped, 0u);
    std::lock_guard lock(mutex);
    EXPECT_EQ(index.size(), 40u);
    EXPECT_TRUE(throttled);
    const auto requests = server.requests();
    ASSERT_FALSE(requests.empty());
    EXPECT_EQ(requests.back().path, "/_bulk");
    EXPECT_EQ(requests.back().get_header_value("Content-Type"), "application/x-ndjson");
    EXPECT_EQ(requests.back().get_header_value("Authorization"), "ApiKey api-key");
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

}  // namespace
}  // namespace gpuguard::siem
