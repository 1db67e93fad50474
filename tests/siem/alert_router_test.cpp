// AlertRouter with local sinks: filtering, file rotation, overflow policies
// and counters, a disk queue that outlives the router, and the retry backoff
// seen from a loopback listener that turns every connection away.
#include <atomic>
#include <fstream>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpuguard/siem/siem.h"
#include "tests/siem/siem_fixtures.h"
#include "tests/siem/test_pki.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::siem {
namespace {

std::vector<std::string> read_lines(const std::filesystem::path& path) {
    std::vector<std::string> lines;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
    return lines;
}

std::unique_ptr<AlertRouter> start(std::vector<SinkConfig> sinks) {
    RouterOptions options;
    options.host = testing::test_host();
    options.sinks = std::move(sinks);
    auto router = AlertRouter::start(options);
    EXPECT_TRUE(router) << router.error().message;
    return router ? std::move(router.value()) : nullptr;
}

SinkConfig file_sink(const std::filesystem::path& path, const std::string& name = "file") {
    SinkConfig sink;
    sink.name = name;
    sink.type = SinkType::kFile;
    sink.address = path.string();
    return sink;
}

// A TCP sink to a loopback port nobody listens on.
SinkConfig dead_tcp_sink() {
    SinkConfig sink;
    sink.name = "dead";
    sink.type = SinkType::kTcp;
    sink.address = "127.0.0.1:" + std::to_string(testing::free_port());
    sink.retry_initial = std::chrono::milliseconds(1000);
    sink.retry_max = std::chrono::milliseconds(1000);
    sink.io_timeout = std::chrono::milliseconds(500);
    return sink;
}

TEST(AlertRouter, file_sink_filters_by_severity_and_record_kind) {
    testing::TempDir dir;
    auto all = file_sink(dir / "all.jsonl", "all");
    auto severe = file_sink(dir / "severe.cef", "severe");
    severe.format = Format::kCef;
    severe.min_severity = Severity::kError;
    severe.enforcement = false;
    auto router = start({all, severe});
    ASSERT_TRUE(router);
    for (Severity severity : kAllSeverities) {
        auto d = testing::test_detection(fmt::format("s{}", static_cast<int>(severity)));
        d.severity = severity;
        router->publish(d);
    }
    router->publish(testing::test_outcome());
    ASSERT_TRUE(router->flush(std::chrono::seconds(5)));
    const auto all_lines = read_lines(dir / "all.jsonl");
    ASSERT_EQ(all_lines.size(), 9u);
    EXPECT_EQ(nlohmann::json::parse(all_lines.back())["event"]["id"], "e-0001");
    const auto severe_lines = read_lines(dir / "severe.cef");
    ASSERT_EQ(severe_lines.size(), 4u);  // emergency, alert, critical, error
    EXPECT_EQ(severe_lines[0].rfind("CEF:0|", 0), 0u);
    const auto counters = router->counters();
    EXPECT_EQ(counters[0].sent, 9u);
    EXPECT_EQ(counters[1].sent, 4u);
    EXPECT_EQ(counters[1].filtered, 5u);
    EXPECT_GT(counters[1].bytes, 0u);
}

TEST(AlertRouter, file_sink_rotates_by_size) {
    testing::TempDir dir;
    auto sink = file_sink(dir / "alerts.log");
    sink.file_max_bytes = 8 * 1024;
    sink.file_max_files = 2;
    sink.batch_max_records = 1;
    auto router = start({sink});
    ASSERT_TRUE(router);
    for (int n = 0; n < 60; ++n) router->publish(testing::test_detection(fmt::format("r{}", n)));
    ASSERT_TRUE(router->flush(std::chrono::seconds(5)));
    EXPECT_TRUE(std::filesystem::exists(dir / "alerts.log.1"));
    EXPECT_TRUE(std::filesystem::exists(dir / "alerts.log.2"));
    EXPECT_FALSE(std::filesystem::exists(dir / "alerts.log.3"));
    EXPECT_LE(std::filesystem::file_size(dir / "alerts.log.1"), 8u * 1024 + 4096);
}

TEST(AlertRouter, drop_oldest_counts_every_dropped_record) {
    auto sink = dead_tcp_sink();
    sink.queue_max_bytes = 64 * 1024;
    auto router = start({sink});
    ASSERT_TRUE(router);
    for (int n = 0; n < 500; ++n) router->publish(testing::test_detection(fmt::format("o{}", n)));
    // Every record queued, and the sink's first connect refused (its thread
    // may not have tried yet when the last record is queued).
    const auto settled = [&] {
        const auto now = router->counters()[0];
        return now.queued == 500 && !now.healthy;
    };
    for (int i = 0; i < 200 && !settled(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const auto c = router->counters()[0];
    EXPECT_EQ(c.queued, 500u);
    EXPECT_GT(c.dropped, 0u);
    EXPECT_EQ(c.sent, 0u);
    EXPECT_EQ(c.queue_records + c.dropped, 500u);  // nothing unaccounted for
    EXPECT_LE(c.queue_bytes, 64u * 1024);
    EXPECT_FALSE(c.healthy);
    router->stop(std::chrono::milliseconds(0));
}

TEST(AlertRouter, block_policy_drops_new_records_after_the_timeout) {
    auto sink = dead_tcp_sink();
    sink.queue_max_bytes = 64 * 1024;
    sink.overflow = OverflowPolicy::kBlock;
    sink.block_timeout = std::chrono::milliseconds(5);
    auto router = start({sink});
    ASSERT_TRUE(router);
    for (int n = 0; n < 100; ++n) router->publish(testing::test_detection(fmt::format("b{}", n)));
    for (int i = 0; i < 300; ++i) {
        const auto c = router->counters()[0];
        if (c.queued + c.dropped >= 100) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const auto c = router->counters()[0];
    EXPECT_EQ(c.queued + c.dropped, 100u);
    EXPECT_GT(c.dropped, 0u);
    EXPECT_EQ(c.queue_records, c.queued);  // the oldest were kept
    router->stop(std::chrono::milliseconds(0));
}

TEST(AlertRouter, disk_queue_is_delivered_after_a_restart) {
    testing::TempDir dir;
    auto sink = dead_tcp_sink();
    sink.name = "soc";
    sink.queue_dir = dir / "queue";
    {
        auto router = start({sink});
        ASSERT_TRUE(router);
        for (int n = 0; n < 100; ++n) {
            router->publish(testing::test_detection(fmt::format("q{:03}", n)));
        }
        for (int i = 0; i < 200 && router->counters()[0].queued < 100; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        router->stop(std::chrono::milliseconds(0));
    }
    // Same sink name, now reachable (a file): the queued records go out first.
    auto file = file_sink(dir / "out.log", "soc");
    file.queue_dir = dir / "queue";
    auto router = start({file});
    ASSERT_TRUE(router);
    router->publish(testing::test_detection("q100"));
    ASSERT_TRUE(router->flush(std::chrono::seconds(5)));
    const auto lines = read_lines(dir / "out.log");
    ASSERT_EQ(lines.size(), 101u);
    EXPECT_NE(lines[0].find("id=\"q000.0\""), std::string::npos) << lines[0].substr(0, 200);
    EXPECT_NE(lines[99].find("id=\"q099.0\""), std::string::npos);
    EXPECT_EQ(nlohmann::json::parse(lines[100])["event"]["id"], "q100.0");
}

TEST(AlertRouter, rejects_duplicate_sink_names_and_bad_config) {
    testing::TempDir dir;
    RouterOptions options;
    options.sinks = {file_sink(dir / "a"), file_sink(dir / "b")};
    auto router = AlertRouter::start(options);
    ASSERT_FALSE(router);
    EXPECT_NE(router.error().message.find("twice"), std::string::npos);
    options.sinks = {file_sink(dir / "a")};
    options.sinks[0].type = SinkType::kTls;
    EXPECT_FALSE(AlertRouter::start(options));
}

// Accepts every connection on a loopback port and closes it at once, noting
// when each attempt came: a collector that is up but refuses every session.
class RefusingListener {
  public:
    RefusingListener() {
        fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(addr);
        if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd_, 16) != 0 ||
            getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            ADD_FAILURE() << "loopback listener: " << strerror(errno);
            return;
        }
        port_ = ntohs(addr.sin_port);
        thread_ = std::thread([this] { run(); });
    }
    ~RefusingListener() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
        close(fd_);
    }

    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

    // Waits (bounded) for `count` attempts; returns the times seen so far.
    std::vector<std::chrono::steady_clock::time_point> wait_for(size_t count,
                                                                std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            {
                std::lock_guard lock(mutex_);
                if (attempts_.size() >= count || std::chrono::steady_clock::now() >= deadline) {
                    return attempts_;
                }
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    }

  private:
    void run() {
        while (!stop_) {
            pollfd p{fd_, POLLIN, 0};
            if (poll(&p, 1, 20) != 1) continue;
            const int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) continue;
            {
                std::lock_guard lock(mutex_);
                attempts_.push_back(std::chrono::steady_clock::now());
            }
            close(client);
        }
    }

    int fd_ = -1;
    uint16_t port_ = 0;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::mutex mutex_;
    std::vector<std::chrono::steady_clock::time_point> attempts_;
};

// Each failed attempt doubles the wait (retry_initial 40 ms: 40, 80, 160,
// then retry_max 320 ms for good), with +-20 % jitter. The lower bounds are
// exact (the sender sleeps at least that long) and rule out a constant
// delay; the upper bounds allow 120 ms for a busy machine and stay below
// 0.8 * 640 ms, so a delay that kept doubling past retry_max fails.
TEST(AlertRouter, retry_delays_double_and_are_capped_at_retry_max) {
    RefusingListener collector;
    SinkConfig sink;
    sink.name = "refused";
    sink.type = SinkType::kTls;  // every handshake fails: the peer hangs up
    sink.tls_verify = false;
    sink.address = collector.address();
    sink.retry_initial = std::chrono::milliseconds(40);
    sink.retry_max = std::chrono::milliseconds(320);
    sink.io_timeout = std::chrono::milliseconds(1000);
    auto router = start({sink});
    ASSERT_TRUE(router);
    router->publish(testing::test_detection());
    const std::vector<double> expected_ms = {40, 80, 160, 320, 320, 320, 320};
    const auto attempts = collector.wait_for(expected_ms.size() + 1, std::chrono::seconds(10));
    router->stop(std::chrono::milliseconds(0));
    ASSERT_EQ(attempts.size(), expected_ms.size() + 1);
    for (size_t i = 0; i < expected_ms.size(); ++i) {
        const double gap =
            std::chrono::duration<double, std::milli>(attempts[i + 1] - attempts[i]).count();
        SCOPED_TRACE(fmt::format("attempt {} -> {}: {:.1f} ms", i + 1, i + 2, gap));
        EXPECT_GE(gap, 0.8 * expected_ms[i] - 1.0);
        EXPECT_LE(gap, 1.2 * expected_ms[i] + 120.0);  // capped: below 0.8 * 640 ms
    }
    const auto counters = router->counters()[0];
    EXPECT_EQ(counters.sent, 0u);
    EXPECT_EQ(counters.dropped, 0u);
    EXPECT_GE(counters.retried, expected_ms.size());
    EXPECT_FALSE(counters.healthy);
    EXPECT_EQ(counters.queue_records, 1u);
}

// A sink in a long backoff does not hold stop() beyond its drain timeout
// (the agent's shutdown must not wait for retry_max).
TEST(AlertRouter, stop_during_a_long_backoff_returns_within_the_drain_timeout) {
    auto sink = dead_tcp_sink();
    sink.retry_initial = std::chrono::milliseconds(20000);
    sink.retry_max = std::chrono::milliseconds(20000);
    auto router = start({sink});
    ASSERT_TRUE(router);
    router->publish(testing::test_detection());
    const auto failed_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (router->counters()[0].retried == 0 && std::chrono::steady_clock::now() < failed_by) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_EQ(router->counters()[0].retried, 1u) << "the first attempt failed: now backing off";
    const auto begin = std::chrono::steady_clock::now();
    router->stop(std::chrono::milliseconds(200));
    const auto took = std::chrono::steady_clock::now() - begin;
    EXPECT_LT(took, std::chrono::seconds(3)) << "stop() waited for the 20 s backoff";
    EXPECT_GE(took, std::chrono::milliseconds(150)) << "stop() did not drain at all";
}

}  // namespace
}  // namespace gpuguard::siem
