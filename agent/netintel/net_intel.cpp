#include "gpuguard/netintel/net_intel.h"

#include <algorithm>

#include "gpuguard/common/logging.h"

namespace gpuguard::agent {

void NetIntel::process(Event& event, std::vector<Event>& derived) {
    if (auto* connect = std::get_if<Connect>(&event.data)) {
        if (auto name = name_of(*connect, event.ts_ns)) connect->domain = std::move(*name);
        return;
    }
    observe(event, derived);
}

void NetIntel::observe(const Event& event, std::vector<Event>& derived) {
    if (const auto* payload = std::get_if<NetPayload>(&event.data)) {
        ++stats_.payloads;
        if (payload->dns) {
            on_dns(event, *payload);
        } else {
            on_payload(event, *payload, derived);
        }
    } else if (std::holds_alternative<Exit>(event.data)) {
        auto first = flows_.lower_bound({event.task.pid, 0});
        auto last = first;
        while (last != flows_.end() && last->first.first == event.task.pid) ++last;
        flows_.erase(first, last);
    }
}

std::optional<std::string> NetIntel::name_of(const Connect& connect, uint64_t ts_ns) {
    if (!connect.domain.empty()) return std::nullopt;
    auto name = dns_.lookup(connect.address, ts_ns);
    if (name) ++stats_.connects_named;
    return name;
}

void NetIntel::on_dns(const Event& event, const NetPayload& payload) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(payload.data.data());
    auto message = dns::parse_message(std::span(bytes, payload.data.size()), payload.stream);
    if (!message) {
        ++stats_.dns_errors;
        logger("agent")->debug("DNS payload of pid {} not parsed: {}", event.task.pid,
                               message.error().message);
        return;
    }
    if (!message->response) return;
    ++stats_.dns_answers;
    dns_.add(*message, event.ts_ns);
    if (options_.max_pending_resolutions == 0) return;
    for (auto& named : dns::named_addresses(*message)) resolutions_.push_back(std::move(named));
    if (resolutions_.size() > options_.max_pending_resolutions) {
        resolutions_.erase(
            resolutions_.begin(),
            resolutions_.end() - static_cast<std::ptrdiff_t>(options_.max_pending_resolutions));
    }
}

void NetIntel::on_payload(const Event& event, const NetPayload& payload,
                          std::vector<Event>& derived) {
    const auto key = std::make_pair(event.task.pid, payload.flow);
    auto found = flows_.find(key);
    if (found == flows_.end()) {
        // Follow only flows that can be a mining protocol: JSON-RPC lines, a
        // first message of Stratum v2's handshake size, or JSON-RPC over HTTP
        // and the Ergo node's mining API (solo mining against a node).
        const bool json_rpc = !payload.data.empty() && payload.data.front() == '{';
        const bool noise_sized = payload.seq == 0 && payload.length == 64;
        const bool node_rpc = payload.direction == NetPayload::Direction::kOut &&
                              stratum::may_be_node_rpc(payload.data);
        if (!payload.stream || !(json_rpc || noise_sized || node_rpc)) return;
        if (flows_.size() >= options_.max_sessions) evict();
        found = flows_.emplace(key, Flow{}).first;
        found->second.remote_address = payload.remote_address;
        found->second.remote_port = payload.remote_port;
    }
    Flow& flow = found->second;
    flow.last_seen_ns = event.ts_ns;
    ++flow.messages;
    const bool was_recognised = flow.session.recognised();
    const auto update = flow.session.feed(payload.direction, payload.data, payload.seq,
                                          payload.length, event.ts_ns);
    if (!flow.session.recognised()) {
        if (flow.messages >= options_.max_unrecognised_messages) flows_.erase(found);
        return;
    }
    if (!was_recognised) {
        ++stats_.sessions_recognised;
        if (auto name = dns_.lookup(flow.remote_address, event.ts_ns)) flow.domain = *name;
    }
    if (!update.any()) return;
    const bool new_rate = !flow.reported_rate && flow.session.hash_rate().has_value();
    const bool urgent = update.recognised || update.new_method || update.difficulty || new_rate;
    if (!urgent && event.ts_ns < flow.last_report_ns + options_.report_interval_ns) return;
    flow.last_report_ns = event.ts_ns;
    flow.reported_rate = flow.reported_rate || flow.session.hash_rate().has_value();

    Stratum stratum = flow.session.describe();
    stratum.flow = payload.flow;
    stratum.pool_address = flow.remote_address;
    stratum.pool_port = flow.remote_port;
    stratum.pool_domain = flow.domain;
    derived.push_back(Event{event.ts_ns, event.task, std::move(stratum)});
    ++stats_.stratum_events;
}

void NetIntel::evict() {
    // Unrecognised flows first, then the one idle longest.
    auto victim = std::find_if(flows_.begin(), flows_.end(), [](const auto& entry) {
        return !entry.second.session.recognised();
    });
    if (victim == flows_.end()) {
        victim = std::min_element(flows_.begin(), flows_.end(), [](const auto& a, const auto& b) {
            return a.second.last_seen_ns < b.second.last_seen_ns;
        });
    }
    if (victim != flows_.end()) flows_.erase(victim);
}

std::vector<StratumSessionView> NetIntel::sessions() const {
    std::vector<StratumSessionView> out;
    for (const auto& [key, flow] : flows_) {
        if (!flow.session.recognised()) continue;
        Stratum stratum = flow.session.describe();
        // For `gpuguard ps` and /metrics: what leaves the agent shows wallets cut.
        for (auto& message : stratum.messages) message = stratum::redact_wallets(message);
        stratum.flow = key.second;
        stratum.pool_address = flow.remote_address;
        stratum.pool_port = flow.remote_port;
        stratum.pool_domain = flow.domain;
        out.push_back(StratumSessionView{key.first, std::move(stratum)});
    }
    return out;
}

}  // namespace gpuguard::agent
