#include "gpuguard/detect/process_worker.h"

namespace gpuguard::agent {

ProcessWorker::ProcessWorker(Work work, std::string proc_root, size_t max_queue)
    : work_(std::move(work)),
      proc_root_(std::move(proc_root)),
      max_queue_(max_queue),
      thread_([this] { loop(); }) {}

ProcessWorker::~ProcessWorker() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

bool ProcessWorker::submit(const TaskInfo& task, bool quiet_if_nothing, std::string path,
                           uint64_t start_time_ns) {
    auto process = ProcessHandle::open(task.pid, start_time_ns, proc_root_);
    std::lock_guard lock(mutex_);
    ++requested_;
    if (!process || queue_.size() >= max_queue_) {
        ++dropped_;
        return false;
    }
    queue_.push_back(Request{task, std::move(process).value(), quiet_if_nothing, std::move(path)});
    wake_.notify_one();
    return true;
}

uint64_t ProcessWorker::requested() const {
    std::lock_guard lock(mutex_);
    return requested_;
}

uint64_t ProcessWorker::dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
}

void ProcessWorker::loop() {
    std::unique_lock lock(mutex_);
    while (true) {
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        Request request = std::move(queue_.front());
        queue_.pop_front();
        lock.unlock();
        work_(request);
        lock.lock();
    }
}

}  // namespace gpuguard::agent
