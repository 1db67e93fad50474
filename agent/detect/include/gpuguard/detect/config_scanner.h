// ConfigScanWorker: reads the configuration files a process names or its
// miner family reads by default (gpuguard/state/config_files.h), off the
// event loop, and reports each file with a line matching a config
// signature, or that it could not read (ConfigFile::error: a named file
// root was refused, or an I/O error), as a ConfigFile event handed to
// `deliver` on the worker thread
// (the agent journals and judges it like any other event). The correlator
// asks (ConfigRequest) at an image's first sign of mining and at its first
// GPU use; the events carry the matched lines, so replay judges them
// without the files.
//
// A file is read once per content: the answer is cached by (dev, inode,
// mtime, size) until the rules change, so a host running the same miner a
// hundred times reads its config.json once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/detect/process_worker.h"
#include "gpuguard/events/event.h"
#include "gpuguard/rules/rules.h"
#include "gpuguard/state/config_files.h"

namespace gpuguard::agent {

struct ConfigLineLimits {
    size_t max_lines = 16;         // per file
    size_t max_line_bytes = 1024;  // per recorded line (or run of lines)
};

// The lines of `text` that match config signatures, in file order: each
// line that matches on its own, then, for a signature that matches only
// across lines (a JSON object over several lines) or inside a line longer
// than the limit, the shortest run of lines (or piece of a line) it
// matches in. Every recorded text matches some signature by itself, so
// matching the recorded lines again (the correlator, live and in replay)
// finds them. Empty when nothing matches.
std::vector<ConfigLine> select_config_lines(rules::RuleScanner& scanner, std::string_view text,
                                            const ConfigLineLimits& limits = {});

// A config line for alerts: string values and bare tokens that look like a
// wallet cut as stratum::redact_login() cuts a login, lines joined by ' ',
// the indentation dropped.
std::string redact_config_line(std::string_view text);

struct ConfigScanStats {
    uint64_t requested = 0;
    uint64_t files_read = 0;  // read from disk
    uint64_t cache_hits = 0;  // answered from the cache
    uint64_t refused = 0;     // not a regular file, on procfs/sysfs, unreadable
    uint64_t truncated = 0;   // larger than max_bytes: only their start was read
    uint64_t reported = 0;    // config_file events delivered
    uint64_t dropped = 0;     // queue full, or the process exited before its answer
};

struct ConfigScanOptions {
    size_t max_bytes = 256 * 1024;  // read of each file
    std::string proc_root = "/proc";
    size_t max_queue = 256;
    size_t max_cached = 1024;  // files; the cache starts over when full
    ConfigLineLimits limits;
};

class ConfigScanWorker {
  public:
    using Deliver = std::function<void(Event)>;

    // Fails when the rule set's scanner cannot be made.
    static Result<std::unique_ptr<ConfigScanWorker>> create(
        std::shared_ptr<const rules::RuleSet> rule_set, Deliver deliver,
        ConfigScanOptions options = {});
    ~ConfigScanWorker();  // stops and joins; queued requests are dropped
    ConfigScanWorker(const ConfigScanWorker&) = delete;
    ConfigScanWorker& operator=(const ConfigScanWorker&) = delete;

    // Queues a read of `task.pid`'s configuration files. False (and counted)
    // when the queue is full or the process is already gone (with
    // `start_time_ns`, also when its pid now has another process).
    bool submit(const TaskInfo& task, uint64_t start_time_ns = 0);
    // Later reads match with these rules (the cache is dropped).
    void set_rule_set(std::shared_ptr<const rules::RuleSet> rule_set);

    ConfigScanStats stats() const;

  private:
    struct Answer {
        uint64_t size = 0;
        std::string sha256;
        bool truncated = false;
        std::vector<ConfigLine> lines;
        std::string error;  // the file could not be read (ConfigFile::error)
    };
    ConfigScanWorker(rules::RuleScanner scanner, Deliver deliver, ConfigScanOptions options);
    void work(ProcessWorker::Request& request);
    // The process's files with matching lines (the worker thread's caches).
    std::vector<ConfigFile> scan(uint32_t pid);
    std::optional<Answer> answer(uint32_t pid, const ConfigCandidate& candidate,
                                 const std::string& cwd, std::string& path);

    rules::RuleScanner scanner_;  // the worker thread's
    Deliver deliver_;
    ConfigScanOptions options_;
    std::map<FileVersion, Answer> cache_;  // the worker thread's
    mutable std::mutex mutex_;
    std::shared_ptr<const rules::RuleSet> next_rules_;  // set_rule_set(), taken by the worker
    ConfigScanStats stats_;  // requested and submit-time drops: worker_'s
    ProcessWorker worker_;   // last: its thread starts after everything it uses
};

}  // namespace gpuguard::agent
