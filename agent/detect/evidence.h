// What the correlator knows of one process (ProcessEvidence) and of the
// host (EvidenceBook, evidence_book.h): the records the events left, kept
// so that conditions (conditions/condition.h) can judge them. Private to
// the detect room.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/text.h"
#include "gpuguard/events/event.h"
#include "gpuguard/rules/correlation.h"

namespace gpuguard::agent {

// "a, b, c" for evidence: the first eight of a long list and how many more.
inline std::string list_of(const std::vector<std::string>& items) {
    constexpr size_t kMaxListed = 8;
    if (items.size() <= kMaxListed) return join(items, ", ");
    return join(std::vector<std::string>(items.begin(), items.begin() + kMaxListed), ", ") +
           " and " + std::to_string(items.size() - kMaxListed) + " more";
}

// Signature conditions of rule i (i < 64) a signature id meets in a field:
// bit i of `matches` is known once bit i of `judged` is set. One per
// (field, id), shared by every hit of it: a host sees the same few again
// and again. A new rule list resets them, a new rule set drops them.
struct Verdict {
    uint64_t judged = 0;
    uint64_t matches = 0;
};

// A signature of the pack matched something of the process.
struct Hit {
    rules::EvidenceField field;
    std::string id;
    double confidence = 0;
    std::string action;  // the signature's action in miner-rules.yaml
    uint64_t ts_ns = 0;
    std::string detail;          // the matched value
    Verdict* verdict = nullptr;  // kept by the correlator per (field, id)
};

// The pipes gpu_pipe_mix judges, in percent; negative where not read. Kept
// with every usage sample of every GPU process, so four floats rather than
// the event's eight optionals.
struct PipeReading {
    float integer = -1;
    float dram = -1;
    float tensor = -1;
    float fp = -1;  // the busiest of FP16, FP32 and FP64 read
    bool any() const { return integer >= 0 || dram >= 0 || tensor >= 0 || fp >= 0; }
};

struct UsageSample {
    uint64_t ts_ns = 0;
    std::optional<uint64_t> memory_bytes;
    std::optional<double> compute_percent;
    // The whole GPU's power draw then, in percent of its limit, where its
    // telemetry reads both.
    std::optional<double> gpu_power_percent{};
    // The GPU's pipes then (gpu_pipe_mix), where its telemetry reads them,
    // and how many processes NVML listed on it: on a GPU in MIG mode, the
    // process's GPU instance's and the processes in that instance.
    PipeReading gpu_pipes{};
    uint16_t gpu_processes = 0;
};

// A cpu_usage reading: the cores' worth used over the interval ending at ts_ns.
struct CpuSample {
    uint64_t ts_ns = 0;
    uint64_t interval_ns = 0;
    double cores = 0;
    uint32_t threads = 0;
};

// A process_io reading: cumulative counters, recorded when one moved.
struct IoSample {
    uint64_t ts_ns = 0;
    ProcessIo counters;
};

// An outbound connection and what was first sent on it (opaque_peer).
struct Peer {
    uint64_t ts_ns = 0;
    std::string address;
    uint16_t port = 0;
    bool named = false;      // an observed DNS answer named the address
    bool pool_port = false;  // a port signature lists the port
    std::string protocol;    // of the first bytes sent: "tls", "http", "ssh", "json", "opaque";
                             // "" none seen
    // Of a TLS ClientHello in those bytes (gpuguard/netintel/tls_hello.h).
    std::string server_name{};  // SNI; "" none
    std::string alpn{};         // offered protocols, comma-separated; "" none
    std::string ja4{};          // "" when the hello was cut short
    // The loopback proxy it was reached through: "the SOCKS5 proxy at
    // 127.0.0.1:1080"; "" a direct connection.
    std::string via{};
    uint64_t via_flow = 0;     // that connection's NetPayload::flow, for a handshake read
    uint16_t via_port = 0;     // the loopback port it went through
    bool established = false;  // found open (in /proc), not seen made
};

// The agent's own probe of one of the process's peers (pool_probe events).
struct ProbeSeen {
    uint64_t ts_ns = 0;
    PoolProbe probe;
};

// A connection to a loopback address: its first messages sent, read as a
// proxy handshake (gpuguard/netintel/proxy_request.h).
struct LoopbackFlow {
    uint64_t flow = 0;  // NetPayload::flow
    std::string proxy;  // "127.0.0.1:1080"
    std::vector<std::string> sends;
    bool resolved = false;     // the request was read: peers holds its target
    bool tunnel_read = false;  // and the tunnelled stream's first bytes
    size_t tunnel_message = 0, tunnel_offset = 0;
};

// A kernel module the process loaded, with the host as it was at the load.
// A gpu_fault event's Xid, kept for the process that was on the GPU.
struct FaultSeen {
    uint64_t ts_ns = 0;
    GpuFault fault;
};
inline constexpr size_t kMaxGpuFaultsPerProcess = 32;

struct ModuleSeen {
    uint64_t ts_ns = 0;
    ModuleLoad module;
    std::vector<std::string> gpu_processes;  // "PID COMM" of each GPU process running
    std::string flagged;  // the flagged process of its lineage and why; "" when none
    std::string miners;   // the other miners flagged on the host; "" when none
};

// A process with a detection at warning or above (module_load's
// flagged_lineage, miner_on_host), until it exits.
struct Flag {
    std::string comm;
    std::vector<std::string> rules;  // ids of the rules that flagged it, first first
    bool miner = false;              // a rule of ATT&CK T1496 (Resource Hijacking) flagged it
    bool beyond_trust = false;       // a rule without a trust_change condition flagged it
};

// A watched file the process changed (file_change events with a kind).
struct FileRecord {
    uint64_t ts_ns = 0;
    std::string operation;
    std::string kind;
    std::string path;
    std::vector<std::string> libraries;
};

// Persistence written on the host (cron, systemd, shell_rc, ssh_keys),
// with the writer's ancestry then: whose it is may be known only later.
struct PersistenceWrite {
    uint64_t ts_ns = 0;
    uint32_t writer = 0;
    std::string comm;
    std::string operation;
    std::string kind;
    std::string path;
    std::vector<uint32_t> chain;  // writer, parent, ... up to (not including) pid 1
};

// A change to the agent's trusted files the process made (trust_change).
struct TrustRecord {
    uint64_t ts_ns = 0;
    std::string stage;   // TrustChange::stage
    std::string writer;  // TrustChange::writer
    bool allowlist_added = false, action_lowered = false, rule_disabled = false;
    // The flagged process of its lineage when it wrote (a flag a trust rule
    // set left out); "" when none.
    std::string flagged;
    std::string detail;  // the evidence's words: who changed what, and the diff
};

struct Tamper {
    uint64_t ts_ns = 0;
    std::string kind;    // AgentTamper::kind
    std::string detail;  // the evidence's words
};

// An LD_PRELOAD library or LD_LIBRARY_PATH directory that nothing
// vouches for, and what makes it worse (library_injection).
struct InjectedLibrary {
    std::string variable;  // LD_PRELOAD, LD_LIBRARY_PATH
    std::string path;      // as written
    std::string where;     // its real path, or the written one with its spelling undone
    std::vector<rules::LibrarySign> signs;
    std::string detail;           // for the evidence
    bool preloaded_file = false;  // an LD_PRELOAD library that exists: YARA scans it
};

// The latest reading of one GPU device (by "major:minor").
struct GpuTelemetry {
    uint32_t index = 0;
    std::string vendor;
    std::optional<double> utilization_percent;
    std::vector<ProcessGpuUsage> processes;  // one per pid, the last reading wins
    // For a MIG access node's entry, the GPU instance it opens.
    std::optional<uint32_t> node_gpu_instance;
};

struct ProcessEvidence {
    // What the correlator did about the process (its requests, its passes).
    bool matched = false;           // process and command line matched for the current image
    std::string matched_comm;       // the name they were matched with (prctl can change it)
    bool dirty = true;              // evidence changed since the last evaluation
    bool scan_asked = false;        // a YARA scan of the current image was requested or came
    bool exec_seen = false;         // the current image came with an exec (not a snapshot)
    bool config_asked = false;      // its config files were requested (current image)
    bool config_asked_gpu = false;  // ... since it holds a GPU
    bool watch_asked = false;       // a WatchRequest was made for it
    // "ADDRESS:PORT" of each peer a ProbeRequest was made for (bounded).
    std::vector<std::string> probes_asked;
    bool flagged = false;  // a detection of it was raised

    // What it is.
    bool held_gpu = false;
    uint64_t first_gpu_ns = 0;
    std::string sha256;         // of the executable, from its exe_scan
    uint64_t scanned_ns = 0;    // when that exe_scan came
    std::string exe_path;       // what that exe_scan read
    bool exe_yara_hit = false;  // a YARA rule hit the executable
    // What the package database says of it (ExeScan::package_check), its owner.
    std::string package_check;
    // ExeScan::location_check: "refused: ..." when a look-alike location's
    // name was found untrue.
    std::string location_check;
    std::string package;
    // What the agent could not read of the current image (`unreadable`):
    // why its executable was not scanned ("" when it was, or it was gone),
    // and the configuration files it names that could not be read.
    std::string exe_unread;
    uint64_t exe_unread_ns = 0;
    std::vector<std::pair<uint64_t, std::string>> configs_unread;  // (ts_ns, detail), bounded
    std::vector<Hit> hits;
    std::vector<std::string> disguise_ids;  // process signatures on the exe, none on comm
    std::optional<ProcessEnv> env;          // at its first GPU use, or its last exec since
    uint64_t env_ns = 0;
    std::vector<InjectedLibrary> libraries;  // of env: what nothing vouches for
    // Its job's or pod's GPUs, read at its first GPU use (a workload event).
    std::optional<Workload> workload;

    // What it does, newest last, bounded.
    std::vector<UsageSample> usage;
    std::vector<uint64_t> connect_ts;
    std::vector<IoSample> io;
    std::vector<CpuSample> cpu;             // while it is busy, and the reading when it stops
    std::optional<GpuLibraries> gpu_stack;  // at its first GPU use
    std::optional<DetectionPeer> peer;      // last connect with port/domain evidence
    std::vector<Peer> peers;                // outbound, not loopback
    // First bytes of flows no connect named yet: a flow found established
    // later (its process turned busy after it had sent them) takes them.
    std::vector<Peer> early_first_bytes;
    // Its connections to loopback proxies, until each request was read.
    std::vector<LoopbackFlow> loopback_flows;
    // The first message of each loopback flow that was no handshake (port
    // and what it spoke), for a forwarder's connections to take.
    std::vector<Peer> loopback_first_bytes;
    // The latest flow event of each of its TCP flows, newest last, bounded
    // (kMaxPeers): their shapes (flow_shape.h).
    std::vector<Flow> flows;
    std::optional<double> hash_rate;  // fastest estimate of its mining sessions, H/s
    uint64_t hash_rate_ns = 0;        // when it was reported
    std::optional<double> hash_rate_low, hash_rate_high;  // its 95 % interval
    // The latest hidden_process event: how it is hidden (hidden_from_proc).
    std::string hidden;
    uint64_t hidden_ns = 0;
    std::vector<ModuleSeen> modules;
    std::vector<FileRecord> files;
    std::vector<PersistenceWrite> persistence;  // attributed to it since (or just before) flagged
    std::vector<Tamper> tampers;                // what it did to the agent, oldest first
    std::vector<TrustRecord> trust_changes;  // what it changed of the agent's trust, oldest first
    std::vector<ProbeSeen> probes;           // the agent's probes of its peers, bounded
    // The Xids raised on a GPU while it was on it (gpu_fault events), oldest
    // first, bounded (kMaxGpuFaultsPerProcess).
    std::vector<FaultSeen> gpu_faults;
};

}  // namespace gpuguard::agent
