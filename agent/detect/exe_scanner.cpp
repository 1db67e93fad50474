#include "gpuguard/detect/exe_scanner.h"

#include "gpuguard/common/logging.h"

namespace gpuguard::agent {

ExeScanWorker::ExeScanWorker(signatures::YaraScanner scanner, Deliver deliver,
                             std::string proc_root, size_t max_queue)
    : scanner_(std::move(scanner)),
      deliver_(std::move(deliver)),
      proc_root_(std::move(proc_root)),
      max_queue_(max_queue),
      thread_([this] { loop(); }) {}

ExeScanWorker::~ExeScanWorker() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

bool ExeScanWorker::submit(const TaskInfo& task, bool deliver_clean) {
    auto process = ProcessHandle::open(task.pid, 0, proc_root_);
    std::lock_guard lock(mutex_);
    ++stats_.requested;
    if (!process || queue_.size() >= max_queue_) {
        ++stats_.dropped;
        return false;
    }
    queue_.push_back(Request{task, std::move(process).value(), deliver_clean});
    wake_.notify_one();
    return true;
}

ExeScanStats ExeScanWorker::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

Event ExeScanWorker::scan(const Request& request) {
    Event event;
    event.task = request.task;
    ExeScan result;
    auto report = scanner_.scan_pid(static_cast<pid_t>(request.task.pid), proc_root_);
    if (report) {
        result.path = report->path;
        result.sha256 = report->sha256;
        result.size = report->size;
        result.rules = report->rules;
        result.signature_ids = report->signature_ids;
    } else {
        std::error_code ec;
        result.path = std::filesystem::read_symlink(
                          proc_root_ + "/" + std::to_string(request.task.pid) + "/exe", ec)
                          .string();
        result.error = report.error().message;
    }
    event.data = std::move(result);
    return event;
}

void ExeScanWorker::loop() {
    const auto log = logger("yara");
    std::unique_lock lock(mutex_);
    while (true) {
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        Request request = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        Event event = scan(request);
        // Exited meanwhile: /proc/PID/exe may have named a process that got
        // the pid later, and nobody waits for this verdict any more.
        const bool gone = request.process.exited();
        const auto& verdict = std::get<ExeScan>(event.data);
        const bool failed = !verdict.error.empty();
        const bool matched = !verdict.rules.empty();
        if (failed) {
            log->debug("pid {}: {} not scanned: {}", request.task.pid, verdict.path, verdict.error);
        }
        const bool withheld = !matched && !failed && !request.deliver_clean;
        if (!gone && !withheld) deliver_(std::move(event));
        lock.lock();
        if (gone) {
            ++stats_.dropped;
        } else {
            ++stats_.scanned;
            stats_.withheld += withheld;
            stats_.failed += failed;
            stats_.matched += matched;
        }
    }
}

}  // namespace gpuguard::agent
