// Replay: events from JSON Lines files (docs/events.md) or a journal through
// the live agent's pipeline (gpuguard/detect/pipeline.h: network
// intelligence, process table, correlator), on the events' own clock, with
// enforcement off. The same code in the same order as live, so the same
// events and rules give the same detections: a stream of raw kernel events
// (payloads, DNS answers) is judged as live judged it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/detect/correlator.h"
#include "gpuguard/detect/pipeline.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/netintel/net_intel.h"
#include "gpuguard/state/process_table.h"

namespace gpuguard::agent {

struct ReplayOptions {
    // Events before this wall-clock time are not judged; they only build the
    // process table, whose live processes open the window as a snapshot.
    std::optional<int64_t> since_unix_ns;
    std::optional<int64_t> until_unix_ns;  // events from this time on are skipped
};

struct ReplayStats {
    uint64_t lines = 0;      // read, comments and blank lines included
    uint64_t events = 0;     // fed to the correlator
    uint64_t filtered = 0;   // outside --since/--until
    uint64_t derived = 0;    // stratum events derived from payload samples
    uint64_t rederived = 0;  // recorded stratum events that were derived again (not judged twice)
};

class Replay {
  public:
    using Emit = std::function<void(const Detection&)>;

    static Result<std::unique_ptr<Replay>> create(std::vector<rules::CorrelationRule> rules,
                                                  std::shared_ptr<const rules::RuleSet> rule_set,
                                                  ReplayOptions options = {});

    // One event; `time_unix_ns` is its wall-clock time when known.
    void feed(const Event& event, std::optional<int64_t> time_unix_ns, const Emit& emit);
    // One line of JSON Lines; blank lines and lines starting with '#' are
    // skipped. `name` and `number` name the line in errors ("file:12").
    // `padded`: EventJsonReader::kPadding readable bytes follow the line.
    Status feed_line(std::string_view line, std::string_view name, uint64_t number,
                     const Emit& emit, bool padded = false);
    // A whole file ("-" is stdin). Stops at the first bad line.
    Status feed_file(const std::filesystem::path& path, const Emit& emit);
    // A native journal (directory, segment file or incident bundle): its
    // events in order. Damage is skipped by the reader; the problems found
    // are returned as text, one per line ("" when clean).
    Result<std::string> feed_journal(const std::filesystem::path& path, const Emit& emit);

    ReplayStats stats() const;
    const Correlator& correlator() const { return *correlator_; }
    const ProcessTable& table() const { return *table_; }

  private:
    Replay(ReplayOptions options, std::unique_ptr<ProcessTable> table)
        : options_(options), table_(std::move(table)) {}

    template <typename AnEvent>
    void feed_event(AnEvent&& event, std::optional<int64_t> time_unix_ns, const Emit& emit);
    void evict_exited(uint64_t ts_ns);

    ReplayOptions options_;
    std::unique_ptr<ProcessTable> table_;
    std::unique_ptr<Correlator> correlator_;
    NetIntel net_intel_;
    std::unique_ptr<Pipeline> pipeline_;
    const Emit* emit_ = nullptr;  // the caller's, while it feeds
    ReplayStats stats_;
    EventJsonReader json_reader_;
    uint64_t last_evict_ns_ = 0;
    bool window_needs_snapshot_ = false;  // events before --since were seen
};

}  // namespace gpuguard::agent
