// Replay throughput: a generated stream of events (GPU miners, GPU workloads
// and the host's ordinary process churn) through decode + correlate on one
// core, from both inputs `gpuguard replay` reads:
//
//   JSON decode only          EventJsonReader::parse on every line (the baseline)
//   simdjson parse only       the library's DOM parse of every line, nothing read from
//                             it: with "correlate only", the floor of a JSON Lines
//                             replay built on simdjson on this machine
//   correlate only            Replay::feed on decoded events
//   JSON Lines replay         Replay::feed_file on a JSON Lines file: decode + correlate
//   ... + ECS output          the same, each detection formatted as the command prints it
//   journal write             JournalWriter::append of every event, then close
//   journal decode only       JournalReader over the segments
//   journal replay            Replay::feed_journal on the segments: decode + correlate
//
// Prints events/s for each stage (wall clock) and its ratio to the baseline,
// and events per CPU-second, which other work on the same cores disturbs
// less. The goals (issues 6 and 10): both replays >= 1 M events/s (wall
// clock). With --goal=N the run fails (exit 1) when either replay is slower
// than N events/s; without it the goal is 1 M events/s and only reported.
//
//   replay_bench [--events=N] [--goal=EVENTS_PER_S] [--dir=PATH] [--keep]
//                [--only=json|journal|correlate] [--rounds=N] [--without=RULE_ID,...]
//
// --without leaves those built-in correlation rules out: an older build's
// rule set judged by this build's code, so that bench/compare_builds.sh can
// tell the cost of new rules from the cost of new code.
// --keep leaves PATH/events.jsonl and PATH/journal behind, e.g. to profile
// `gpuguard replay` on them. --only runs the baseline and that one replay
// (or the correlator alone), e.g. under a profiler (its goal is the only one
// checked). --rounds runs
// every stage N times and reports its fastest round.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/detect/replay.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/siem/siem.h"

namespace {

using namespace gpuguard;
using namespace gpuguard::agent;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kRealtimeOffsetNs = 1'790'000'000'000'000'000;

// One process lifetime: exec, GPU opens and ioctls, a connect, telemetry,
// exit. Every 8th is a miner, the rest GPU jobs or plain host processes
// (a shell whose child runs `date`).
std::vector<Event> generate(size_t count) {
    std::vector<Event> events;
    events.reserve(count + 16);
    uint64_t ts = 1'000'000'000'000;
    uint32_t pid = 1000;
    auto push = [&](uint32_t id, const std::string& comm, EventData data, uint32_t ppid = 1) {
        Event event;
        event.ts_ns = ts += 50'000;
        event.task = TaskInfo{id, id, ppid, 1000, 1000, 1, comm};
        event.data = std::move(data);
        events.push_back(std::move(event));
    };
    for (size_t n = 0; events.size() < count; ++n) {
        const uint32_t id = pid++;
        if (pid > 4'000'000) pid = 1000;
        const bool miner = n % 8 == 0;
        const bool gpu = miner || n % 4 == 1;
        const std::string comm = miner ? "xmrig" : gpu ? "python3" : "sh";
        push(id, comm,
             Exec{miner ? "/opt/xmrig/xmrig"
                  : gpu ? "/usr/bin/python3"
                        : "/bin/sh",
                  miner ? std::vector<std::string>{"xmrig", "-o",
                                                   "stratum+tcp://pool.example.org:3333", "--cuda"}
                  : gpu ? std::vector<std::string>{"python3", "train.py", "--epochs", "10"}
                        : std::vector<std::string>{"sh", "-c", "date"},
                  false, false, id});
        if (gpu) {
            push(id, comm,
                 GpuOpen{195, 255, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidiactl"});
            push(id, comm,
                 GpuOpen{195, 0, 4, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
            push(id, comm, GpuIoctl{195, 255, 3, 0xc020462a, 0});
            push(id, comm,
                 Connect{9, -115, 4, "198.51.100.1", static_cast<uint16_t>(miner ? 3333 : 443),
                         true, false, false, false, false});
            Telemetry telemetry{0,    "nvidia",    "H100",      {"195:0"},
                                97.0, 40ull << 30, 80ull << 30, {{id, 30ull << 30, 95.0}}};
            Event sample;
            sample.ts_ns = ts += 50'000;
            sample.data = std::move(telemetry);
            events.push_back(std::move(sample));
        } else {
            // The shell's child runs a command and is gone before its parent,
            // as on a host: a child left running for ever by every shell
            // would keep the process table at its bound, evicting live
            // entries (a degraded state the agent counts and reports), which
            // is not the stream this benchmark stands for.
            const uint32_t child = pid++;
            push(id, comm, Fork{child, false});
            push(child, "date", Exec{"/usr/bin/date", {"date", "+%s"}, false, false, child}, id);
            push(child, "date", Exit{0, false}, id);
        }
        push(id, comm, Exit{0, gpu});
    }
    events.resize(count);
    return events;
}

std::shared_ptr<const rules::RuleSet> builtin_rule_set() {
    auto pack = rules::compile_builtin_pack();
    if (!pack) {
        std::fprintf(stderr, "built-in pack: %s\n", pack.error().message.c_str());
        std::exit(2);
    }
    auto built = rules::RuleSet::build(*pack, {});
    if (!built) std::exit(2);
    return std::make_shared<const rules::RuleSet>(std::move(*built));
}

// Wall-clock and CPU time (all threads: the journal writer has its own) of
// one stage. CPU time shows the cost on one core when other work shares it.
struct Timer {
    Clock::time_point wall = Clock::now();
    double cpu = cpu_seconds();

    static double cpu_seconds() {
        timespec now{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
        return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
    }
};

[[noreturn]] void fail(const std::string& message) {
    std::fprintf(stderr, "replay_bench: %s\n", message.c_str());
    std::exit(2);
}

std::unique_ptr<Replay> make_replay(const std::vector<rules::CorrelationRule>& correlation,
                                    const std::shared_ptr<const rules::RuleSet>& rule_set) {
    auto replay = Replay::create(correlation, rule_set);
    if (!replay) fail(replay.error().message);
    return std::move(*replay);
}

// The events through the journal's own writer, as the agent journals them.
void write_journal(const std::vector<Event>& events, const fs::path& dir) {
    journal::JournalOptions options;
    options.dir = dir;
    options.retention_max_bytes = 0;
    options.retention_max_age_s = 0;
    options.queue_events = 1 << 20;  // measure the writer, not drops
    options.queue_max_bytes = 1ull << 30;
    auto writer = journal::JournalWriter::open(options, journal::local_identity("bench"), {}, {});
    if (!writer) fail(writer.error().message);
    for (const auto& event : events) {
        if (!(*writer)->append(event, kRealtimeOffsetNs)) fail("the journal dropped an event");
    }
    (*writer)->close();
    if ((*writer)->stats().dropped() != 0) fail("the journal dropped events");
}

struct Stage {
    const char* name;
    double seconds;
    double cpu_seconds;
};

Stage finish(const char* name, const Timer& timer) {
    return {name, std::chrono::duration<double>(Clock::now() - timer.wall).count(),
            Timer::cpu_seconds() - timer.cpu};
}

}  // namespace

int main(int argc, char** argv) {
    size_t count = 1'000'000;
    double goal = 1e6;
    bool enforce_goal = false;
    bool keep = false;
    std::string only;
    int rounds = 1;
    std::vector<std::string> without;
    fs::path dir = fs::temp_directory_path() / ("replay-bench-" + std::to_string(getpid()));
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], "--events=", 9) == 0) {
            count = std::strtoull(argv[i] + 9, nullptr, 10);
        } else if (std::strncmp(argv[i], "--goal=", 7) == 0) {
            goal = std::strtod(argv[i] + 7, nullptr);
            enforce_goal = true;
        } else if (std::strncmp(argv[i], "--dir=", 6) == 0) {
            dir = argv[i] + 6;
        } else if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
            rounds = std::max(1, std::atoi(argv[i] + 9));
        } else if (std::strncmp(argv[i], "--without=", 10) == 0) {
            // Rules to leave out, comma-separated: an older build's rule set
            // judged by this build's code (bench/compare_builds.sh --without).
            std::string_view ids = argv[i] + 10;
            while (!ids.empty()) {
                const size_t comma = std::min(ids.find(','), ids.size());
                if (comma > 0) without.emplace_back(ids.substr(0, comma));
                ids.remove_prefix(std::min(comma + 1, ids.size()));
            }
        } else if (std::strcmp(argv[i], "--keep") == 0) {
            keep = true;
        } else if (std::strcmp(argv[i], "--only=json") == 0 ||
                   std::strcmp(argv[i], "--only=journal") == 0 ||
                   std::strcmp(argv[i], "--only=correlate") == 0) {
            only = argv[i] + 7;
        } else {
            std::fprintf(stderr,
                         "usage: replay_bench [--events=N] [--goal=EVENTS_PER_S] [--dir=PATH] "
                         "[--keep] [--only=json|journal|correlate] [--rounds=N] "
                         "[--without=RULE_ID,...]\n");
            return 2;
        }
    }
    gpuguard::set_log_level("warn");
    const auto events = generate(count);
    std::vector<std::string> lines;
    lines.reserve(events.size());
    size_t bytes = 0;
    for (const auto& event : events) {
        lines.push_back(event_to_json(event, kRealtimeOffsetNs));
        bytes += lines.back().size() + 1;
    }
    fs::remove_all(dir);
    fs::create_directories(dir);
    const fs::path jsonl = dir / "events.jsonl";
    {
        std::ofstream out(jsonl, std::ios::binary);
        for (const auto& line : lines) out << line << '\n';
        if (!out) fail("cannot write " + jsonl.string());
    }
    const auto rule_set = builtin_rule_set();
    auto correlation = rules::builtin_correlation_rules();
    if (!correlation) fail(correlation.error().message);
    for (const std::string& id : without) {
        const auto rule = std::find_if(correlation->begin(), correlation->end(),
                                       [&](const auto& each) { return each.id == id; });
        if (rule == correlation->end()) fail("--without: no built-in rule " + id);
        correlation->erase(rule);
    }
    if (!without.empty()) {
        std::printf("replay_bench: %zu correlation rules (%zu left out)\n", correlation->size(),
                    without.size());
    }
    std::vector<Stage> stages;
    const bool run_json = only.empty() || only == "json";
    const bool run_journal = only.empty() || only == "journal";

    // Stages are registered first, then run in rounds: each round runs every
    // stage once, in order, and each stage keeps its fastest round. This VM
    // has slow spells of several seconds; interleaved, one spell costs each
    // stage at most one of its rounds. `setup` runs before the clock starts.
    struct Step {
        const char* name;
        std::function<void()> setup;
        std::function<void()> body;
    };
    std::vector<Step> steps;
    const auto nothing = [] {};

    // Baseline: JSON decoding alone, as replay decodes.
    size_t decoded = 0;
    EventJsonReader json_reader;
    steps.push_back({"JSON decode only (baseline)", nothing, [&] {
                         decoded = 0;
                         for (const auto& line : lines) {
                             decoded += json_reader.parse(line, "bench").ok();
                         }
                     }});

    // The floor under any decode built on simdjson's DOM: the library's parse
    // of every line, in place in one buffer as feed_file() parses them (the
    // next line's bytes are the padding simdjson reads past a line's end),
    // with no read(2) and nothing taken from the document.
    size_t parsed = 0;
    std::string file_bytes;
    simdjson::dom::parser floor_parser;
    if (run_json) {
        const auto load = [&] {  // once, before the first round
            if (!file_bytes.empty()) return;
            std::ifstream in(jsonl, std::ios::binary);
            file_bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
            file_bytes.append(simdjson::SIMDJSON_PADDING, '\0');
        };
        steps.push_back({"simdjson parse only (floor)", load, [&] {
                             parsed = 0;
                             const size_t end = file_bytes.size() - simdjson::SIMDJSON_PADDING;
                             for (size_t start = 0; start < end;) {
                                 size_t stop = file_bytes.find('\n', start);
                                 if (stop == std::string::npos || stop > end) stop = end;
                                 simdjson::dom::element root;
                                 parsed += floor_parser
                                               .parse(file_bytes.data() + start, stop - start,
                                                      /*realloc_if_needed=*/false)
                                               .get(root) == simdjson::SUCCESS;
                                 start = stop + 1;
                             }
                         }});
    }

    // Each replay stage counts its own detections: they must agree.
    std::unique_ptr<Replay> replay;
    size_t found = 0;
    const auto fresh_replay = [&] {
        replay = make_replay(*correlation, rule_set);
        found = 0;
    };
    const auto count_detection = [&](const Detection&) { ++found; };
    std::map<std::string, size_t> detections;

    // The correlator alone, on decoded events (with their wall-clock time).
    if (only.empty() || only == "correlate") {
        steps.push_back({"correlate only (decoded events)", fresh_replay, [&] {
                             for (const auto& event : events) {
                                 replay->feed(event,
                                              static_cast<int64_t>(event.ts_ns) + kRealtimeOffsetNs,
                                              count_detection);
                             }
                             detections["correlate"] = found;
                         }});
    }

    // Both, as `gpuguard replay FILE.jsonl` runs them.
    if (run_json) {
        steps.push_back({"JSON Lines: decode + correlate", fresh_replay, [&] {
                             if (auto status = replay->feed_file(jsonl, count_detection); !status) {
                                 fail(status.error().message);
                             }
                             detections["JSON Lines"] = found;
                         }});
    }

    // The same with every detection formatted as `gpuguard replay` prints
    // it (one ECS JSON line each): what the command costs beyond the goal's
    // decode + correlate, short of writing stdout. Not part of the goal.
    size_t ecs_bytes = 0;
    if (run_json) {
        steps.push_back({"JSON Lines replay + ECS output", fresh_replay, [&] {
                             HostInfo host;
                             ecs_bytes = 0;
                             const auto format = [&](const Detection& detection) {
                                 ++found;
                                 ecs_bytes += siem::format_ecs_json(detection, host).size() + 1;
                             };
                             if (auto status = replay->feed_file(jsonl, format); !status) {
                                 fail(status.error().message);
                             }
                             detections["JSON Lines + ECS"] = found;
                         }});
    }

    // The native journal: written by the real writer, then replayed as
    // `gpuguard replay JOURNAL_DIR` does.
    size_t journal_events = events.size();
    const fs::path journal_dir = dir / "journal";
    if (run_journal) {
        steps.push_back({"journal write", nothing, [&] {
                             fs::remove_all(journal_dir);
                             write_journal(events, journal_dir);
                         }});
        steps.push_back({"journal decode only", nothing, [&] {
                             journal_events = 0;
                             auto reader = journal::JournalReader::open({journal_dir});
                             if (!reader) fail(reader.error().message);
                             journal::JournalRecord record;
                             while (reader->next(record)) {
                                 journal_events += record.kind == journal::RecordKind::kEvent;
                             }
                         }});
        steps.push_back({"journal: decode + correlate", fresh_replay, [&] {
                             auto problems = replay->feed_journal(journal_dir, count_detection);
                             if (!problems) fail(problems.error().message);
                             if (!problems->empty()) fail("journal not clean: " + *problems);
                             detections["journal"] = found;
                         }});
    }

    for (int round = 0; round < rounds; ++round) {
        for (size_t i = 0; i < steps.size(); ++i) {
            steps[i].setup();
            const Timer start;
            steps[i].body();
            const Stage stage = finish(steps[i].name, start);
            if (round == 0) {
                stages.push_back(stage);
            } else if (stage.seconds < stages[i].seconds) {
                stages[i] = stage;
            }
        }
    }
    const auto seconds_of = [&](std::string_view name) {
        for (const auto& stage : stages) {
            if (name == stage.name) return stage.seconds;
        }
        return 0.0;
    };
    const double json_s = seconds_of("JSON Lines: decode + correlate");
    const double floor_parse_s = seconds_of("simdjson parse only (floor)");
    const double correlate_s = seconds_of("correlate only (decoded events)");
    const double journal_s = seconds_of("journal: decode + correlate");

    const double n = static_cast<double>(events.size());
    std::printf("replay_bench: %zu events (%.1f MB of JSON Lines), %zu detections\n", events.size(),
                bytes / 1e6, detections.begin()->second);
    if (ecs_bytes != 0) {
        std::printf("ECS output: %.1f MB for the detections\n",
                    static_cast<double>(ecs_bytes) / 1e6);
    }
    if (replay) {  // the last replay's process table: how full the stream kept it
        std::printf("process table at the end: %zu entries, %llu live ones evicted at its bound\n",
                    replay->table().size(),
                    static_cast<unsigned long long>(replay->table().evicted_live()));
    }
    std::printf("%-34s %12s %10s %16s\n", "stage", "events/s", "ratio", "events/CPU-s");
    for (const auto& stage : stages) {
        std::printf("%-34s %12.0f %10.2f %16.0f\n", stage.name, n / stage.seconds,
                    stages.front().seconds / stage.seconds, n / stage.cpu_seconds);
    }
    const bool json_met = !run_json || n / json_s >= goal;
    const bool journal_met = !run_journal || n / journal_s >= goal;
    if (run_json && run_journal) {
        std::printf("journal replay / JSON Lines replay: %.2fx\n", json_s / journal_s);
    }
    if (floor_parse_s > 0 && correlate_s > 0) {
        // Were our decode free beyond simdjson's own parse, decode + correlate
        // would take the two stages' times added: no JSON Lines replay on
        // simdjson can beat this on this machine.
        std::printf(
            "floor of a JSON Lines replay (simdjson parse + correlate): %.0f events/s; "
            "this replay reaches %.0f %% of it\n",
            n / (floor_parse_s + correlate_s), 100.0 * (floor_parse_s + correlate_s) / json_s);
    }
    if (run_json) {
        std::printf("goal: JSON Lines decode + correlate >= %.0f events/s: %s\n", goal,
                    json_met ? "met" : "NOT met");
    }
    if (run_journal) {
        std::printf("goal: journal decode + correlate >= %.0f events/s: %s\n", goal,
                    journal_met ? "met" : "NOT met");
    }

    std::error_code ec;
    if (!keep) fs::remove_all(dir, ec);
    const bool agree = std::all_of(detections.begin(), detections.end(), [&](const auto& replayed) {
        return replayed.second != 0 && replayed.second == detections.begin()->second;
    });
    if (decoded != events.size() || journal_events != events.size() || !agree ||
        (run_json && parsed != events.size())) {
        std::string counts;
        for (const auto& [name, count] : detections) {
            counts += " " + name + " " + std::to_string(count);
        }
        std::fprintf(stderr,
                     "replay_bench: inconsistent run (%zu decoded, %zu parsed by simdjson, %zu "
                     "from the journal; detections per replay:%s)\n",
                     decoded, parsed, journal_events, counts.c_str());
        return 1;
    }
    if (enforce_goal && (!json_met || !journal_met)) return 1;
    return 0;
}
