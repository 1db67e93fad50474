#include "gpuguard/daemon/activity_log.h"

#include <nlohmann/json.hpp>

#include "gpuguard/common/clock.h"
#include "gpuguard/siem/siem.h"

namespace gpuguard::agent {
namespace {

void push_bounded(std::deque<std::string>& list, std::string entry, size_t keep) {
    list.push_front(std::move(entry));
    while (list.size() > keep) list.pop_back();
}

}  // namespace

ActivityLog::ActivityLog(size_t keep, std::chrono::seconds block_ttl, Clock clock)
    : keep_(keep),
      block_ttl_(block_ttl),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {}

namespace {

int64_t minute_of(std::chrono::steady_clock::time_point at) {
    return std::chrono::duration_cast<std::chrono::minutes>(at.time_since_epoch()).count();
}

}  // namespace

ActivityLog::LastHour& ActivityLog::this_minute() {
    const int64_t now = minute_of(clock_());
    while (!minutes_.empty() && minutes_.front().minute <= now - 60) minutes_.pop_front();
    if (minutes_.empty() || minutes_.back().minute != now) minutes_.push_back(Minute{now, {}});
    return minutes_.back().counts;
}

ActivityLog::LastHour ActivityLog::last_hour() const {
    const int64_t now = minute_of(clock_());
    LastHour total;
    std::lock_guard lock(mutex_);
    for (const auto& [minute, counts] : minutes_) {
        if (minute <= now - 60) continue;  // the current minute and the 59 before it
        total.detections += counts.detections;
        for (const auto& [outcome, count] : counts.actions) total.actions[outcome] += count;
    }
    return total;
}

void ActivityLog::record(const Detection& detection) {
    std::string json = siem::format_ecs_json(detection, HostInfo{});
    std::lock_guard lock(mutex_);
    ++this_minute().detections;
    push_bounded(detections_, std::move(json), keep_);
    ++detections_by_rule_[{detection.rule_id, to_string(detection.severity)}];
}

void ActivityLog::record(const EnforcementOutcome& outcome) {
    std::string json = siem::format_ecs_json(outcome, HostInfo{});
    std::lock_guard lock(mutex_);
    ++this_minute().actions[outcome.outcome.empty() ? "unknown" : outcome.outcome];
    push_bounded(actions_, std::move(json), keep_);
    ++actions_by_rule_[{outcome.rule_id, outcome.action, outcome.outcome}];
    if (outcome.action == "block_ip" && outcome.outcome == "success" && outcome.peer) {
        const int64_t since = outcome.time_unix_ns ? outcome.time_unix_ns : unix_now_ns();
        const int64_t ttl_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(block_ttl_).count();
        blocked_[outcome.peer->ip] = Block{outcome.peer->ip, outcome.peer->port, outcome.rule_id,
                                           since, ttl_ns ? since + ttl_ns : 0};
    }
}

void ActivityLog::append_metrics(std::vector<AgentMetric>& out) const {
    std::lock_guard lock(mutex_);
    for (const auto& [key, count] : detections_by_rule_) {
        out.push_back(AgentMetric{"gpuguard_rule_detections_total",
                                  "Detections raised (new and updated), by rule and severity",
                                  "counter",
                                  {{"rule", key.first}, {"severity", key.second}},
                                  static_cast<double>(count)});
    }
    for (const auto& [key, count] : actions_by_rule_) {
        out.push_back(AgentMetric{
            "gpuguard_actions_total",
            "Enforcement outcomes, by rule, action and outcome (success, failure, withheld, "
            "dry_run)",
            "counter",
            {{"rule", std::get<0>(key)},
             {"action", std::get<1>(key)},
             {"outcome", std::get<2>(key)}},
            static_cast<double>(count)});
    }
}

std::string ActivityLog::to_json(int64_t now_unix_ns) const {
    using json = nlohmann::ordered_json;
    std::lock_guard lock(mutex_);
    json detections = json::array();
    for (const auto& entry : detections_) detections.push_back(json::parse(entry));
    json actions = json::array();
    for (const auto& entry : actions_) actions.push_back(json::parse(entry));
    json blocked = json::array();
    for (const auto& [ip, block] : blocked_) {
        if (block.expires_unix_ns != 0 && block.expires_unix_ns <= now_unix_ns) continue;
        blocked.push_back(json{{"ip", block.ip},
                               {"port", block.port},
                               {"rule", block.rule},
                               {"since_unix_ns", block.since_unix_ns},
                               {"expires_unix_ns", block.expires_unix_ns}});
    }
    return json{{"detections", detections}, {"actions", actions}, {"blocked", blocked}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpuguard::agent
