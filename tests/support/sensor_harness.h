// A Sensor opened in-process for the privileged tests, with every decoded
// event kept and helpers to wait for the events of one pid.
#pragma once

#include <chrono>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "gpuguard/sensor/sensor.h"

namespace gpuguard::testing {

// SensorOptions for the kernel suites: sensor.attach from the environment's
// GPUGUARD_TEST_ATTACH (auto when unset; "raw_tracepoints": raw_syscalls
// through plain raw tracepoints). CTest runs those suites once per
// attachment mode the kernel allows (tests/bpf/CMakeLists.txt, vmtests/).
// Payload sampling only where a suite asks for it: it adds six programs to
// kernel_functions on kernels before 6.3, each slow to load under emulation.
agent::SensorOptions test_sensor_options(bool payload_capture = false);

class SensorHarness {
  public:
    // Opens the sensor; the error message is returned for ASSERT reporting.
    std::optional<std::string> open(const agent::SensorOptions& options);
    void close() { sensor_.reset(); }

    agent::Sensor& sensor() { return *sensor_; }
    std::vector<agent::Event>& events() { return events_; }

    // Polls for `timeout`, keeping everything that arrives.
    void drain(std::chrono::milliseconds timeout);

    // Events of type T from process `pid`, waiting up to 5 s until `count`
    // are there, then a little longer so an unexpected extra one shows up.
    template <typename T>
    std::vector<std::pair<agent::Event, T>> of(uint32_t pid, size_t count) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (matching<T>(pid).size() < count && std::chrono::steady_clock::now() < deadline) {
            drain(std::chrono::milliseconds(50));
        }
        drain(std::chrono::milliseconds(100));
        return matching<T>(pid);
    }

    template <typename T>
    std::vector<std::pair<agent::Event, T>> matching(uint32_t pid) const {
        std::vector<std::pair<agent::Event, T>> found;
        for (const auto& event : events_) {
            if (event.task.pid != pid) continue;
            if (const T* data = std::get_if<T>(&event.data)) found.emplace_back(event, *data);
        }
        return found;
    }

    // Kernel (emitted, dropped) counters of one record type ("gpu_open", ...).
    std::pair<uint64_t, uint64_t> kernel_counts(const std::string& type) const;

  private:
    std::optional<agent::Sensor> sensor_;
    std::vector<agent::Event> events_;
};

}  // namespace gpuguard::testing
