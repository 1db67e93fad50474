// Listing /proc, and catching a process hidden from /proc listings.
//
// The agent lists /proc with getdents64 directly (gpuguard/common/dir_entries.h):
// a library preloaded into the agent (LD_PRELOAD, /etc/ld.so.preload) that
// replaces libc's readdir — libprocesshider and the miners' copies of it —
// cannot blind the process table's bootstrap or the enforcer's sweeps.
// libc_listed_pids() is the other view, on purpose through opendir/readdir:
// what `ps`, `top` and every other libc program on the host is shown. A
// process the kernel reported (the process table) or getdents64 lists but
// libc's readdir does not is hidden (HiddenProcessCheck).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/events/event.h"

namespace gpuguard::agent {

// Pids under `proc_root` (process directories, not tasks), ascending, read
// with getdents64. Fails as list_directory does ("cannot list DIR: ...").
Result<std::vector<uint32_t>> list_proc_pids(const std::filesystem::path& proc_root);
// Open fd numbers of `pid` (its fd/ directory), ascending; empty when the
// process is gone or not readable.
std::vector<uint32_t> list_proc_fds(const std::filesystem::path& proc_root, uint32_t pid);

// Pids under `proc_root` as libc's opendir/readdir show them, ascending:
// the listing a preloaded hiding library patches. Only for the comparison.
Result<std::vector<uint32_t>> libc_listed_pids(const std::filesystem::path& proc_root);

struct HiddenCheckOptions {
    std::filesystem::path proc_root = "/proc";
    // Where the agent's own /etc/ld.so.preload is (the agent's mount
    // namespace); tests point it at a fixture.
    std::filesystem::path etc_root = "/";
    // Probe the agent's own process for a readdir hook (dlsym, /proc/self/maps).
    // Off in unit tests over a fake /proc.
    bool probe_self = true;
    // Whether a suspect is still there is also asked of the kernel with
    // kill(pid, 0) (only meaningful when proc_root is this pid namespace's /proc).
    bool signal_probe = true;
};

// A library preloaded into this process (the agent): its own LD_PRELOAD
// (proc_root/self/environ) or the /etc/ld.so.preload of its mount namespace
// (etc_root). `how`: "LD_PRELOAD of the agent names LIB", "/etc/ld.so.preload
// (the agent's mount namespace) preloads LIB".
struct OwnPreload {
    std::string library;
    std::string how;
};
std::vector<OwnPreload> own_preloads(const HiddenCheckOptions& options);

// One comparison of the kernel's view of the processes with libc's. Cheap
// enough to run every few seconds: one getdents64 and one readdir pass over
// /proc, and more only for a suspect.
class HiddenProcessCheck {
  public:
    explicit HiddenProcessCheck(HiddenCheckOptions options) : options_(std::move(options)) {}

    // `known`: live pids the kernel reported (the process table). Returns one
    // HiddenProcess event per hidden pid, task = pid only (the caller fills
    // the identity from the table), ts_ns left 0. A pid that exited between
    // the reads is not hidden: each suspect must still be listed by a second
    // getdents64 pass (and answer kill(pid, 0)). Fails only when proc_root
    // cannot be listed at all.
    Result<std::vector<std::pair<uint32_t, HiddenProcess>>> run(const std::vector<uint32_t>& known);

    uint64_t checks() const { return checks_; }

  private:
    HiddenCheckOptions options_;
    uint64_t checks_ = 0;
};

// What hides processes from the agent's own libc, as far as it can tell:
// LD_PRELOAD of the agent and of `pid`, /etc/ld.so.preload in the agent's
// mount namespace and in `pid`'s root, and the library the agent's readdir
// resolves to when it is not libc's. Fills `libraries` (each path once)
// and `mechanisms` (one line each) of `hidden`.
void find_hiding_mechanism(const HiddenCheckOptions& options, uint32_t pid, HiddenProcess& hidden);

}  // namespace gpuguard::agent
