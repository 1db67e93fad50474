#include "gpuguard/detect/exe_scanner.h"

#include <sys/stat.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/state/package_owner.h"
#include "location_check.h"

namespace gpuguard::agent {
namespace {

// ExeScan::error_kind of a scan's error (YaraScanner's codes).
const char* scan_error_kind(const Error& error) {
    switch (error.code) {
        case ErrorCode::kNotFound:
            return "gone";
        case ErrorCode::kPermission:
            return "permission";
        case ErrorCode::kUnsupported:
            return "size_limit";
        case ErrorCode::kIo:
            return "io";
        case ErrorCode::kInvalidArgument:
            return "not_regular";
        default:
            return "scan_failed";
    }
}

}  // namespace

ExeScanWorker::ExeScanWorker(signatures::YaraScanner scanner, Deliver deliver,
                             std::string proc_root, size_t max_queue)
    : scanner_(std::move(scanner)),
      deliver_(std::move(deliver)),
      proc_root_(proc_root),
      worker_([this](ProcessWorker::Request& request) { work(request); }, std::move(proc_root),
              max_queue) {}

ExeScanWorker::~ExeScanWorker() = default;

bool ExeScanWorker::submit(const TaskInfo& task, bool deliver_clean, uint64_t start_time_ns) {
    return worker_.submit(task, !deliver_clean, {}, start_time_ns);
}

bool ExeScanWorker::submit_library(const TaskInfo& task, std::string library,
                                   uint64_t start_time_ns) {
    return worker_.submit(task, /*quiet_if_nothing=*/true, std::move(library), start_time_ns);
}

ExeScanStats ExeScanWorker::stats() const {
    std::lock_guard lock(mutex_);
    ExeScanStats stats = stats_;
    stats.requested = worker_.requested();
    stats.dropped += worker_.dropped();
    return stats;
}

void ExeScanWorker::check_package(const std::string& pid_dir, const std::string& md5,
                                  ExeScan& result) const {
    // The agent's own executable carries the signature pack's strings.
    struct stat exe {
    }, own{};
    if (::stat((pid_dir + "/exe").c_str(), &exe) == 0 &&
        ::stat((proc_root_ + "/self/exe").c_str(), &own) == 0 && exe.st_dev == own.st_dev &&
        exe.st_ino == own.st_ino) {
        result.package_check = "agent";
        return;
    }
    // The bytes the process runs (the scan read them through /proc/PID/exe:
    // a container's own, a replaced one), against what its own root's
    // package database recorded.
    const PackageFileCheck check = check_package_file(pid_dir + "/root", result.path, md5);
    result.package = check.owner;
    result.package_check = check.check;
}

Event ExeScanWorker::scan(const ProcessWorker::Request& request) {
    Event event;
    event.task = request.task;
    ExeScan result;
    const std::string pid_dir = proc_root_ + "/" + std::to_string(request.task.pid);
    if (!request.path.empty()) {
        // Seen through the process's root: a container's file, not the host's.
        result.path = result.library = request.path;
        auto report = scanner_.scan_file(pid_dir + "/root" + request.path);
        if (report) {
            result.sha256 = report->sha256;
            result.size = report->size;
            result.rules = report->rules;
            result.signature_ids = report->signature_ids;
        } else {
            result.error = report.error().message;
            result.error_kind = scan_error_kind(report.error());
        }
        event.data = std::move(result);
        return event;
    }
    auto report = scanner_.scan_pid(static_cast<pid_t>(request.task.pid), proc_root_);
    // What /proc/PID/exe names (in the process's own root), not the link.
    std::error_code ec;
    result.path = std::filesystem::read_symlink(pid_dir + "/exe", ec).string();
    if (report) {
        if (result.path.empty()) result.path = report->path;
        result.sha256 = report->sha256;
        result.size = report->size;
        result.rules = report->rules;
        result.signature_ids = report->signature_ids;
        check_package(pid_dir, report->md5, result);
    } else {
        result.error = report.error().message;
        result.error_kind = scan_error_kind(report.error());
    }
    // Whether a look-alike location is what its name claims, while the
    // process and its ancestors still run.
    result.location_check = check_location(request.task.pid, result.path, proc_root_);
    event.data = std::move(result);
    return event;
}

void ExeScanWorker::work(ProcessWorker::Request& request) {
    Event event = scan(request);
    // Exited meanwhile: /proc/PID/exe may have named a process that got
    // the pid later, and nobody waits for this verdict any more.
    const bool gone = request.process.exited();
    const auto& verdict = std::get<ExeScan>(event.data);
    const bool failed = !verdict.error.empty();
    const bool matched = !verdict.rules.empty();
    if (failed) {
        logger("yara")->debug("pid {}: {} not scanned: {}", request.task.pid, verdict.path,
                              verdict.error);
    }
    const bool withheld = !matched && !failed && request.quiet_if_nothing;
    if (!gone && !withheld) deliver_(std::move(event));
    std::lock_guard lock(mutex_);
    if (gone) {
        ++stats_.dropped;
    } else {
        ++stats_.scanned;
        stats_.withheld += withheld;
        stats_.failed += failed;
        stats_.matched += matched;
    }
}

}  // namespace gpuguard::agent
