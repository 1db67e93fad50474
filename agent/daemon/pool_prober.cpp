// PoolProber (pool_prober.h) and the agent's step that hands it the
// correlator's requests.
#include "pool_prober.h"

#include <cerrno>
#include <chrono>
#include <cstring>

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sched.h>

#include "agent_impl.h"
#include "gpuguard/common/clock.h"
#include "gpuguard/common/ip_address.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/netintel/pool_probe.h"
#include "gpuguard/siem/siem.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxQueued = 8;
constexpr size_t kMaxPeersRemembered = 4096;
constexpr uint64_t kHourNs = 3600ull * 1'000'000'000ull;

// The addresses of the calling thread's network namespace.
std::vector<std::string> own_addresses() {
    std::vector<std::string> out;
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) != 0) return out;
    for (const ifaddrs* entry = list; entry; entry = entry->ifa_next) {
        if (!entry->ifa_addr) continue;
        char text[INET6_ADDRSTRLEN] = {};
        if (entry->ifa_addr->sa_family == AF_INET) {
            inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(entry->ifa_addr)->sin_addr,
                      text, sizeof(text));
        } else if (entry->ifa_addr->sa_family == AF_INET6) {
            inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr)->sin6_addr,
                      text, sizeof(text));
        } else {
            continue;
        }
        out.emplace_back(text);
    }
    freeifaddrs(list);
    return out;
}

}  // namespace

PoolProber::PoolProber(VerifyConfig config, std::string proc_root, Report report)
    : config_(std::move(config)),
      proc_root_(std::move(proc_root)),
      report_(std::move(report)),
      thread_([this] { loop(); }) {}

PoolProber::~PoolProber() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

uint64_t PoolProber::probed() const {
    std::lock_guard lock(mutex_);
    return probed_;
}

uint64_t PoolProber::skipped() const {
    std::lock_guard lock(mutex_);
    return skipped_;
}

void PoolProber::submit(const TaskInfo& task, const ProbeRequest& request, uint64_t now_ns) {
    const auto log = logger("agent");
    const std::string peer = endpoint_text(request.address, request.port);
    std::lock_guard lock(mutex_);
    const auto last = last_probe_ns_.find(peer);
    if (last != last_probe_ns_.end() &&
        now_ns < last->second + uint64_t{config_.peer_interval_s} * 1'000'000'000ull) {
        ++skipped_;
        log->info(
            "pool probe of {} for pid {} ({}) skipped: probed {} s ago "
            "(verify.peer_interval_s)",
            peer, task.pid, task.comm, (now_ns - last->second) / 1'000'000'000ull);
        return;
    }
    while (!recent_ns_.empty() && recent_ns_.front() + kHourNs <= now_ns) recent_ns_.pop_front();
    if (recent_ns_.size() >= config_.max_per_hour || queue_.size() >= kMaxQueued) {
        ++skipped_;
        log->warn("pool probe of {} for pid {} ({}) skipped: {}", peer, task.pid, task.comm,
                  queue_.size() >= kMaxQueued
                      ? std::string("too many probes queued")
                      : std::to_string(recent_ns_.size()) +
                            " probes in the last hour (verify.max_per_hour)");
        return;
    }
    if (last_probe_ns_.size() >= kMaxPeersRemembered) {
        std::erase_if(last_probe_ns_, [&](const auto& entry) {
            return entry.second + uint64_t{config_.peer_interval_s} * 1'000'000'000ull <= now_ns;
        });
    }
    last_probe_ns_[peer] = now_ns;
    recent_ns_.push_back(now_ns);
    // The namespace is held from now on: the probe goes where the process's
    // connection went even when the process is gone by then.
    const std::string netns = proc_root_ + "/" + std::to_string(task.pid) + "/ns/net";
    queue_.push_back(Job{task, request, UniqueFd(open(netns.c_str(), O_RDONLY | O_CLOEXEC))});
    wake_.notify_one();
}

void PoolProber::loop() {
    // The thread's own namespace, to come back to after each probe.
    const UniqueFd home(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    for (;;) {
        Job job;
        {
            std::unique_lock lock(mutex_);
            wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            job = std::move(queue_.front());
            queue_.pop_front();
            if (broken_) continue;
        }
        PoolProbe result = probe(job);
        bool back = true;
        if (job.netns && home && setns(home.get(), CLONE_NEWNET) != 0) back = false;
        {
            std::lock_guard lock(mutex_);
            ++probed_;
            if (!back) broken_ = true;
        }
        if (!back) {
            logger("agent")->critical(
                "pool probes stopped: cannot return to the agent's network namespace: {}",
                std::strerror(errno));
        }
        Event event;
        event.task = job.task;
        event.data = std::move(result);
        report_(std::move(event));
    }
}

PoolProbe PoolProber::probe(Job& job) {
    const auto log = logger("agent");
    const auto started = std::chrono::steady_clock::now();
    const ProbeRequest& request = job.request;
    PoolProbe out;
    out.address = request.address;
    out.port = request.port;
    out.rule = request.rule;
    const bool tls = config_.tls == "always" || (config_.tls == "auto" && request.tls);
    out.tls = tls;
    if (tls) out.server_name = request.server_name;
    const std::string peer = endpoint_text(request.address, request.port);
    if (const auto refused = pool_probe::refused_address(request.address)) {
        out.verdict = "refused: " + *refused + " address";
    } else if (!job.netns) {
        out.verdict = "not probed: its network namespace is gone";
    } else if (setns(job.netns.get(), CLONE_NEWNET) != 0) {
        out.verdict =
            std::string("not probed: cannot enter its network namespace: ") + std::strerror(errno);
        job.netns.reset();  // nothing to return from
    } else if (pool_probe::own_address(request.address, own_addresses())) {
        out.verdict = "refused: an address of the host itself";
    } else {
        log->info("pool probe of {} for pid {} ({}), asked by {}: {}", peer, job.task.pid,
                  job.task.comm, request.rule, tls ? "over TLS" : "over plain TCP");
        speak(job, tls, out);
    }
    out.duration_ms = static_cast<uint32_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::steady_clock::now() - started)
                                                .count());
    log->info("pool probe of {} for pid {} ({}): {} ({} ms)", peer, job.task.pid, job.task.comm,
              out.verdict, out.duration_ms);
    return out;
}

void PoolProber::speak(const Job& job, bool tls, PoolProbe& out) const {
    for (const auto dialect : pool_probe::kDialects) {
        siem::ExchangeRequest request;
        request.address = job.request.address;
        request.port = job.request.port;
        request.tls = tls;
        request.server_name = out.server_name;
        request.message = pool_probe::first_message(dialect);
        request.timeout = std::chrono::milliseconds(config_.timeout_ms);
        request.max_answer = config_.answer_max_bytes;
        const siem::ExchangeResult got = siem::exchange_once(request);
        const pool_probe::Verdict verdict = pool_probe::classify(
            dialect, {got.answer, got.closed, got.timed_out, got.error, config_.timeout_ms});
        out.attempts.push_back(std::string(pool_probe::to_string(dialect)) + ": " + verdict.text);
        out.verdict = verdict.text;
        if (!got.answer.empty() || verdict.pool) {
            out.protocol = pool_probe::to_string(dialect);
            out.sent = request.message.substr(0, request.message.size() - 1);  // without '\n'
            out.answer = pool_probe::quoted_answer(got.answer, config_.answer_max_bytes);
        }
        if (verdict.pool) out.pool = true;
        if (verdict.final) return;
    }
}

void Agent::Impl::submit_probes() {
    for (const auto& request : correlator->take_probe_requests()) {
        const ProcessInfo* info = table->find(request.pid);
        if (!info || info->exited) continue;
        pool_prober->submit(task_of(*info), request, monotonic_ns());
    }
}

}  // namespace gpuguard::agent
