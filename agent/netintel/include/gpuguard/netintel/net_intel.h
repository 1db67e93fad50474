// Network intelligence: turns the sensor's payload samples (NetPayload
// events) into what the correlator can judge. DNS answers fill an IP -> name
// cache that names the peers of later connects (Connect::domain); Stratum
// sessions (gpuguard/netintel/stratum.h) become Stratum events. Runs in the live
// pipeline before the journal, so the annotated connects and the Stratum
// events are journaled and replay judges exactly what live judged.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/netintel/dns.h"
#include "gpuguard/netintel/stratum.h"

namespace gpuguard::agent {

struct NetIntelOptions {
    // A session's progress (shares, hash rate) is reported at most this
    // often; recognition, new methods and difficulty changes at once.
    uint64_t report_interval_ns = 10'000'000'000ull;
    size_t max_sessions = 4096;               // connections followed at once
    uint32_t max_unrecognised_messages = 16;  // a flow is dropped after these without a match
    size_t max_dns_entries = 16384;
    // Keep the addresses DNS answers give for take_resolutions() (the live
    // agent's watch list of pool addresses); at most this many wait.
    size_t max_pending_resolutions = 0;
};

struct NetIntelStats {
    uint64_t payloads = 0;
    uint64_t dns_answers = 0;     // DNS responses parsed
    uint64_t dns_errors = 0;      // DNS payloads that did not parse
    uint64_t connects_named = 0;  // connects annotated with a domain
    uint64_t sessions_recognised = 0;
    uint64_t stratum_events = 0;
};

// One mining session, for `gpuguard ps` and /metrics.
struct StratumSessionView {
    uint32_t pid = 0;
    Stratum stratum;
};

class NetIntel {
  public:
    explicit NetIntel(NetIntelOptions options = {})
        : options_(options), dns_(options.max_dns_entries) {}

    // Applies `event`: a NetPayload feeds the DNS cache or a Stratum session,
    // a Connect gets its domain from the cache (in place), an Exit forgets the
    // process's sessions. Stratum events it derives are appended to `derived`
    // (same task, same time as the payload that caused them).
    void process(Event& event, std::vector<Event>& derived);
    // The same in two halves, so a caller holding a const event copies it
    // only to name a connect: observe() takes payloads and exits (deriving
    // Stratum events), name_of() is the domain a connect gets, if any.
    void observe(const Event& event, std::vector<Event>& derived);
    std::optional<std::string> name_of(const Connect& connect, uint64_t ts_ns);

    // The recognised sessions, with the payload lines' wallets redacted
    // (stratum::redact_wallets): for outputs, not for signature matching.
    std::vector<StratumSessionView> sessions() const;
    const dns::Cache& dns_cache() const { return dns_; }
    // Addresses DNS answers gave since the last call, oldest first (none
    // unless options.max_pending_resolutions); the oldest are dropped past it.
    std::vector<dns::NamedAddress> take_resolutions() { return std::exchange(resolutions_, {}); }
    const NetIntelStats& stats() const { return stats_; }

  private:
    struct Flow {
        stratum::Session session;
        std::string remote_address;
        uint16_t remote_port = 0;
        std::string domain;
        uint32_t messages = 0;
        uint64_t last_report_ns = 0;
        uint64_t last_seen_ns = 0;
        bool reported_rate = false;  // a report carried a hash rate
    };

    void on_payload(const Event& event, const NetPayload& payload, std::vector<Event>& derived);
    void on_dns(const Event& event, const NetPayload& payload);
    void evict();

    NetIntelOptions options_;
    dns::Cache dns_;
    std::map<std::pair<uint32_t, uint64_t>, Flow> flows_;  // (pid, flow)
    NetIntelStats stats_;
    std::vector<dns::NamedAddress> resolutions_;
};

}  // namespace gpuguard::agent
