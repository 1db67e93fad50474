#include "backends/fdinfo.h"

#include <algorithm>

#include "backends/file_reader.h"

namespace gpuguard::backends::detail {
namespace {

constexpr std::string_view kMemoryStats[] = {"total-",     "shared-", "resident-",
                                             "purgeable-", "active-", "memory-"};

bool starts_with(std::string_view text, std::string_view prefix) {
    return text.substr(0, prefix.size()) == prefix;
}

// "<n>", "<n> ns", "<n> KiB", ... -> value scaled to the base unit, or nullopt.
std::optional<uint64_t> parse_with_unit(std::string_view value, bool memory) {
    value = trim(value);
    const auto space = value.find_first_of(" \t");
    const auto number = parse_u64(value.substr(0, space));
    if (!number) return std::nullopt;
    const std::string_view unit = space == std::string_view::npos ? "" : trim(value.substr(space));
    uint64_t scale = 1;
    if (memory) {
        if (unit == "KiB") {
            scale = 1ull << 10;
        } else if (unit == "MiB") {
            scale = 1ull << 20;
        } else if (unit == "GiB") {
            scale = 1ull << 30;
        } else if (!unit.empty()) {
            return std::nullopt;
        }
    } else if (!unit.empty() && unit != "ns" && unit != "Hz") {
        return std::nullopt;
    }
    if (*number > UINT64_MAX / scale) return std::nullopt;
    return *number * scale;
}

bool vram_like(std::string_view region) {
    return region == "vram" || starts_with(region, "local") || starts_with(region, "vram");
}

}  // namespace

Result<std::optional<FdinfoRecord>> parse_fdinfo(std::string_view text, const std::string& source) {
    FdinfoRecord record;
    bool is_drm = false;
    size_t line_number = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        const auto end = std::min(text.find('\n', pos), text.size());
        const std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_number;
        if (!starts_with(line, "drm-")) continue;
        const auto colon = line.find(':');
        if (colon == std::string_view::npos) {
            return fail(ErrorCode::kParse, source + ":" + std::to_string(line_number) +
                                               ": drm key without ':': " + quote_for_message(line));
        }
        const std::string_view key = line.substr(4, colon - 4);
        const std::string_view value = line.substr(colon + 1);
        auto bad = [&](const char* what) {
            return fail(ErrorCode::kParse, source + ":" + std::to_string(line_number) + ": drm-" +
                                               std::string(key) + ": " + what + ": " +
                                               quote_for_message(trim(value)));
        };
        if (key == "driver") {
            record.driver = std::string(trim(value));
            is_drm = !record.driver.empty();
            continue;
        }
        if (key == "pdev") {
            record.pdev = std::string(trim(value));
            continue;
        }
        if (key == "client-id") {
            const auto id = parse_u64(value);
            if (!id) return bad("not an unsigned integer");
            record.client_id = id;
            continue;
        }
        // Check the longer prefixes first: "engine-capacity-" before "engine-",
        // "total-cycles-" before "total-".
        struct Counter {
            std::string_view prefix;
            std::map<std::string, uint64_t>* into;
        };
        const Counter counters[] = {{"engine-capacity-", &record.engine_capacity},
                                    {"engine-", &record.engine_ns},
                                    {"total-cycles-", &record.total_cycles},
                                    {"cycles-", &record.cycles}};
        bool handled = false;
        for (const auto& counter : counters) {
            if (!starts_with(key, counter.prefix)) continue;
            const auto number = parse_with_unit(value, false);
            if (!number) return bad("not a counter");
            (*counter.into)[std::string(key.substr(counter.prefix.size()))] = *number;
            handled = true;
            break;
        }
        if (handled) continue;
        for (const auto stat : kMemoryStats) {
            if (!starts_with(key, stat)) continue;
            const auto bytes = parse_with_unit(value, true);
            if (!bytes) return bad("not a size (<n>[ KiB| MiB| GiB])");
            record.memory[std::string(key)] = *bytes;
            handled = true;
            break;
        }
        // Other drm-* keys (maxfreq, curfreq, driver-private ones) are not used.
    }
    if (!is_drm) return std::optional<FdinfoRecord>();
    return std::optional<FdinfoRecord>(std::move(record));
}

std::optional<uint64_t> device_memory_bytes(const FdinfoRecord& record) {
    // region -> best value: resident beats legacy drm-memory beats total.
    std::map<std::string, std::pair<int, uint64_t>> regions;
    for (const auto& [key, bytes] : record.memory) {
        int rank = 0;
        std::string region;
        if (starts_with(key, "resident-")) {
            rank = 3;
            region = key.substr(9);
        } else if (starts_with(key, "memory-")) {
            rank = 2;
            region = key.substr(7);
        } else if (starts_with(key, "total-")) {
            rank = 1;
            region = key.substr(6);
        } else {
            continue;
        }
        auto& best = regions[region];
        if (rank > best.first) best = {rank, bytes};
    }
    if (regions.empty()) return std::nullopt;
    const bool has_vram = std::any_of(regions.begin(), regions.end(),
                                      [](const auto& entry) { return vram_like(entry.first); });
    uint64_t sum = 0;
    for (const auto& [region, best] : regions) {
        if (!has_vram || vram_like(region)) sum += best.second;
    }
    return sum;
}

std::optional<uint64_t> engine_busy_ns(const FdinfoRecord& record) {
    if (record.engine_ns.empty()) return std::nullopt;
    uint64_t sum = 0;
    for (const auto& [engine, ns] : record.engine_ns) sum += ns;
    return sum;
}

EngineUsage ClientTracker::update(const std::string& key, const FdinfoRecord& record,
                                  std::chrono::nanoseconds now) {
    EngineUsage usage;
    auto found = clients_.find(key);
    if (found != clients_.end() && found->second.record.driver == record.driver) {
        const Previous& previous = found->second;
        const auto elapsed = (now - previous.at).count();
        auto capacity = [&](const std::string& engine) {
            const auto it = record.engine_capacity.find(engine);
            return it == record.engine_capacity.end() || it->second == 0 ? 1.0 : double(it->second);
        };
        // Nanosecond counters against wall time.
        if (elapsed > 0) {
            for (const auto& [engine, ns] : record.engine_ns) {
                const auto before = previous.record.engine_ns.find(engine);
                if (before == previous.record.engine_ns.end() || ns < before->second) continue;
                const double percent =
                    100.0 * double(ns - before->second) / (double(elapsed) * capacity(engine));
                usage.percent[engine] = std::clamp(percent, 0.0, 100.0);
            }
        }
        // Cycle counters against the GPU's own clock (xe), where no ns counter exists.
        for (const auto& [engine, busy] : record.cycles) {
            if (usage.percent.contains(engine)) continue;
            const auto total = record.total_cycles.find(engine);
            const auto busy_before = previous.record.cycles.find(engine);
            const auto total_before = previous.record.total_cycles.find(engine);
            if (total == record.total_cycles.end() || busy_before == previous.record.cycles.end() ||
                total_before == previous.record.total_cycles.end()) {
                continue;
            }
            if (busy < busy_before->second || total->second <= total_before->second) continue;
            const double percent =
                100.0 * double(busy - busy_before->second) /
                (double(total->second - total_before->second) * capacity(engine));
            usage.percent[engine] = std::clamp(percent, 0.0, 100.0);
        }
    }
    clients_[key] = Previous{record, now, true};
    return usage;
}

void ClientTracker::end_round() {
    for (auto it = clients_.begin(); it != clients_.end();) {
        if (!it->second.seen_this_round) {
            it = clients_.erase(it);
        } else {
            it->second.seen_this_round = false;
            ++it;
        }
    }
}

}  // namespace gpuguard::backends::detail
