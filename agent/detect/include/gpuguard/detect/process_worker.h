// ProcessWorker: one thread that works through a bounded queue of requests
// about processes, off the event loop (the YARA scans of exe_scanner.h,
// the config file reads of config_scanner.h). A pidfd taken at submit time
// goes with each request, so the work can tell whether the process it was
// asked about is still the one behind the pid.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "gpuguard/events/event.h"
#include "gpuguard/state/process_handle.h"

namespace gpuguard::agent {

class ProcessWorker {
  public:
    struct Request {
        TaskInfo task;
        ProcessHandle process;
        bool quiet_if_nothing = false;  // the work reports only what it found
        std::string path{};             // a file of the process's to work on, "" none
    };
    // Runs on the worker thread, one request at a time, outside any lock.
    using Work = std::function<void(Request&)>;

    // Starts the thread: construct it last, after what `work` uses.
    ProcessWorker(Work work, std::string proc_root, size_t max_queue);
    ~ProcessWorker();  // stops and joins; queued requests are dropped
    ProcessWorker(const ProcessWorker&) = delete;
    ProcessWorker& operator=(const ProcessWorker&) = delete;

    // Queues a request about `task.pid`. False (and counted as dropped)
    // when the queue is full or the process is already gone: exited, or,
    // with `start_time_ns` (ProcStat's units; 0 unknown), its pid now held
    // by a process that started at another time (the request's process
    // exited and its pid was reused before the agent read the exit).
    bool submit(const TaskInfo& task, bool quiet_if_nothing = false, std::string path = {},
                uint64_t start_time_ns = 0);

    uint64_t requested() const;
    uint64_t dropped() const;  // at submit time

  private:
    void loop();

    Work work_;
    std::string proc_root_;
    size_t max_queue_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Request> queue_;
    bool stopping_ = false;
    uint64_t requested_ = 0;
    uint64_t dropped_ = 0;
    std::thread thread_;  // last: starts after everything it uses
};

}  // namespace gpuguard::agent
