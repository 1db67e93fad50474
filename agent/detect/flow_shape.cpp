#include "flow_shape.h"

#include <fmt/format.h>

#include "gpuguard/common/ip_address.h"

namespace gpuguard::agent {
namespace {

constexpr double kNsPerMinute = 60e9;
constexpr uint32_t kSpacedFromS = 4;  // a gap of 4 s or more is a pause, not a stream

uint64_t gap_count(const std::vector<FlowGap>& gaps, uint32_t from_s = 0) {
    uint64_t n = 0;
    for (const FlowGap& gap : gaps) {
        if (gap.from_s >= from_s) n += gap.count;
    }
    return n;
}

std::string bytes_text(uint64_t bytes) {
    if (bytes < 1024) return fmt::format("{} B", bytes);
    if (bytes < 1024 * 1024) return fmt::format("{:.1f} KB", static_cast<double>(bytes) / 1024);
    return fmt::format("{:.1f} MB", static_cast<double>(bytes) / (1024 * 1024));
}

std::string age_text(uint64_t ns) {
    const uint64_t seconds = ns / 1'000'000'000;
    if (seconds < 120) return fmt::format("{} s", seconds);
    if (seconds < 7200) return fmt::format("{} min", seconds / 60);
    return fmt::format("{:.1f} h", static_cast<double>(seconds) / 3600);
}

// "mostly 16-32 s": the bucket holding the most gaps.
std::string usual_gap(const std::vector<FlowGap>& gaps) {
    const FlowGap* most = nullptr;
    for (const FlowGap& gap : gaps) {
        if (!most || gap.count > most->count) most = &gap;
    }
    if (!most) return "none";
    if (most->from_s >= 128) return "mostly 128 s or more";
    return fmt::format("mostly {}-{} s", most->from_s, most->from_s * 2);
}

}  // namespace

std::optional<std::string> mining_shape(const Flow& flow, const FlowShapeLimits& limits) {
    if (flow.age_ns < limits.min_age_ns) return std::nullopt;
    if (flow.pushes < limits.min_pushes || flow.receive_bursts == 0) return std::nullopt;
    const double push_share =
        static_cast<double>(flow.pushes) / static_cast<double>(flow.receive_bursts);
    if (push_share < limits.min_push_share) return std::nullopt;
    if (static_cast<double>(flow.replies) >
        limits.max_reply_share * static_cast<double>(flow.pushes)) {
        return std::nullopt;
    }
    const uint64_t gaps = gap_count(flow.receive_gaps);
    if (gaps == 0) return std::nullopt;
    const double spaced =
        static_cast<double>(gap_count(flow.receive_gaps, kSpacedFromS)) / static_cast<double>(gaps);
    if (spaced < limits.min_spaced_share) return std::nullopt;
    const double minutes = static_cast<double>(flow.age_ns) / kNsPerMinute;
    const double per_minute = static_cast<double>(flow.bytes_in + flow.bytes_out) / minutes;
    if (per_minute > static_cast<double>(limits.max_bytes_per_minute)) return std::nullopt;
    if (flow.bytes_in / flow.receive_bursts > limits.max_bytes_per_push) return std::nullopt;
    return fmt::format(
        "{}: the peer pushed {} of its {} messages unprompted, gaps {} ({:.0f} % of 4 s or "
        "more), {} a minute both ways",
        endpoint_text(flow.address, flow.port), flow.pushes, flow.receive_bursts,
        usual_gap(flow.receive_gaps), spaced * 100, bytes_text(static_cast<uint64_t>(per_minute)));
}

std::string describe_flow(const Flow& flow) {
    return fmt::format(
        "{} old, {} sent in {} messages, {} received in {} ({} unprompted), "
        "receive gaps {}",
        age_text(flow.age_ns), bytes_text(flow.bytes_out), flow.send_bursts,
        bytes_text(flow.bytes_in), flow.receive_bursts, flow.pushes, usual_gap(flow.receive_gaps));
}

const Flow* flow_of(const ProcessEvidence& evidence, const Peer& peer) {
    const Flow* found = nullptr;
    for (const Flow& flow : evidence.flows) {
        const bool direct = flow.address == peer.address && flow.port == peer.port;
        const bool via = peer.via_flow != 0 ? flow.flow == peer.via_flow
                                            : peer.via_port != 0 && flow.port == peer.via_port &&
                                                  loopback_ip(flow.address);
        if (direct || via) found = &flow;  // the newest
    }
    return found;
}

std::optional<Unvouched> unvouched(const ProcessEvidence& evidence, const Peer& peer) {
    const bool opaque = peer.protocol == "tls" || peer.protocol == "opaque";
    const bool unread = opaque || peer.protocol.empty();
    Unvouched why;
    why.by_address = opaque && !peer.named;
    why.by_port = peer.pool_port && unread;
    if (unread && (peer.named || !why.by_address) && !why.by_port) {
        if (const Flow* flow = flow_of(evidence, peer)) why.shape = mining_shape(*flow);
    }
    if (!why.by_address && !why.by_port && !why.shape) return std::nullopt;
    return why;
}

}  // namespace gpuguard::agent
