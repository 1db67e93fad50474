// quiet_io: {for, max_file_write_bytes, max_net_send_bytes,
// max_bytes_per_send, max_send_gap, max_sends, max_net_recv_bytes} — over
// `for` the process wrote (almost) nothing to files, sent small messages at
// a steady pace and received little: a miner talking to its pool and
// nothing else. Judged from process_io samples; never while they do not
// cover the whole window. Over time.
#include <algorithm>
#include <cstdio>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class QuietIo final : public Condition {
  public:
    explicit QuietIo(rules::QuietIoCondition condition) : condition_(condition) {}
    std::string_view name() const override { return "quiet_io"; }
    bool time_dependent() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const auto& io = context.evidence.io;
        const uint64_t ts_ns = context.ts_ns;
        const uint64_t duration_ns = condition_.duration.count() * 1'000'000'000ull;
        if (ts_ns < duration_ns || io.empty()) return false;
        const uint64_t since = ts_ns - duration_ns;
        // The counters at the window's start: the newest reading at or before
        // it. None means nobody watched the whole window.
        auto first =
            std::upper_bound(io.begin(), io.end(), since,
                             [](uint64_t ts, const IoSample& sample) { return ts < sample.ts_ns; });
        if (first == io.begin()) return false;
        const ProcessIo& start = std::prev(first)->counters;
        const ProcessIo& end = io.back().counters;
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
        if (file_bytes > condition_.max_file_write_bytes || sends == 0 ||
            (condition_.max_sends && sends > *condition_.max_sends) ||
            net_bytes > condition_.max_net_send_bytes ||
            net_bytes > condition_.max_bytes_per_send * sends) {
            return false;
        }
        // Periodic: the longest silence, from the window's start through every
        // reading where the send count moved to now, stays within max_send_gap.
        const uint64_t max_gap_ns = condition_.max_send_gap.count() * 1'000'000'000ull;
        uint64_t last_send_ns = since, longest_gap_ns = 0;
        uint64_t previous_sends = *start.net_sends;
        for (auto sample = first; sample != io.end(); ++sample) {
            const uint64_t count = sample->counters.net_sends.value_or(previous_sends);
            if (count == previous_sends) continue;
            longest_gap_ns = std::max(longest_gap_ns, sample->ts_ns - last_send_ns);
            last_send_ns = sample->ts_ns;
            previous_sends = count;
        }
        longest_gap_ns = std::max(longest_gap_ns, ts_ns - last_send_ns);
        if (longest_gap_ns > max_gap_ns) return false;
        // What it received, where the readings count it (older records do not).
        std::optional<uint64_t> received;
        if (start.net_recv_bytes && end.net_recv_bytes &&
            *end.net_recv_bytes >= *start.net_recv_bytes) {
            received = *end.net_recv_bytes - *start.net_recv_bytes;
        }
        if (condition_.max_net_recv_bytes && received &&
            *received > *condition_.max_net_recv_bytes) {
            return false;
        }
        char text[240];
        int length = snprintf(
            text, sizeof(text),
            "in %llds: %llu bytes written to files, %llu network sends of %llu bytes "
            "(longest pause %llds)",
            static_cast<long long>(condition_.duration.count()),
            static_cast<unsigned long long>(file_bytes), static_cast<unsigned long long>(sends),
            static_cast<unsigned long long>(net_bytes),
            static_cast<long long>(longest_gap_ns / 1'000'000'000ull));
        if (received && length > 0 && static_cast<size_t>(length) < sizeof(text)) {
            snprintf(text + length, sizeof(text) - length, ", %llu bytes received",
                     static_cast<unsigned long long>(*received));
        }
        in.extra.push_back(Evidence{ts_ns, "telemetry", "process_io", "", "io", text});
        return true;
    }

  private:
    rules::QuietIoCondition condition_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::quiet_io(const rules::CorrelationRule& rule) {
    if (!rule.quiet_io) return nullptr;
    return std::make_unique<QuietIo>(*rule.quiet_io);
}

}  // namespace gpuguard::agent
