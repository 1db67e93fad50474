// ExeScanWorker: YARA scans of process executables, off the event loop. The
// correlator's ScanRequests go in; each answer is an ExeScan event handed to
// `deliver` on the worker thread (the agent journals and judges it like any
// other event). A scan reads /proc/PID/exe; a pidfd taken at submit time
// makes sure the verdict is about the process that was asked for, never one
// that got its pid later. Each verdict also says what the process's own
// package database records of the executable (ExeScan::package_check).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "gpuguard/detect/process_worker.h"
#include "gpuguard/events/event.h"
#include "gpuguard/signatures/signatures.h"

namespace gpuguard::agent {

struct ExeScanStats {
    uint64_t requested = 0;
    uint64_t scanned = 0;   // verdicts delivered (from cache or not)
    uint64_t matched = 0;   // of which at least one YARA rule hit
    uint64_t failed = 0;    // delivered with an error (unreadable, too large)
    uint64_t dropped = 0;   // queue full, or the process exited before its verdict
    uint64_t withheld = 0;  // clean verdicts nobody needed (of scans of every exec)
};

class ExeScanWorker {
  public:
    using Deliver = std::function<void(Event)>;

    ExeScanWorker(signatures::YaraScanner scanner, Deliver deliver, std::string proc_root = "/proc",
                  size_t max_queue = 256);
    ~ExeScanWorker();  // stops and joins; queued requests are dropped
    ExeScanWorker(const ExeScanWorker&) = delete;
    ExeScanWorker& operator=(const ExeScanWorker&) = delete;

    // Queues a scan of `task.pid`'s executable. False (and counted) when the
    // queue is full or the process is already gone. Without `deliver_clean`
    // a verdict without a hit is counted, not delivered. A process whose
    // pid now has another `start_time_ns` is gone (ProcessWorker::submit).
    bool submit(const TaskInfo& task, bool deliver_clean = true, uint64_t start_time_ns = 0);
    // Queues a scan of `library` (a real path in the process's root) that
    // its environment preloads; only a hit is delivered (ExeScan::library).
    bool submit_library(const TaskInfo& task, std::string library, uint64_t start_time_ns = 0);

    ExeScanStats stats() const;

  private:
    void work(ProcessWorker::Request& request);
    Event scan(const ProcessWorker::Request& request);
    // ExeScan::package and package_check of the executable just scanned,
    // whose bytes had the MD5 sum `md5`.
    void check_package(const std::string& pid_dir, const std::string& md5, ExeScan& result) const;

    signatures::YaraScanner scanner_;
    Deliver deliver_;
    std::string proc_root_;
    mutable std::mutex mutex_;
    ExeScanStats stats_;    // requested and submit-time drops: worker_'s
    ProcessWorker worker_;  // last: its thread starts after everything it uses
};

}  // namespace gpuguard::agent
