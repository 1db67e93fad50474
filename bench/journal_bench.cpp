// The forensic journal's throughput, against its baseline in the same run:
//
//   BM_Journal_write          JournalWriter::append of every event, then close
//                             (fsync every second, as configured by default)
//   BM_Journal_write_zstd     the same with compression: zstd
//   BM_Journal_replay_native  JournalReader over the segments: every event decoded
//   BM_Journal_replay_zstd    ... over the compressed segments
//   BM_Journal_replay_jsonl   event_from_json over the same events as JSON Lines
//                             (what `gpuguard replay` reads otherwise), the baseline
//
// Prints events/s and MB/s for each, the native/JSON Lines replay ratio, and
// whether native replay reaches the goal of 1 M events/s (issue 10). Checks
// that every path yields the same events.
//
// Usage: journal_bench [--events=N] [--dir=PATH] [--seed=N] [--min-rate=EVENTS_PER_S]
//   --min-rate: exit 1 when native replay is slower (0, the default: report only)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"

namespace {

namespace fs = std::filesystem;
namespace journal = gpuguard::agent::journal;
using namespace gpuguard::agent;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// A deterministic mix in the proportions a busy GPU host journals: mostly
// ioctls, connects and process churn, a telemetry sample now and then.
std::vector<Event> make_events(size_t count, uint32_t seed) {
    std::mt19937 engine(seed);
    auto rng = [&]() -> uint32_t { return static_cast<uint32_t>(engine()); };
    std::vector<Event> events;
    events.reserve(count);
    const std::vector<std::string> comms = {"python3", "torchrun", "xmrig", "blender",
                                            "tritonserver"};
    uint64_t ts = 1'000'000'000'000;
    for (size_t i = 0; i < count; ++i) {
        Event event;
        ts += 1000 + rng() % 50'000;
        event.ts_ns = ts;
        const uint32_t pid = 1000 + rng() % 500;
        event.task = TaskInfo{pid,
                              pid + rng() % 4,
                              1,
                              1000 + rng() % 3,
                              1000,
                              4000 + rng() % 20,
                              comms[rng() % comms.size()]};
        const uint32_t kind = rng() % 100;
        if (kind < 30) {
            event.data = GpuIoctl{195, rng() % 8, static_cast<int32_t>(3 + rng() % 20),
                                  0xc0000000u | (rng() & 0xffff), rng()};
        } else if (kind < 50) {
            event.data =
                Connect{static_cast<int32_t>(rng() % 64),
                        0,
                        4,
                        "10.0." + std::to_string(rng() % 256) + "." + std::to_string(rng() % 256),
                        static_cast<uint16_t>(rng() % 2 ? 3333 : 443),
                        true,
                        false,
                        false,
                        false,
                        false};
        } else if (kind < 60) {
            event.data = GpuOpen{195,      rng() % 8,
                                 5,        -100,
                                 02000002, OpenSyscall::kOpenat,
                                 false,    "/dev/nvidia" + std::to_string(rng() % 8)};
        } else if (kind < 70) {
            event.data = Exec{"/usr/bin/python3",
                              {"python3", "/home/alice/proj/train.py", "--epochs",
                               std::to_string(rng() % 300), "--data", "/data/imagenet", "--amp"},
                              false,
                              false,
                              pid};
        } else if (kind < 80) {
            event.data = Fork{pid + 1 + rng() % 1000, rng() % 2 == 0};
        } else if (kind < 90) {
            event.data = Exit{static_cast<uint32_t>(rng() % 2 ? 0 : 9), rng() % 2 == 0};
        } else {
            Telemetry telemetry;
            telemetry.gpu_index = rng() % 8;
            telemetry.vendor = "nvidia";
            telemetry.model = "NVIDIA H100 80GB HBM3";
            telemetry.devices = {"195:" + std::to_string(telemetry.gpu_index)};
            telemetry.utilization_percent = static_cast<double>(rng() % 100);
            telemetry.memory_used_bytes = uint64_t{rng()} << 10;
            telemetry.memory_total_bytes = 80ull << 30;
            telemetry.processes = {ProcessGpuUsage{pid, uint64_t{rng()} << 8, 50.0}};
            event.task = TaskInfo{};
            event.data = std::move(telemetry);
        }
        events.push_back(std::move(event));
    }
    return events;
}

uint64_t directory_bytes(const fs::path& dir) {
    uint64_t total = 0;
    for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() == ".ggj") total += entry.file_size();
    }
    return total;
}

struct WriteResult {
    double seconds = 0;
    uint64_t bytes = 0;
    uint64_t dropped = 0;
};

WriteResult write_journal(const std::vector<Event>& events, const fs::path& dir, bool compress) {
    fs::remove_all(dir);
    journal::JournalOptions options;
    options.dir = dir;
    options.compress = compress;
    options.retention_max_bytes = 0;
    options.retention_max_age_s = 0;
    options.queue_events = 1 << 20;  // measure the writer, not drops
    options.queue_max_bytes = 1ull << 30;
    auto writer = journal::JournalWriter::open(options, journal::local_identity("bench"), {}, {});
    if (!writer) {
        std::fprintf(stderr, "journal_bench: %s\n", writer.error().message.c_str());
        std::exit(2);
    }
    const int64_t offset = monotonic_to_realtime_offset_ns();
    const auto start = Clock::now();
    for (const auto& event : events) (void)(*writer)->append(event, offset);
    (*writer)->close();
    WriteResult result;
    result.seconds = seconds_since(start);
    result.bytes = directory_bytes(dir);
    result.dropped = (*writer)->stats().dropped();
    return result;
}

struct ReplayResult {
    double seconds = 0;
    uint64_t events = 0;
    uint64_t checksum = 0;  // of ts_ns and pids: every path must agree
};

ReplayResult replay_native(const fs::path& dir) {
    ReplayResult result;
    const auto start = Clock::now();
    journal::ReaderOptions options;
    options.snapshots = journal::SnapshotMode::kNone;
    auto reader = journal::JournalReader::open({dir}, options);
    if (!reader) std::exit(2);
    journal::JournalRecord record;
    while (reader->next(record)) {
        if (record.kind != journal::RecordKind::kEvent) continue;
        ++result.events;
        result.checksum = result.checksum * 31 + record.event.ts_ns + record.event.task.pid;
    }
    result.seconds = seconds_since(start);
    if (!reader->clean()) std::fprintf(stderr, "journal_bench: journal not clean\n");
    return result;
}

ReplayResult replay_jsonl(const std::string& text) {
    ReplayResult result;
    const auto start = Clock::now();
    size_t pos = 0;
    while (pos < text.size()) {
        const size_t end = text.find('\n', pos);
        const std::string_view line(text.data() + pos, end - pos);
        pos = end + 1;
        auto parsed = event_from_json(line, "bench");
        if (!parsed) {
            std::fprintf(stderr, "journal_bench: %s\n", parsed.error().message.c_str());
            std::exit(2);
        }
        ++result.events;
        result.checksum = result.checksum * 31 + parsed->event.ts_ns + parsed->event.task.pid;
    }
    result.seconds = seconds_since(start);
    return result;
}

void print_row(const char* name, uint64_t events, double seconds, uint64_t bytes) {
    std::printf("%-26s %10.3f s %12.0f events/s %9.1f MB/s %10.1f B/event\n", name, seconds,
                static_cast<double>(events) / seconds, static_cast<double>(bytes) / seconds / 1e6,
                static_cast<double>(bytes) / static_cast<double>(events));
}

}  // namespace

int main(int argc, char** argv) {
    size_t count = 1'000'000;
    uint32_t seed = 1;
    double min_rate = 0;
    fs::path dir = fs::temp_directory_path() / ("journal-bench-" + std::to_string(getpid()));
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg.rfind("--events=", 0) == 0) {
            count = std::stoul(arg.substr(9));
        } else if (arg.rfind("--seed=", 0) == 0) {
            seed = static_cast<uint32_t>(std::stoul(arg.substr(7)));
        } else if (arg.rfind("--dir=", 0) == 0) {
            dir = arg.substr(6);
        } else if (arg.rfind("--min-rate=", 0) == 0) {
            min_rate = std::stod(arg.substr(11));
        } else {
            std::fprintf(stderr,
                         "usage: journal_bench [--events=N] [--dir=PATH] [--seed=N] "
                         "[--min-rate=EVENTS_PER_S]\n");
            return 2;
        }
    }
    gpuguard::set_log_level("warn");
    const auto events = make_events(count, seed);
    std::printf(
        "journal_bench: %zu events (ioctl 30%%, connect 20%%, open/exec/fork/exit 10%% "
        "each, telemetry 10%%)\n",
        events.size());

    const fs::path plain = dir / "plain";
    const fs::path zstd = dir / "zstd";
    const auto written = write_journal(events, plain, false);
    const auto written_zstd = write_journal(events, zstd, true);
    std::string jsonl;
    for (const auto& event : events) jsonl += event_to_json(event, 0) + "\n";

    const auto native = replay_native(plain);
    const auto native_zstd = replay_native(zstd);
    const auto json = replay_jsonl(jsonl);

    print_row("BM_Journal_write", count, written.seconds, written.bytes);
    print_row("BM_Journal_write_zstd", count, written_zstd.seconds, written_zstd.bytes);
    print_row("BM_Journal_replay_native", native.events, native.seconds, written.bytes);
    print_row("BM_Journal_replay_zstd", native_zstd.events, native_zstd.seconds,
              written_zstd.bytes);
    print_row("BM_Journal_replay_jsonl", json.events, json.seconds, jsonl.size());
    const double native_rate = static_cast<double>(native.events) / native.seconds;
    const double json_rate = static_cast<double>(json.events) / json.seconds;
    std::printf(
        "replay native / JSON Lines: %.1fx faster (zstd: %.1fx); %.1fx smaller on disk "
        "(zstd: %.1fx)\n",
        native_rate / json_rate,
        (static_cast<double>(native_zstd.events) / native_zstd.seconds) / json_rate,
        static_cast<double>(jsonl.size()) / static_cast<double>(written.bytes),
        static_cast<double>(jsonl.size()) / static_cast<double>(written_zstd.bytes));
    std::printf("goal: native replay >= 1 M events/s: %s (%.2f M events/s)\n",
                native_rate >= 1e6 ? "met" : "NOT met", native_rate / 1e6);

    int status = 0;
    if (written.dropped || written_zstd.dropped) {
        std::fprintf(stderr, "journal_bench: the writer dropped events\n");
        status = 1;
    }
    if (native.events != count || native_zstd.events != count || json.events != count ||
        native.checksum != json.checksum || native_zstd.checksum != json.checksum) {
        std::fprintf(stderr, "journal_bench: replays disagree (%lu, %lu, %lu events)\n",
                     static_cast<unsigned long>(native.events),
                     static_cast<unsigned long>(native_zstd.events),
                     static_cast<unsigned long>(json.events));
        status = 1;
    }
    if (min_rate > 0 && native_rate < min_rate) status = 1;
    std::error_code ec;
    fs::remove_all(dir, ec);
    return status;
}
