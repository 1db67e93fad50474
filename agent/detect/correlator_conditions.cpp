// Conditions that depend on time and the other processes: memory growth,
// sustained utilization, quiet I/O, a user's GPU process limit.
#include "correlator_support.h"

namespace gpuguard::agent {

bool Correlator::over_process_limit(uint32_t pid, const ProcessInfo& info, uint32_t limit,
                                    std::string& detail) const {
    // The user's live GPU processes in order of first GPU use (pid breaks
    // ties): the first `limit` are within it.
    std::vector<std::pair<uint64_t, uint32_t>> holders;
    for (const auto& [other_pid, other] : states_) {
        if (!other.held_gpu) continue;
        const ProcessInfo* other_info = table_.find(other_pid);
        if (!other_info || other_info->exited || other_info->uid != info.uid) continue;
        holders.emplace_back(other.first_gpu_ns, other_pid);
    }
    if (holders.size() <= limit) return false;
    std::sort(holders.begin(), holders.end());
    const auto rank = std::find_if(holders.begin(), holders.end(),
                                   [&](const auto& holder) { return holder.second == pid; });
    if (rank == holders.end() || rank - holders.begin() < static_cast<std::ptrdiff_t>(limit)) {
        return false;
    }
    detail = "user " + (info.user.empty() ? std::to_string(info.uid) : info.user) + " runs " +
             std::to_string(holders.size()) + " GPU processes, limit " + std::to_string(limit);
    return true;
}

bool Correlator::memory_growth(const rules::MemoryGrowthCondition& condition,
                               const ProcessState& state, uint64_t ts_ns,
                               std::string& detail) const {
    if (state.usage.empty() || !state.usage.back().memory_bytes) return false;
    const auto& latest = state.usage.back();
    const uint64_t since = ts_ns > static_cast<uint64_t>(condition.within.count()) * 1'000'000'000
                               ? ts_ns - condition.within.count() * 1'000'000'000ull
                               : 0;
    std::optional<uint64_t> lowest;
    double busiest = 0;
    for (const auto& sample : state.usage) {
        if (sample.ts_ns < since) continue;
        if (sample.memory_bytes && (!lowest || *sample.memory_bytes < *lowest)) {
            lowest = sample.memory_bytes;
        }
        if (sample.compute_percent) busiest = std::max(busiest, *sample.compute_percent);
    }
    if (!lowest || *latest.memory_bytes < *lowest ||
        *latest.memory_bytes - *lowest <= condition.bytes) {
        return false;
    }
    if (busiest > condition.max_utilization_percent) return false;
    char text[160];
    snprintf(text, sizeof(text),
             "GPU memory grew from %s to %s within %llds, compute at most %.0f%%",
             gib(*lowest).c_str(), gib(*latest.memory_bytes).c_str(),
             static_cast<long long>(condition.within.count()), busiest);
    detail = text;
    return true;
}

bool Correlator::sustained(const rules::SustainedUtilizationCondition& condition,
                           const ProcessState& state, uint64_t ts_ns, std::string& detail) const {
    const uint64_t duration_ns = condition.duration.count() * 1'000'000'000ull;
    if (ts_ns < duration_ns || state.usage.empty()) return false;
    const uint64_t since = ts_ns - duration_ns;
    // Every reading of the window must be above the threshold, and the
    // samples must cover the whole window. A sample may lack the process's
    // reading: NVML leaves a busy process out of an interval now and then
    // (on an H200 shared by two CUDA processes, one 500 ms interval in five).
    // Such samples are passed over, but at least half must carry a reading.
    if (state.usage.front().ts_ns > since) return false;
    double lowest = 100;
    size_t samples = 0, readings = 0;
    for (auto sample = state.usage.rbegin(); sample != state.usage.rend(); ++sample) {
        ++samples;
        if (sample->compute_percent) {
            if (*sample->compute_percent <= condition.above_percent) return false;
            lowest = std::min(lowest, *sample->compute_percent);
            ++readings;
        }
        if (sample->ts_ns <= since) break;
    }
    if (readings * 2 < samples) return false;
    const auto connects = std::count_if(state.connect_ts.begin(), state.connect_ts.end(),
                                        [&](uint64_t ts) { return ts >= since; });
    if (connects > static_cast<long>(condition.max_connects) ||
        state.connect_ts.size() < condition.min_connects) {
        return false;
    }
    char text[200];
    int length =
        snprintf(text, sizeof(text),
                 "compute above %.0f%% (lowest %.0f%%) for %llds with %ld new connections",
                 condition.above_percent, lowest,
                 static_cast<long long>(condition.duration.count()), static_cast<long>(connects));
    if (readings < samples && length > 0 && static_cast<size_t>(length) < sizeof(text)) {
        snprintf(text + length, sizeof(text) - length, "; %zu of %zu samples without a reading",
                 samples - readings, samples);
    }
    detail = text;
    return true;
}

bool Correlator::quiet_io(const rules::QuietIoCondition& condition, const ProcessState& state,
                          uint64_t ts_ns, std::string& detail) {
    const uint64_t duration_ns = condition.duration.count() * 1'000'000'000ull;
    if (ts_ns < duration_ns || state.io.empty()) return false;
    const uint64_t since = ts_ns - duration_ns;
    // The counters at the window's start: the newest reading at or before
    // it. None means nobody watched the whole window.
    auto first =
        std::upper_bound(state.io.begin(), state.io.end(), since,
                         [](uint64_t ts, const IoSample& sample) { return ts < sample.ts_ns; });
    if (first == state.io.begin()) return false;
    const ProcessIo& start = std::prev(first)->counters;
    const ProcessIo& end = state.io.back().counters;
    if (!start.file_write_bytes || !end.file_write_bytes || !start.net_send_bytes ||
        !end.net_send_bytes || !start.net_sends || !end.net_sends) {
        return false;  // a counter is missing: cannot say the process is quiet
    }
    // A counter that went back belongs to another process (a reused pid).
    if (*end.file_write_bytes < *start.file_write_bytes ||
        *end.net_send_bytes < *start.net_send_bytes || *end.net_sends < *start.net_sends) {
        return false;
    }
    const uint64_t file_bytes = *end.file_write_bytes - *start.file_write_bytes;
    const uint64_t net_bytes = *end.net_send_bytes - *start.net_send_bytes;
    const uint64_t sends = *end.net_sends - *start.net_sends;
    if (file_bytes > condition.max_file_write_bytes || sends == 0 ||
        net_bytes > condition.max_net_send_bytes ||
        net_bytes > condition.max_bytes_per_send * sends) {
        return false;
    }
    // Periodic: the longest silence, from the window's start through every
    // reading where the send count moved to now, stays within max_send_gap.
    const uint64_t max_gap_ns = condition.max_send_gap.count() * 1'000'000'000ull;
    uint64_t last_send_ns = since, longest_gap_ns = 0;
    uint64_t previous_sends = *start.net_sends;
    for (auto sample = first; sample != state.io.end(); ++sample) {
        const uint64_t count = sample->counters.net_sends.value_or(previous_sends);
        if (count == previous_sends) continue;
        longest_gap_ns = std::max(longest_gap_ns, sample->ts_ns - last_send_ns);
        last_send_ns = sample->ts_ns;
        previous_sends = count;
    }
    longest_gap_ns = std::max(longest_gap_ns, ts_ns - last_send_ns);
    if (longest_gap_ns > max_gap_ns) return false;
    char text[200];
    snprintf(text, sizeof(text),
             "in %llds: %llu bytes written to files, %llu network sends of %llu bytes "
             "(longest pause %llds)",
             static_cast<long long>(condition.duration.count()),
             static_cast<unsigned long long>(file_bytes), static_cast<unsigned long long>(sends),
             static_cast<unsigned long long>(net_bytes),
             static_cast<long long>(longest_gap_ns / 1'000'000'000ull));
    detail = text;
    return true;
}

void Correlator::observe_hidden(ProcessState& state, uint64_t ts_ns, const HiddenProcess& hidden) {
    std::string detail = "not listed by libc's readdir of /proc, listed by " + hidden.seen_by;
    if (hidden.mechanisms.empty()) {
        detail += "; hiding mechanism not found";
    } else {
        detail += "; " + join(hidden.mechanisms, "; ");
    }
    if (detail != state.hidden) state.dirty = true;
    state.hidden = std::move(detail);
    state.hidden_ns = ts_ns;
}

bool Correlator::opaque_peer(const ProcessState& state, std::string& detail) {
    for (const Peer& peer : state.peers) {
        // What it said must be seen to be opaque, unless the port is a miner's.
        const bool opaque = peer.protocol == "tls" || peer.protocol == "opaque";
        if (!(opaque && !peer.named) && !(peer.pool_port && (opaque || peer.protocol.empty()))) {
            continue;
        }
        const bool v6 = peer.address.find(':') != std::string::npos;
        detail = (v6 ? "[" + peer.address + "]" : peer.address) + ":" + std::to_string(peer.port);
        detail += peer.named       ? " (a miner's port)"
                  : peer.pool_port ? " (no DNS answer named it; a miner's port)"
                                   : " (no DNS answer named it)";
        detail += peer.protocol.empty()    ? ", nothing sent captured"
                  : peer.protocol == "tls" ? ", TLS from the first byte"
                                           : ", a protocol gpuguard does not recognise";
        return true;
    }
    return false;
}

}  // namespace gpuguard::agent
