// Who wrote one of the agent's trusted files, as far as the host tells:
// the package manager (dpkg, apt, rpm, dnf, ... or a process they run:
// a maintainer script), systemctl, or another process. A name is the
// cheapest thing to fake, so a tool counts only while its executable is
// what the name claims: owned by a package of the process's own root
// (package_owner.h), or, on a root without a dpkg database (rpm hosts), in
// a system binary directory (docs/detections.md, "The agent's own trust").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gpuguard/state/process_origin.h"

namespace gpuguard::agent {

struct WriterOrigin {
    std::string kind;    // "package_manager", "systemctl", "other"
    std::string detail;  // why: "under /usr/bin/dpkg (pid 812, dpkg:dpkg)"
    std::string exe;     // the writer's own executable; "" when it was gone
    std::vector<std::string> cmdline;
};

// Which tool a file name names: "package_manager", "systemctl" or "".
std::string writer_tool_kind(const std::string& exe_path);

// The kind of a writer from itself and its ancestors (nearest first: the
// writer is chain[0]): the nearest whose executable names a tool and that
// `vouch` vouches for (returns what vouches, "" for nothing). A tool's name
// that nothing vouches for is said in the detail and does not count. Pure.
WriterOrigin classify_writer(const std::vector<Ancestor>& chain,
                             const std::function<std::string(const Ancestor&)>& vouch);

// What vouches for a tool's executable `exe` seen in the root `root` ("/"
// or "/proc/PID/root"): its package ("dpkg:dpkg"), or "no dpkg database, in
// a system directory"; "" for nothing (a copy elsewhere, one deleted since).
std::string vouch_for_tool(const std::string& root, const std::string& exe);

// The same for a live process: its executable and command line, its
// ancestors from /proc (at most 16), each tool's executable checked against
// the package database of its own root. The writer may be gone already:
// then exe and cmdline are "" and the kind is "other" (callers that kept
// its exec, as the process table does, classify_writer() from that).
WriterOrigin writer_origin(uint32_t pid, const std::string& proc_root = "/proc");

}  // namespace gpuguard::agent
