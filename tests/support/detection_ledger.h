// Every detection line a live test read from the agent, and the check a live
// test ends on: the (rule, pid, severity) set for the pids the test started
// is exactly the one it expected, and no other detection of those pids
// reaches warning. A negative read this way cannot pass because a wait
// swallowed the line that would have failed it.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/types.h>

namespace gpuguard::testing {

// One detection: its rule id, the pid it names (0: the GPU's own, no
// process), its log level ("notice", "warning", "error", "critical").
struct ExpectedDetection {
    std::string rule;
    pid_t pid = 0;
    std::string severity;
    // Allowed, not required: a detection that races another the test
    // cannot order (a notice the same rule raises to error once a scan ends).
    bool optional = false;
    auto operator<=>(const ExpectedDetection&) const = default;
};

class DetectionLedger {
  public:
    DetectionLedger() = default;
    // Every detection among an agent's output `lines`.
    explicit DetectionLedger(const std::vector<std::string>& lines) {
        for (const auto& line : lines) add(line);
    }

    // Keeps `line` when it is a detection (a JSON record with rule and log
    // level); other output lines (enforcement outcomes, status) are ignored.
    void add(const std::string& line);

    // The detections kept so far of `pid` (0: those naming no process).
    std::vector<nlohmann::json> of(pid_t pid) const;

    // Success when, over the pids in `started` and in `expected`, the
    // detections kept are `expected` exactly (each at least once; a rule
    // `expected` names at no other pid or severity) and nothing else at
    // warning or above; otherwise a failure naming each missing and each
    // extra detection with its line. Below warning, rules `expected` does
    // not name are allowed (a notice is context, not an alarm).
    ::testing::AssertionResult expect_exactly(const std::vector<ExpectedDetection>& expected,
                                              const std::vector<pid_t>& started) const;

  private:
    std::vector<nlohmann::json> records_;
};

// The pid an output record names; 0 for a record with none (a GPU's own).
pid_t record_pid(const nlohmann::json& record);

}  // namespace gpuguard::testing
