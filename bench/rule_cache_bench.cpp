// The compiled signature pack cache (docs/signatures.md#compiled-pack-cache):
// the built-in pack compiled into Hyperscan and its YARA rules compiled by
// libyara (the baseline, what every start did before the cache) against the
// same loaded from a filled cache, in one run, rounds interleaved; prints
// both medians and the ratio of each, and checks that compiled and loaded
// give the same databases and the same YARA rules.
//   rule_cache_bench [--rounds=N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

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

}  // namespace

int main(int argc, char** argv) {
    int rounds = 5;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        if (arg.starts_with("--rounds=")) rounds = std::max(1, std::atoi(arg.c_str() + 9));
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
