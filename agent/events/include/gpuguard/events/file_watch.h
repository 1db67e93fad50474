// The file-change watch list (sensor.watch_files, docs/configuration.md):
// which paths' writes, renames and unlinks the kernel reports
// (bpf/files.bpf.c), and which kind of persistence or preloading each is.
// The sensor loads it into the kernel; the agent names the kind of a path
// it resolved itself (a watched process's relative path) with the same list.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard::agent {

struct WatchPattern {
    enum class Form {
        kExact,     // "/etc/ld.so.preload": that path only
        kPrefix,    // "/etc/cron.d/" or "/etc/cron*": every path starting so
        kBasename,  // ".bashrc", "authorized_keys": that file name in any directory
    };
    Form form = Form::kExact;
    std::string text;  // the path, prefix (without '*') or name
    // "preload", "cron", "systemd", "shell_rc", "ssh_keys", "agent_pins",
    // "agent_config", "other"
    std::string kind;
    bool operator==(const WatchPattern&) const = default;
};

// The default list: /etc/ld.so.preload, crontabs, systemd unit directories
// (~/.config/systemd/user/ in every home), shell rc files and authorized_keys.
const std::vector<std::string>& default_watch_files();

// One entry of sensor.watch_files as patterns: "~/" expands to each of
// `homes` (one pattern per home). The kind follows from the entry (ld.so.preload,
// cron, systemd, rc files, authorized_keys; else "other"). kInvalidArgument,
// naming the entry, for an empty entry, a relative one with a '/', a "*"
// that is not last, or one longer than the kernel compares (127 bytes of a
// path, 30 of a name).
Result<std::vector<WatchPattern>> parse_watch_entry(std::string_view entry,
                                                    const std::vector<std::string>& homes);

// The kind of the first pattern `path` (absolute) matches, "" for none.
std::string watch_kind(const std::vector<WatchPattern>& patterns, std::string_view path);

}  // namespace gpuguard::agent
