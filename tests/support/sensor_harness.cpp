#include "tests/support/sensor_harness.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace gpuguard::testing {

agent::SensorOptions test_sensor_options(bool payload_capture) {
    agent::SensorOptions options;
    options.config.payload_capture = payload_capture;
    const char* wanted = std::getenv("GPUGUARD_TEST_ATTACH");
    if (!wanted || !*wanted) return options;
    if (std::string_view(wanted) == "raw_tracepoints") {  // raw_syscalls, untyped
        options.config.attach = agent::AttachMode::kRawSyscalls;
        options.raw_syscalls_untyped = true;
        return options;
    }
    const auto mode = agent::parse_attach_mode(wanted);
    if (!mode) {
        std::fprintf(stderr, "GPUGUARD_TEST_ATTACH=%s is not an attachment mode\n", wanted);
        std::abort();
    }
    options.config.attach = *mode;
    return options;
}

std::optional<std::string> SensorHarness::open(const agent::SensorOptions& options) {
    auto opened = agent::Sensor::open(
        options, [this](const agent::Event& event) { events_.push_back(event); });
    if (!opened) return opened.error().message;
    sensor_.emplace(std::move(opened).value());
    return std::nullopt;
}

void SensorHarness::drain(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    do {
        (void)sensor_->poll(std::chrono::milliseconds(20));
    } while (std::chrono::steady_clock::now() < deadline);
}

std::pair<uint64_t, uint64_t> SensorHarness::kernel_counts(const std::string& type) const {
    for (const auto& counts : sensor_->stats().kernel) {
        if (counts.type == type) return {counts.emitted, counts.dropped};
    }
    return {~0ull, ~0ull};
}

}  // namespace gpuguard::testing
