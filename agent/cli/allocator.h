// The agent's use of glibc malloc: how many arenas, where large blocks go,
// and handing start-up memory back. docs/operations.md, "Footprint", has
// the figures behind each setting.
#pragma once

#include <string>

namespace gpuguard::agent::cli {

// Call first in `gpuguard run`, before any thread starts. Caps malloc at 2
// arenas and fixes the mmap threshold at 128 KiB (glibc's starting value,
// which it otherwise raises to the largest block freed, up to 32 MiB: after
// Hyperscan's compile or a YARA read of a large executable, every block
// below that size stays in an arena when freed). A setting the environment
// already makes (MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, GLIBC_TUNABLES
// glibc.malloc.*) is left to it. Returns what it did, for the log.
std::string tune_allocator();

// Returns the free memory of every arena to the kernel (malloc_trim) once
// start-up's transient allocations (rule compilation, the /proc bootstrap)
// are gone. Returns "RSS <before> -> <after> MiB", for the log.
std::string release_free_memory();

}  // namespace gpuguard::agent::cli
