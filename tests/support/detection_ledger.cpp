#include "tests/support/detection_ledger.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace gpuguard::testing {

namespace {

bool at_warning_or_above(const std::string& level) {
    return level == "warning" || level == "error" || level == "critical";
}

ExpectedDetection key_of(const nlohmann::json& record) {
    return {record["rule"]["id"].get<std::string>(), record_pid(record),
            record["log"]["level"].get<std::string>()};
}

ExpectedDetection required(ExpectedDetection detection) {
    detection.optional = false;
    return detection;
}

std::string named(const ExpectedDetection& detection) {
    return detection.rule + " pid " + std::to_string(detection.pid) + " at " + detection.severity;
}

}  // namespace

pid_t record_pid(const nlohmann::json& record) {
    const auto process = record.find("process");
    if (process == record.end() || !process->is_object()) return 0;
    return process->value("pid", 0);
}

void DetectionLedger::add(const std::string& line) {
    auto record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_object()) return;
    const auto rule = record.find("rule");
    const auto log = record.find("log");
    if (rule == record.end() || !rule->is_object() || !rule->contains("id")) return;
    if (log == record.end() || !log->is_object() || !log->contains("level")) return;
    records_.push_back(std::move(record));
}

std::vector<nlohmann::json> DetectionLedger::of(pid_t pid) const {
    std::vector<nlohmann::json> out;
    for (const auto& record : records_) {
        if (record_pid(record) == pid) out.push_back(record);
    }
    return out;
}

::testing::AssertionResult DetectionLedger::expect_exactly(
    const std::vector<ExpectedDetection>& expected, const std::vector<pid_t>& started) const {
    std::set<pid_t> pids(started.begin(), started.end());
    std::set<std::string> expected_rules;  // a rule named fires for the pids named only
    for (const auto& detection : expected) {
        pids.insert(detection.pid);
        expected_rules.insert(detection.rule);
    }
    std::set<ExpectedDetection> wanted, allowed, found;
    for (const auto& detection : expected) {
        (detection.optional ? allowed : wanted).insert(required(detection));
    }
    std::ostringstream problems;
    for (const auto& record : records_) {
        const ExpectedDetection key = key_of(record);
        if (!pids.contains(key.pid)) continue;
        if (wanted.contains(key)) {
            found.insert(key);
        } else if (allowed.contains(key)) {
            continue;
        } else if (at_warning_or_above(key.severity) || expected_rules.contains(key.rule)) {
            problems << "\n  extra: " << named(key) << ": " << record.dump();
        }
    }
    for (const auto& detection : wanted) {
        if (!found.contains(detection)) problems << "\n  missing: " << named(detection);
    }
    if (problems.str().empty()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the agent's detections are not the expected set ("
                                         << records_.size() << " read):" << problems.str();
}

}  // namespace gpuguard::testing
