// AlertRouter: publish() -> inbox -> router thread (filter, format per sink,
// append to the sink's queue, fdatasync once per drained batch) -> one
// sender thread per sink (peek a batch, deliver, acknowledge, or back off
// exponentially and retry the same records).
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/siem/siem.h"
#include "siem/record_queue.h"
#include "siem/transport.h"

namespace gpuguard::siem {
namespace {

using Clock = std::chrono::steady_clock;
using Record = std::variant<Detection, EnforcementOutcome>;

constexpr size_t kBatchBytes = 1 << 20;

Framing effective_framing(const SinkConfig& sink) {
    if (sink.framing) return *sink.framing;
    switch (sink.type) {
        case SinkType::kUdp:
        case SinkType::kTcp:
        case SinkType::kTls:
            return Framing::kRfc5424;
        case SinkType::kLocalSyslog:
            return Framing::kRfc3164;
        default:
            return Framing::kNone;
    }
}

bool json_format(Format format) { return format == Format::kEcsJson || format == Format::kOcsf; }

int64_t wall_clock_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

struct Sink {
    SinkConfig config;
    Framing framing = Framing::kNone;
    SyslogOptions syslog;
    size_t batch_max = 500;
    std::unique_ptr<RecordQueue> queue;
    std::unique_ptr<Transport> transport;

    std::mutex mutex;
    std::condition_variable changed;  // records appended or acknowledged, stop
    SinkCounters counters;
    uint64_t corrupt_seen = 0;
    bool stopping = false;
    bool in_flight = false;
    bool dirty = false;  // appended since the last sync
    Clock::time_point drain_deadline;
    std::thread thread;
};

}  // namespace

struct AlertRouter::Impl {
    HostInfo host;
    size_t inbox_max = 0;
    std::vector<std::unique_ptr<Sink>> sinks;
    std::shared_ptr<spdlog::logger> log = logger("siem");

    std::mutex inbox_mutex;
    std::condition_variable inbox_changed;
    std::deque<Record> inbox;
    bool closing = false;
    bool dispatching = false;
    std::atomic<uint64_t> inbox_dropped{0};
    std::thread dispatcher;
    bool stopped = false;
    std::mutex stop_mutex;

    bool publish(Record record) {
        {
            std::lock_guard lock(inbox_mutex);
            if (closing || inbox.size() >= inbox_max) {
                inbox_dropped.fetch_add(1, std::memory_order_relaxed);
                return false;
            }
            inbox.push_back(std::move(record));
        }
        inbox_changed.notify_one();
        return true;
    }

    // ---- router thread -----------------------------------------------------

    void dispatch_loop() {
        std::vector<Record> batch;
        for (;;) {
            {
                std::unique_lock lock(inbox_mutex);
                inbox_changed.wait(lock, [&] { return closing || !inbox.empty(); });
                if (inbox.empty() && closing) return;
                batch.assign(std::make_move_iterator(inbox.begin()),
                             std::make_move_iterator(inbox.end()));
                inbox.clear();
                dispatching = true;
            }
            const int64_t now_ns = wall_clock_ns();
            for (const auto& record : batch) {
                for (auto& sink : sinks) route(*sink, record, now_ns);
            }
            for (auto& sink : sinks) sync(*sink);
            batch.clear();
            {
                std::lock_guard lock(inbox_mutex);
                dispatching = false;
            }
        }
    }

    void route(Sink& sink, const Record& record, int64_t now_ns) {
        const bool is_detection = std::holds_alternative<Detection>(record);
        const Severity severity = is_detection ? std::get<Detection>(record).severity
                                               : std::get<EnforcementOutcome>(record).severity;
        const bool wanted = (is_detection ? sink.config.detections : sink.config.enforcement) &&
                            at_least(severity, sink.config.min_severity);
        if (!wanted) {
            std::lock_guard lock(sink.mutex);
            ++sink.counters.filtered;
            return;
        }
        std::string data =
            std::visit([&](const auto& r) { return render(sink, r, now_ns); }, record);
        enqueue(sink, std::move(data));
    }

    template <typename R>
    std::string render(const Sink& sink, const R& record, int64_t now_ns) {
        const SinkConfig& config = sink.config;
        switch (config.type) {
            case SinkType::kSplunkHec: {
                // HEC event envelope; JSON bodies are embedded as objects.
                const std::string body = format(config.format, record, host);
                nlohmann::ordered_json meta;
                if (record.time_unix_ns != 0) {
                    meta["time"] = fmt::format("{}.{:06}", record.time_unix_ns / 1000000000,
                                               (record.time_unix_ns % 1000000000) / 1000);
                }
                meta["host"] = host.hostname;
                meta["source"] = "gpuguard";
                meta["sourcetype"] = fmt::format("gpuguard:{}", to_string(config.format));
                if (!config.index.empty()) meta["index"] = config.index;
                std::string out =
                    meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
                out.pop_back();  // '}'
                out += ",\"event\":";
                if (json_format(config.format)) {
                    out += body;
                } else {
                    out += nlohmann::json(body).dump(-1, ' ', false,
                                                     nlohmann::json::error_handler_t::replace);
                }
                out += "}";
                return out;
            }
            case SinkType::kElasticsearch: {
                nlohmann::ordered_json action;
                action["create"] = {{"_index", config.index.empty() ? std::string("gpuguard-alerts")
                                                                    : config.index},
                                    {"_id", alert_id(record)}};
                return action.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                       "\n" + format(config.format, record, host);
            }
            default:
                return format_syslog(sink.framing, config.format, record, host, sink.syslog,
                                     now_ns);
        }
    }

    void enqueue(Sink& sink, std::string data) {
        std::unique_lock lock(sink.mutex);
        const uint64_t limit = sink.config.queue_max_bytes;
        const uint64_t need = data.size() + 32;
        if (need > limit) {
            ++sink.counters.dropped;
            log->warn("sink {}: record of {} bytes exceeds queue_max_bytes, dropped",
                      sink.config.name, data.size());
            return;
        }
        if (sink.queue->bytes() + need > limit) {
            if (sink.config.overflow == OverflowPolicy::kDropOldest) {
                uint64_t dropped = 0;
                while (sink.queue->bytes() + need > limit) {
                    const uint64_t n = sink.queue->drop_oldest();
                    if (n == 0) break;
                    dropped += n;
                }
                sink.counters.dropped += dropped;
                log->warn("sink {}: queue full, dropped the {} oldest records", sink.config.name,
                          dropped);
            } else {
                const auto deadline = Clock::now() + sink.config.block_timeout;
                sink.changed.wait_until(lock, deadline, [&] {
                    return sink.stopping || sink.queue->bytes() + need <= limit;
                });
                if (sink.queue->bytes() + need > limit) {
                    ++sink.counters.dropped;
                    log->warn("sink {}: queue full for {} ms, dropped a new record",
                              sink.config.name, sink.config.block_timeout.count());
                    return;
                }
            }
        }
        if (Status appended = sink.queue->append(data); !appended) {
            ++sink.counters.dropped;
            log->error("sink {}: {}", sink.config.name, appended.error().message);
            return;
        }
        ++sink.counters.queued;
        sink.dirty = true;
        lock.unlock();
        sink.changed.notify_all();
    }

    // Group commit of everything appended from one inbox batch: written to
    // the queue file (then it survives the agent being killed) and, with
    // queue_fsync, one fdatasync (then it survives the host going down).
    void sync(Sink& sink) {
        int fd = -1;
        uint64_t upto = 0;
        {
            std::lock_guard lock(sink.mutex);
            if (!sink.dirty) return;
            sink.dirty = false;
            fd = sink.queue->sync_fd();  // writes what append() buffered; -1 in memory
            upto = sink.counters.queued;
        }
        if (fd < 0) return;
        // Only this thread closes the queue's tail descriptor.
        if (sink.config.queue_fsync && fdatasync(fd) != 0) {
            log->warn("sink {}: fdatasync of the queue: {}", sink.config.name, strerror(errno));
            return;
        }
        std::lock_guard lock(sink.mutex);
        sink.counters.persisted = std::max(sink.counters.persisted, upto);
    }

    // ---- sender threads ----------------------------------------------------

    void send_loop(Sink& sink) {
        // SIGPIPE from a peer that went away (OpenSSL writes with write()) must
        // become EPIPE on this thread, not kill the agent.
        sigset_t pipe_set;
        sigemptyset(&pipe_set);
        sigaddset(&pipe_set, SIGPIPE);
        pthread_sigmask(SIG_BLOCK, &pipe_set, nullptr);

        std::mt19937_64 jitter(std::random_device{}());
        uint32_t failures = 0;
        uint64_t singly_through = 0;  // resend one record at a time up to this seq
        // Records a per-item receiver settled behind one it asked to resend:
        // not sent again, acknowledged in the queue once the records before them are.
        std::set<uint64_t> settled;
        std::vector<QueuedRecord> batch;
        std::vector<uint64_t> peeked;  // the queue's head, in order, settled ones included
        for (;;) {
            batch.clear();
            peeked.clear();
            {
                std::unique_lock lock(sink.mutex);
                sink.changed.wait(lock, [&] { return sink.stopping || sink.queue->records() > 0; });
                if (sink.stopping &&
                    (sink.queue->records() == 0 || Clock::now() >= sink.drain_deadline)) {
                    return;
                }
                const size_t limit = singly_through != 0 ? 1 : sink.batch_max;
                if (Status read = sink.queue->peek(limit, kBatchBytes, &batch); !read) {
                    sink.counters.healthy = false;
                    sink.counters.last_error = read.error().message;
                }
                account_corrupt(sink);
                for (const auto& record : batch) peeked.push_back(record.seq);
                // Settled records the queue dropped meanwhile (overflow) are gone.
                if (!peeked.empty()) {
                    settled.erase(settled.begin(), settled.lower_bound(peeked.front()));
                }
                std::erase_if(batch, [&](const QueuedRecord& r) { return settled.count(r.seq); });
                if (batch.empty()) {
                    // Nothing readable although records are counted: a corrupt
                    // tail was cut; wait for news rather than spin.
                    sink.changed.wait_for(lock, std::chrono::milliseconds(50));
                    continue;
                }
                sink.in_flight = true;
            }

            Delivery delivery = sink.transport->deliver(batch);

            std::chrono::milliseconds backoff{0};
            {
                std::lock_guard lock(sink.mutex);
                sink.in_flight = false;
                const size_t done = std::min(delivery.delivered + delivery.rejected, batch.size());
                const size_t prefix = done - std::min(done, delivery.done_later.size());
                for (size_t i = 0; i < prefix; ++i) settled.insert(batch[i].seq);
                for (size_t i : delivery.done_later) {
                    if (i < batch.size()) settled.insert(batch[i].seq);
                }
                sink.counters.sent += delivery.delivered;
                sink.counters.dropped += delivery.rejected;
                sink.counters.bytes += delivery.bytes;
                // The queue is acknowledged up to the first record still unsettled.
                uint64_t through = 0;
                for (uint64_t seq : peeked) {
                    if (settled.erase(seq) == 0) break;
                    through = seq;
                }
                if (through != 0) {
                    if (Status acked = sink.queue->ack_through(through); !acked) {
                        log->warn("sink {}: {}", sink.config.name, acked.error().message);
                    }
                    if (singly_through != 0 && through >= singly_through) singly_through = 0;
                }
                if (delivery.rejected > 0) {
                    log->warn("sink {}: receiver rejected {} records: {}", sink.config.name,
                              delivery.rejected, delivery.rejection);
                }
                if (delivery.error.empty()) {
                    if (!sink.counters.healthy) {
                        log->info("sink {}: delivering again", sink.config.name);
                    }
                    sink.counters.healthy = true;
                    sink.counters.last_error.clear();
                    failures = 0;
                } else {
                    sink.counters.retried += batch.size() - done;
                    if (sink.counters.healthy || sink.counters.last_error != delivery.error) {
                        log->warn("sink {}: {} (will retry)", sink.config.name, delivery.error);
                    }
                    sink.counters.healthy = false;
                    sink.counters.last_error = delivery.error;
                    if (delivery.retry_singly) {
                        singly_through = batch.back().seq;
                    } else {
                        backoff = backoff_delay(sink.config, failures++, jitter);
                    }
                }
            }
            sink.changed.notify_all();
            if (backoff.count() > 0) {
                // Until the backoff ends, or the drain deadline once stopping:
                // stop() must not wait for a retry_max-long backoff.
                const auto retry_at = Clock::now() + backoff;
                std::unique_lock lock(sink.mutex);
                for (;;) {
                    const auto until =
                        sink.stopping ? std::min(retry_at, sink.drain_deadline) : retry_at;
                    if (Clock::now() >= until) break;
                    sink.changed.wait_until(lock, until);
                }
            }
        }
    }

    static std::chrono::milliseconds backoff_delay(const SinkConfig& config, uint32_t failures,
                                                   std::mt19937_64& jitter) {
        double delay = static_cast<double>(config.retry_initial.count());
        for (uint32_t i = 0; i < failures && delay < config.retry_max.count(); ++i) delay *= 2;
        delay = std::min(delay, static_cast<double>(config.retry_max.count()));
        // +-20 % so a fleet does not reconnect in lockstep after an outage.
        std::uniform_real_distribution<double> spread(0.8, 1.2);
        return std::chrono::milliseconds(
            std::max<int64_t>(1, static_cast<int64_t>(delay * spread(jitter))));
    }

    void account_corrupt(Sink& sink) {
        const uint64_t corrupt = sink.queue->corrupt();
        if (corrupt > sink.corrupt_seen) {
            sink.counters.dropped += corrupt - sink.corrupt_seen;
            log->warn("sink {}: cut {} corrupt queue segment tail(s)", sink.config.name,
                      corrupt - sink.corrupt_seen);
            sink.corrupt_seen = corrupt;
        }
    }

    bool idle() {
        {
            std::lock_guard lock(inbox_mutex);
            if (!inbox.empty() || dispatching) return false;
        }
        for (auto& sink : sinks) {
            std::lock_guard lock(sink->mutex);
            if (sink->queue->records() > 0 || sink->in_flight) return false;
        }
        return true;
    }

    void stop(std::chrono::milliseconds drain_timeout) {
        std::lock_guard stop_lock(stop_mutex);
        if (stopped) return;
        stopped = true;
        {
            std::lock_guard lock(inbox_mutex);
            closing = true;
        }
        inbox_changed.notify_all();
        if (dispatcher.joinable()) dispatcher.join();
        const auto deadline = Clock::now() + drain_timeout;
        for (auto& sink : sinks) {
            {
                std::lock_guard lock(sink->mutex);
                sink->stopping = true;
                sink->drain_deadline = deadline;
            }
            sink->changed.notify_all();
        }
        for (auto& sink : sinks) {
            if (sink->thread.joinable()) sink->thread.join();
            sync(*sink);
            std::lock_guard lock(sink->mutex);
            if (sink->queue->records() > 0) {
                log->info("sink {}: {} records left queued{}", sink->config.name,
                          sink->queue->records(),
                          sink->config.queue_dir.empty() ? " (memory queue: lost)"
                                                         : " for the next start");
            }
        }
    }
};

AlertRouter::AlertRouter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AlertRouter::~AlertRouter() { stop(); }

Result<std::unique_ptr<AlertRouter>> AlertRouter::start(RouterOptions options) {
    auto impl = std::make_unique<Impl>();
    impl->host = std::move(options.host);
    impl->inbox_max = std::max<size_t>(options.inbox_max, 1);
    std::set<std::string> names;
    for (auto& config : options.sinks) {
        if (Status valid = validate(config); !valid) return Unexpected{valid.error()};
        if (!names.insert(config.name).second) {
            return fail(ErrorCode::kInvalidArgument,
                        fmt::format("sink '{}' is configured twice", config.name));
        }
        auto sink = std::make_unique<Sink>();
        sink->framing = effective_framing(config);
        sink->syslog.facility = parse_facility(config.facility).value_or(16);
        sink->syslog.app_name = config.app_name;
        sink->syslog.procid = std::to_string(getpid());
        sink->syslog.rfc3164_hostname = config.type != SinkType::kLocalSyslog;
        sink->batch_max = config.batch_max_records != 0       ? config.batch_max_records
                          : config.type == SinkType::kWebhook ? 1
                                                              : 500;
        if (config.queue_dir.empty()) {
            sink->queue = make_memory_queue();
        } else {
            const uint64_t segment =
                std::clamp<uint64_t>(config.queue_max_bytes / 8, 64 << 10, 64 << 20);
            auto queue = open_disk_queue(config.queue_dir / config.name, segment);
            if (!queue) return Unexpected{queue.error()};
            sink->queue = std::move(queue.value());
            if (sink->queue->records() > 0) {
                impl->log->info("sink {}: resuming {} queued records", config.name,
                                sink->queue->records());
            }
        }
        auto transport = make_transport(config);
        if (!transport) return Unexpected{transport.error()};
        sink->transport = std::move(transport.value());
        sink->counters.name = config.name;
        sink->counters.type = to_string(config.type);
        sink->config = std::move(config);
        impl->sinks.push_back(std::move(sink));
    }
    Impl* raw = impl.get();
    for (auto& sink : raw->sinks) {
        Sink* s = sink.get();
        s->thread = std::thread([raw, s] { raw->send_loop(*s); });
    }
    raw->dispatcher = std::thread([raw] { raw->dispatch_loop(); });
    return std::unique_ptr<AlertRouter>(new AlertRouter(std::move(impl)));
}

bool AlertRouter::publish(const Detection& detection) { return impl_->publish(detection); }

bool AlertRouter::publish(const EnforcementOutcome& outcome) { return impl_->publish(outcome); }

bool AlertRouter::flush(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!impl_->idle()) {
        if (Clock::now() >= deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

void AlertRouter::stop(std::chrono::milliseconds drain_timeout) { impl_->stop(drain_timeout); }

std::vector<SinkCounters> AlertRouter::counters() const {
    std::vector<SinkCounters> out;
    const uint64_t inbox_dropped = impl_->inbox_dropped.load(std::memory_order_relaxed);
    for (const auto& sink : impl_->sinks) {
        std::lock_guard lock(sink->mutex);
        SinkCounters counters = sink->counters;
        counters.dropped += inbox_dropped;
        counters.queue_records = sink->queue->records();
        counters.queue_bytes = sink->queue->bytes();
        out.push_back(std::move(counters));
    }
    return out;
}

uint64_t AlertRouter::inbox_dropped() const {
    return impl_->inbox_dropped.load(std::memory_order_relaxed);
}

}  // namespace gpuguard::siem
