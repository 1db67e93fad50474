// What the agent recently decided, for people and dashboards: the last
// detections (with their evidence) and enforcement outcomes, the addresses
// block_ip blocked and until when, and per-rule / per-action counters for
// /metrics. Thread-safe: detections arrive on the loop thread, outcomes on
// the enforcer's, readers are the status page's HTTP threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "gpuguard/daemon/metrics_server.h"
#include "gpuguard/common/detection.h"

namespace gpuguard::agent {

class ActivityLog {
  public:
    using Clock = std::function<std::chrono::steady_clock::time_point()>;

    // Keeps the last `keep` detections and outcomes; a blocked address is
    // listed for `block_ttl` after its block (0 = until the agent stops).
    // `clock` (steady_clock::now when empty) dates records for last_hour().
    explicit ActivityLog(size_t keep = 50, std::chrono::seconds block_ttl = std::chrono::hours(1),
                         Clock clock = {});
    ActivityLog(const ActivityLog&) = delete;
    ActivityLog& operator=(const ActivityLog&) = delete;

    void record(const Detection& detection);
    void record(const EnforcementOutcome& outcome);

    // gpuguard_rule_detections_total{rule,severity} and
    // gpuguard_actions_total{rule,action,outcome}, appended to `out`.
    void append_metrics(std::vector<AgentMetric>& out) const;

    // Detections (new and updated) and enforcement outcomes recorded in the
    // last hour (to the minute), outcomes by result ("success", "failure",
    // "withheld", "dry_run").
    struct LastHour {
        uint64_t detections = 0;
        std::map<std::string, uint64_t> actions;
    };
    LastHour last_hour() const;

    // {"detections": [ECS JSON, newest first], "actions": [...],
    //  "blocked": [{"ip", "port", "rule", "since_unix_ns", "expires_unix_ns"}]}
    // with blocks expired at `now_unix_ns` left out.
    std::string to_json(int64_t now_unix_ns) const;

  private:
    struct Block {
        std::string ip;
        uint16_t port = 0;
        std::string rule;
        int64_t since_unix_ns = 0;
        int64_t expires_unix_ns = 0;  // 0 = no timeout
    };

    // Counts per minute, so a storm of detections costs no memory per record.
    struct Minute {
        int64_t minute = 0;  // steady clock minutes
        LastHour counts;
    };
    LastHour& this_minute();  // with mutex_ held; forgets minutes over an hour old

    const size_t keep_;
    const std::chrono::seconds block_ttl_;
    const Clock clock_;
    std::deque<Minute> minutes_;  // oldest first, at most 61
    mutable std::mutex mutex_;
    std::deque<std::string> detections_;  // ECS JSON, newest first
    std::deque<std::string> actions_;
    std::map<std::string, Block> blocked_;  // by address
    std::map<std::pair<std::string, std::string>, uint64_t> detections_by_rule_;
    std::map<std::tuple<std::string, std::string, std::string>, uint64_t> actions_by_rule_;
};

}  // namespace gpuguard::agent
