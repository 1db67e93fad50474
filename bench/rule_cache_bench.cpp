// The compiled signature pack cache (docs/signatures.md#compiled-pack-cache):
// the built-in pack compiled into Hyperscan and its YARA rules compiled by
// libyara (the baseline, what every start did before the cache) against the
// same loaded from a filled cache, in one run, rounds interleaved; prints
// both medians and the ratio of each, and checks that compiled and loaded
// give the same databases and the same YARA rules.
// With --gpuguard=PATH it also times whole commands of that binary, `scan
// FILE` (this benchmark's own executable) and, with --replay=FILE, `replay
// FILE`: each with an empty cache (cold, what a first run pays) and with
// the cache the cold run filled (warm).
//   rule_cache_bench [--rounds=N] [--gpuguard=PATH [--replay=FILE]]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

#include "gpuguard/rules/rules.h"
#include "gpuguard/signatures/signatures.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace signatures = gpuguard::signatures;

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values[values.size() / 2];
}

// Seconds to get the built-in pack's matcher through `cache` (empty: compile).
double timed(const signatures::CompileCache& cache, std::string& note, size_t& bytes) {
    const auto start = Clock::now();
    auto matcher = gpuguard::rules::compile_builtin_pack(cache);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!matcher) {
        std::fprintf(stderr, "rule_cache_bench: %s\n", matcher.error().message.c_str());
        std::exit(1);
    }
    note = (*matcher)->cache_note();
    bytes = (*matcher)->database_bytes();
    return seconds;
}

// Seconds to get the built-in pack's YARA scanner through `cache`.
double timed_yara(const signatures::Pack& pack, const signatures::CompileCache& cache,
                  std::string& note, std::vector<std::string>& rules) {
    const auto start = Clock::now();
    auto scanner = signatures::YaraScanner::compile(pack, {}, cache);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!scanner) {
        std::fprintf(stderr, "rule_cache_bench: %s\n", scanner.error().message.c_str());
        std::exit(1);
    }
    note = scanner->cache_note();
    rules = scanner->rule_names();
    return seconds;
}

// Seconds `argv` takes to run to its end with GPUGUARD_RULE_CACHE_DIR=cache,
// its output thrown away; exits when it fails.
double timed_command(const std::vector<std::string>& argv, const std::string& cache) {
    std::vector<std::string> env_text{"GPUGUARD_RULE_CACHE_DIR=" + cache};
    for (char** entry = environ; *entry; ++entry) {
        if (!std::string(*entry).starts_with("GPUGUARD_RULE_CACHE_DIR="))
            env_text.push_back(*entry);
    }
    std::vector<char*> args, env;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    for (const auto& entry : env_text) env.push_back(const_cast<char*>(entry.c_str()));
    env.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    const auto start = Clock::now();
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), env.data());
    posix_spawn_file_actions_destroy(&actions);
    int status = 0;
    if (rc != 0 || ::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) > 1) {  // scan: 1 is "matches"
        std::fprintf(stderr, "rule_cache_bench: %s %s failed\n", argv[0].c_str(), argv[1].c_str());
        std::exit(1);
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
}

// Cold (a new empty cache each round) against warm (the cache that round
// filled), medians of `rounds`.
void time_command(const std::vector<std::string>& argv, const std::filesystem::path& dir,
                  int rounds) {
    std::vector<double> cold_s, warm_s;
    for (int round = 0; round < rounds; ++round) {
        const auto cache = dir / (argv[1] + "-" + std::to_string(round));
        cold_s.push_back(timed_command(argv, cache.string()));
        warm_s.push_back(timed_command(argv, cache.string()));
    }
    const double cold = median(cold_s), warm = median(warm_s);
    std::printf("gpuguard %s, median of %d rounds: cold %.3f s, warm %.3f s (%.1fx faster)\n",
                argv[1].c_str(), rounds, cold, warm, cold / warm);
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 5;
    std::string gpuguard, replay;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg.starts_with("--rounds=")) rounds = std::max(1, std::atoi(arg.c_str() + 9));
        if (arg.starts_with("--gpuguard=")) gpuguard = arg.substr(11);
        if (arg.starts_with("--replay=")) replay = arg.substr(9);
    }
    char scratch[] = "/tmp/gg-rule-cache-bench-XXXXXX";
    if (!::mkdtemp(scratch)) {
        std::perror("rule_cache_bench: mkdtemp");
        return 1;
    }
    const std::filesystem::path dir = scratch;
    std::string note;
    size_t compiled_bytes = 0, loaded_bytes = 0;
    timed({dir}, note, compiled_bytes);  // fills the cache
    std::vector<double> compile_s, load_s;
    for (int round = 0; round < rounds; ++round) {
        compile_s.push_back(timed({}, note, compiled_bytes));
        load_s.push_back(timed({dir}, note, loaded_bytes));
        if (!note.starts_with("loaded from ")) {
            std::fprintf(stderr, "rule_cache_bench: the filled cache was not used: %s\n",
                         note.c_str());
            return 1;
        }
    }
    auto pack = signatures::load_builtin_pack();
    if (!pack) {
        std::fprintf(stderr, "rule_cache_bench: %s\n", pack.error().message.c_str());
        return 1;
    }
    std::vector<std::string> compiled_rules, loaded_rules;
    timed_yara(*pack, {dir}, note, compiled_rules);  // fills the cache
    std::vector<double> yara_compile_s, yara_load_s;
    for (int round = 0; round < rounds; ++round) {
        yara_compile_s.push_back(timed_yara(*pack, {}, note, compiled_rules));
        yara_load_s.push_back(timed_yara(*pack, {dir}, note, loaded_rules));
        if (!note.starts_with("loaded from ")) {
            std::fprintf(stderr, "rule_cache_bench: the filled YARA cache was not used: %s\n",
                         note.c_str());
            return 1;
        }
    }
    if (!gpuguard.empty()) {
        time_command({gpuguard, "scan", std::filesystem::read_symlink("/proc/self/exe")}, dir,
                     rounds);
        if (!replay.empty()) time_command({gpuguard, "replay", replay}, dir, rounds);
    }
    std::filesystem::remove_all(dir);
    if (compiled_rules != loaded_rules) {
        std::fprintf(stderr, "rule_cache_bench: compiled %zu YARA rules, loaded %zu\n",
                     compiled_rules.size(), loaded_rules.size());
        return 1;
    }
    if (compiled_bytes != loaded_bytes) {
        std::fprintf(stderr, "rule_cache_bench: compiled %zu bytes of databases, loaded %zu\n",
                     compiled_bytes, loaded_bytes);
        return 1;
    }
    const double compile = median(compile_s), load = median(load_s);
    std::printf(
        "built-in pack, median of %d rounds: compiled %.3f s, loaded from the cache "
        "%.4f s (%.1fx faster); %zu bytes of databases\n",
        rounds, compile, load, compile / load, loaded_bytes);
    const double yara_compile = median(yara_compile_s), yara_load = median(yara_load_s);
    std::printf(
        "built-in YARA rules, median of %d rounds: compiled %.3f s, loaded from the cache "
        "%.4f s (%.1fx faster); %zu rules\n",
        rounds, yara_compile, yara_load, yara_compile / yara_load, loaded_rules.size());
    return 0;
}
