#include "allocator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <malloc.h>
#include <unistd.h>

namespace gpuguard::agent::cli {
namespace {

constexpr int kArenaMax = 2;
constexpr int kMmapThresholdBytes = 128 << 10;

// Whether the environment already sets `variable` or the GLIBC_TUNABLES
// entry `tunable`.
bool set_by_environment(const char* variable, std::string_view tunable) {
    if (std::getenv(variable)) return true;
    const char* tunables = std::getenv("GLIBC_TUNABLES");
    return tunables && std::string_view(tunables).find(tunable) != std::string_view::npos;
}

// Resident set of this process in MiB (/proc/self/statm), -1 when unreadable.
double rss_mib() {
    std::FILE* statm = std::fopen("/proc/self/statm", "r");
    if (!statm) return -1;
    unsigned long size = 0, resident = 0;
    const bool read = std::fscanf(statm, "%lu %lu", &size, &resident) == 2;
    std::fclose(statm);
    if (!read) return -1;
    return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) /
           (1024.0 * 1024.0);
}

}  // namespace

std::string tune_allocator() {
    std::string done;
    if (set_by_environment("MALLOC_ARENA_MAX", "glibc.malloc.arena_max")) {
        done += "arenas: as the environment sets them";
    } else if (mallopt(M_ARENA_MAX, kArenaMax) == 1) {
        done += "arenas: at most " + std::to_string(kArenaMax);
    } else {
        // Not glibc's malloc (a sanitizer's, a preloaded one): its own rules.
        done += "arenas: left to this allocator, which refuses M_ARENA_MAX";
    }
    if (set_by_environment("MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold")) {
        done += "; mmap threshold: as the environment sets it";
    } else if (mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1) {
        done +=
            "; blocks of " + std::to_string(kMmapThresholdBytes >> 10) + " KiB and more mmapped";
    } else {
        done += "; mmap threshold: left to this allocator";
    }
    return done;
}

std::string release_free_memory() {
    char line[64];
    const double before = rss_mib();
    malloc_trim(0);
    std::snprintf(line, sizeof(line), "RSS %.1f -> %.1f MiB", before, rss_mib());
    return line;
}

}  // namespace gpuguard::agent::cli
