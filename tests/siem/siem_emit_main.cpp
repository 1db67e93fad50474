// siem_emit: a stand-in agent for the multi-process tests. Publishes
// `--count` detections (ids "<host>-<n>", n from --first) through an
// AlertRouter with one sink, then either waits for delivery (--flush-ms) or,
// with --hold, reports "queued" once every record is in the queue and waits
// to be killed (a crash, not a clean stop).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "gpuguard/siem/siem.h"
#include "tests/siem/siem_fixtures.h"

namespace siem = gpuguard::siem;
namespace gg_testing = gpuguard::testing;

int main(int argc, char** argv) {
    std::map<std::string, std::string> args;
    for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
    const auto arg = [&](const std::string& key, const std::string& fallback) {
        const auto it = args.find(key);
        return it == args.end() ? fallback : it->second;
    };
    siem::SinkConfig sink;
    sink.name = arg("--name", "collector");
    sink.type = *siem::parse_sink_type(arg("--type", "tcp"));
    sink.address = arg("--address", "");
    sink.queue_dir = arg("--queue", "");
    sink.tls_ca_file = arg("--ca", "");
    sink.retry_initial = std::chrono::milliseconds(20);
    sink.retry_max = std::chrono::milliseconds(200);
    sink.io_timeout = std::chrono::milliseconds(2000);
    siem::RouterOptions options;
    options.host = gg_testing::test_host(arg("--host", "host-a"));
    options.sinks.push_back(sink);
    auto router = siem::AlertRouter::start(options);
    if (!router) {
        std::fprintf(stderr, "siem_emit: %s\n", router.error().message.c_str());
        return 2;
    }
    const int first = std::atoi(arg("--first", "0").c_str());
    const int count = std::atoi(arg("--count", "10").c_str());
    for (int n = first; n < first + count; ++n) {
        auto d = gg_testing::test_detection(fmt::format("{}-{:06}", options.host.hostname, n));
        d.time_unix_ns = gg_testing::kTestTimeNs + n;
        (*router)->publish(d);
    }
    if (args.count("--hold")) {
        // Report once every record is on disk in the queue, then wait to be killed.
        for (;;) {
            const auto counters = (*router)->counters().at(0);
            if (counters.persisted + counters.dropped >= static_cast<uint64_t>(count)) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        std::printf("queued\n");
        std::fflush(stdout);
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    const bool flushed =
        (*router)->flush(std::chrono::milliseconds(std::atoi(arg("--flush-ms", "10000").c_str())));
    const auto c = (*router)->counters().at(0);
    std::printf("flushed=%d queued=%llu sent=%llu retried=%llu dropped=%llu\n", flushed ? 1 : 0,
                static_cast<unsigned long long>(c.queued), static_cast<unsigned long long>(c.sent),
                static_cast<unsigned long long>(c.retried),
                static_cast<unsigned long long>(c.dropped));
    std::fflush(stdout);
    return flushed ? 0 : 1;
}
