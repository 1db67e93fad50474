// SOC alert feeds: formatters (ECS JSON, CEF, LEEF 2.0, OCSF Detection
// Finding, RFC 5424/3164 syslog) and AlertRouter, which fans detections and
// enforcement outcomes out to any number of sinks (stdout, rotating file,
// local syslog, UDP, TCP, TLS, webhook, Splunk HEC, Elasticsearch _bulk),
// each behind its own bounded, disk-backed, at-least-once retry queue.
// curl, OpenSSL and nlohmann-json stay inside siem/. Formats, sink options
// and SIEM recipes: docs/outputs.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/common/severity.h"

namespace gpuguard::siem {

// ---------------------------------------------------------------------------
// Formats. Every formatter returns one line without a trailing newline and is
// a pure function of its arguments: identical input gives byte-identical
// output (keys in a fixed order, numbers in shortest round-trip form, invalid
// UTF-8 replaced by U+FFFD). When the record's time_unix_ns is 0 (replay),
// every wall-clock field (ECS @timestamp, CEF rt, LEEF devTime, OCSF time,
// syslog TIMESTAMP) is left out (RFC 5424: "-"); monotonic times stay under
// gpuguard.* as they are.

enum class Format { kEcsJson, kCef, kLeef, kOcsf };
const char* to_string(Format format);                       // "ecs_json", "cef", "leef", "ocsf"
std::optional<Format> parse_format(std::string_view name);  // also accepts "json"

// The id receivers deduplicate on (ECS event.id, CEF externalId, OCSF
// finding_info.uid, syslog SD id, Elasticsearch _id): "<Detection::id>.<update>"
// for a detection (each update is a new alert), EnforcementOutcome::id for an
// outcome. Detection::id must therefore be unique across agent restarts.
std::string alert_id(const Detection& detection);
std::string alert_id(const EnforcementOutcome& outcome);

// Elastic Common Schema 8.11 JSON object (what `gpuguard replay` prints).
std::string format_ecs_json(const Detection& detection, const HostInfo& host);
std::string format_ecs_json(const EnforcementOutcome& outcome, const HostInfo& host);

// ArcSight CEF:0 (header `|` and `\` escaped; extension `=`, `\`, CR, LF escaped).
std::string format_cef(const Detection& detection, const HostInfo& host);
std::string format_cef(const EnforcementOutcome& outcome, const HostInfo& host);

// IBM QRadar LEEF:2.0 with tab-separated attributes.
std::string format_leef(const Detection& detection, const HostInfo& host);
std::string format_leef(const EnforcementOutcome& outcome, const HostInfo& host);

// OCSF 1.1 Detection Finding (class_uid 2004) JSON.
std::string format_ocsf(const Detection& detection, const HostInfo& host);
std::string format_ocsf(const EnforcementOutcome& outcome, const HostInfo& host);

std::string format(Format format, const Detection& detection, const HostInfo& host);
std::string format(Format format, const EnforcementOutcome& outcome, const HostInfo& host);

// CEF severity 0..10 for a syslog severity (emergency 10 ... debug 0).
int cef_severity(Severity severity);

// Syslog envelope around one formatted body.
enum class Framing { kNone, kRfc5424, kRfc3164 };
const char* to_string(Framing framing);  // "none", "rfc5424", "rfc3164"
std::optional<Framing> parse_framing(std::string_view name);

struct SyslogOptions {
    int facility = 16;  // local0; see parse_facility
    std::string app_name = "gpuguard";
    std::string procid = "-";      // RFC 5424 PROCID / RFC 3164 tag [pid], "-" = none
    bool rfc3164_hostname = true;  // false for /dev/log (the local daemon adds it)
};
// "kern", "user", "daemon", "auth", "authpriv", "local0".."local7", ... -> code.
std::optional<int> parse_facility(std::string_view name);

// RFC 5424: <PRI>1 TIMESTAMP HOST APP PROCID MSGID [gpuguard@32473 id= rule=
// pid= severity=] BODY, with MSGID "DETECTION" or "ENFORCEMENT". RFC 3164:
// <PRI>Mmm dd hh:mm:ss HOST APP[PROCID]: BODY (UTC; needs a wall clock, so a
// record with time_unix_ns 0 is stamped with `fallback_unix_ns`).
std::string format_syslog(Framing framing, Format body, const Detection& detection,
                          const HostInfo& host, const SyslogOptions& options,
                          int64_t fallback_unix_ns = 0);
std::string format_syslog(Framing framing, Format body, const EnforcementOutcome& outcome,
                          const HostInfo& host, const SyslogOptions& options,
                          int64_t fallback_unix_ns = 0);

// ---------------------------------------------------------------------------
// Sinks.

enum class SinkType {
    kStdout,         // one record per line
    kFile,           // one record per line, rotated by size
    kLocalSyslog,    // unix datagram socket (default /dev/log), RFC 3164 without host
    kUdp,            // RFC 5426, one record per datagram, best effort
    kTcp,            // RFC 6587 octet counting
    kTls,            // RFC 5425 (octet counting over TLS 1.2+)
    kWebhook,        // HTTP(S) POST of the record (batch: newline-separated)
    kSplunkHec,      // POST <url>/services/collector/event, "Authorization: Splunk <token>"
    kElasticsearch,  // POST <url>/_bulk, create with _id = alert id
};
const char* to_string(SinkType type);  // "stdout", "file", "syslog", "udp", "tcp", "tls",
                                       // "webhook", "splunk_hec", "elasticsearch"
std::optional<SinkType> parse_sink_type(std::string_view name);

enum class OverflowPolicy {
    kDropOldest,  // discard the oldest queued segment, count its records as dropped
    kBlock,       // hold the router back up to block_timeout, then drop the new record
};
const char* to_string(OverflowPolicy policy);  // "drop_oldest", "block"
std::optional<OverflowPolicy> parse_overflow_policy(std::string_view name);

struct SinkConfig {
    std::string name;  // unique; names the queue directory and the metrics label
    SinkType type = SinkType::kStdout;
    Format format = Format::kEcsJson;
    // Syslog envelope; unset = rfc5424 for udp/tcp/tls, rfc3164 for syslog, none otherwise.
    std::optional<Framing> framing;
    Severity min_severity = Severity::kDebug;  // records less severe are not sent
    bool detections = true;                    // send Detection records
    bool enforcement = true;                   // send EnforcementOutcome records

    // file: path; syslog: socket path ("" = /dev/log); udp/tcp/tls: "host:port"
    // ("[v6]:port"); webhook: URL; splunk_hec/elasticsearch: base URL
    // ("https://splunk:8088", "https://es:9200"); stdout: unused.
    std::string address;

    // TLS (tls sink and https URLs). Verification is on unless tls_verify is false.
    std::string tls_ca_file;      // PEM bundle; "" = system trust store
    std::string tls_cert_file;    // client certificate (mutual TLS), optional
    std::string tls_key_file;     // its key
    std::string tls_server_name;  // name to verify and send as SNI; "" = host of address
    bool tls_verify = true;

    // HTTP sinks.
    std::string token;                      // HEC token / ES API key / webhook bearer
    std::string index;                      // HEC index or ES index (default "gpuguard-alerts")
    std::vector<std::string> http_headers;  // extra "Name: value" lines

    // Syslog envelope.
    std::string facility = "local0";
    std::string app_name = "gpuguard";

    // file sink rotation: rename to .1 .. .N when the file passes max_bytes.
    uint64_t file_max_bytes = 100ull << 20;
    uint32_t file_max_files = 5;

    // Queue. With queue_dir set, records wait in <queue_dir>/<name>/ (segment
    // files, CRC-checked, fsynced per batch) and survive restarts; "" keeps
    // them in memory only.
    std::filesystem::path queue_dir;
    uint64_t queue_max_bytes = 256ull << 20;
    bool queue_fsync = true;
    OverflowPolicy overflow = OverflowPolicy::kDropOldest;
    std::chrono::milliseconds block_timeout{5000};

    // Delivery.
    size_t batch_max_records = 0;  // per send / HTTP request; 0 = 500 (webhook: 1)
    std::chrono::milliseconds retry_initial{500};
    std::chrono::milliseconds retry_max{30000};
    std::chrono::milliseconds io_timeout{10000};  // connect / send / HTTP request
};

// Checks one sink's settings (address syntax, readable TLS files, sane limits).
// Fails with kInvalidArgument naming the sink and the field.
Status validate(const SinkConfig& sink);

// Per-sink counters, cumulative since the router started (queue_* are gauges).
struct SinkCounters {
    std::string name;
    std::string type;
    uint64_t queued = 0;  // records accepted into the queue
    // Of those, records written to a disk queue (queue_dir; and fdatasync'd
    // with queue_fsync) so that they outlive the agent; 0 for memory queues.
    uint64_t persisted = 0;
    uint64_t sent = 0;      // records delivered (acknowledged by the transport)
    uint64_t retried = 0;   // records whose delivery failed and was retried
    uint64_t dropped = 0;   // records lost: overflow, rejected by the receiver, corrupt on disk
    uint64_t filtered = 0;  // records below min_severity / of a disabled kind
    uint64_t bytes = 0;     // payload bytes delivered
    uint64_t queue_records = 0;  // records waiting now (gauge)
    uint64_t queue_bytes = 0;    // bytes waiting now (gauge)
    bool healthy = true;         // last delivery attempt succeeded
    std::string last_error;      // "" when healthy
};

struct RouterOptions {
    HostInfo host;
    std::vector<SinkConfig> sinks;
    size_t inbox_max = 65536;  // records waiting for the router thread; more are dropped
};

// Fans records out to sinks. publish() only copies the record into an inbox;
// a router thread formats it per sink and appends it to the sink's queue,
// and one thread per sink delivers from its queue with exponential backoff.
// Thread-safe.
class AlertRouter {
  public:
    // Validates every sink, opens (and recovers) their queues and starts the
    // threads. Fails with kInvalidArgument (bad config, duplicate names) or
    // kIo (queue directory unusable). Sinks that cannot connect yet are not an
    // error: they queue and retry.
    static Result<std::unique_ptr<AlertRouter>> start(RouterOptions options);
    // Stops with a 2 s drain: what is still queued stays on disk for the next start.
    ~AlertRouter();
    AlertRouter(const AlertRouter&) = delete;
    AlertRouter& operator=(const AlertRouter&) = delete;

    // Never blocks; returns false (and counts a drop on every sink) when the inbox is full.
    bool publish(const Detection& detection);
    bool publish(const EnforcementOutcome& outcome);

    // Waits until every sink's queue is empty (all delivered) or `timeout`;
    // true when empty.
    bool flush(std::chrono::milliseconds timeout);

    // Stops accepting, gives the sinks up to `drain_timeout` to deliver, then
    // stops the threads and syncs the queues. Idempotent.
    void stop(std::chrono::milliseconds drain_timeout = std::chrono::seconds(2));

    std::vector<SinkCounters> counters() const;
    uint64_t inbox_dropped() const;

    struct Impl;

  private:
    explicit AlertRouter(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------
// One request and its answer over a connection of the agent's own, plain
// TCP or TLS, through libcurl (CONNECT_ONLY, curl_easy_send/recv): the
// daemon's probe of a suspected mining pool (verify.active,
// docs/detections.md). Here because curl stays inside siem/.

struct ExchangeRequest {
    std::string address;  // an IP address, never a name (nothing is resolved)
    uint16_t port = 0;
    bool tls = false;
    // TLS: the server name sent (SNI), the address's own connection when
    // "". Certificates are never verified: pools use self-signed ones, and
    // the answer is evidence, not a channel to trust.
    std::string server_name;
    std::string message;                      // sent once connected
    std::chrono::milliseconds timeout{3000};  // connecting, sending and reading together
    size_t max_answer = 512;                  // bytes kept; reading stops there
};

struct ExchangeResult {
    std::string answer;      // what the peer sent, up to max_answer
    bool closed = false;     // the peer closed the connection
    bool timed_out = false;  // the time ran out before a whole line came
    std::string error;       // the connection (or TLS handshake) failed; "" when it did not
};

// Connects, sends `message`, and reads until a line ends ('\n'), the peer
// closes, max_answer bytes came or the time runs out; then closes. Never
// throws; a failure is in ExchangeResult::error. Opens one connection, in
// the calling thread's network namespace.
ExchangeResult exchange_once(const ExchangeRequest& request);

}  // namespace gpuguard::siem
