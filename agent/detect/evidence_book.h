// The evidence book: what the correlator knows of every process and of the
// host, and what each event adds to it. The correlator (correlator_impl.h)
// decides which events to record and when to judge; conditions
// (conditions/condition.h) read the book, never write it. Time is the
// events' own ts_ns, so replay records what live recorded.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "evidence.h"
#include "gpuguard/state/pid_map.h"
#include "gpuguard/state/process_table.h"

namespace gpuguard::agent {

// Per process: the connect times and the peers kept, newest last.
inline constexpr size_t kMaxConnects = 64;
inline constexpr size_t kMaxPeers = 16;

// The protocol of a connection's first message sent and, for a TLS
// ClientHello, its server name, ALPN and JA4, into `peer`.
void read_first_bytes(Peer& peer, std::string_view data);
// What `from`'s first bytes said (protocol, SNI, ALPN, JA4), into `peer`.
void take_first_bytes(Peer& peer, const Peer& from);

// One telemetry sample of a GPU as unexplained_gpu_load judges it.
struct GpuLoadSample {
    uint64_t ts_ns = 0;
    std::optional<double> utilization;  // the whole GPU's; none under MIG or on a failed read
    // What the processes known to hold it account for: their compute
    // readings summed (a holder NVML left out of this interval counts with
    // its last reading, for 30 s). None when the sample cannot say: a
    // holder listed without any reading, or a backend that never reads
    // load per process while the sensor saw a process hold the GPU.
    std::optional<double> explained;
};

// What the correlator keeps of one GPU, for the conditions that judge a
// GPU rather than a process (evidence_gpus.cpp): its samples over time
// and, as the subject of its detections, pid 0 holding its device.
struct GpuLoad {
    std::string key;  // its first device number, "195:0"; "nvidia#0" without one
    uint32_t index = 0;
    std::string vendor;
    std::string model;
    std::vector<std::string> devices;   // "195:0", "195:255": who holds one holds it
    std::deque<GpuLoadSample> samples;  // newest last, bounded
    // Each listed process's last compute reading (ts_ns, percent), carried
    // over the intervals NVML leaves it out of.
    std::map<uint32_t, std::pair<uint64_t, double>> readings;
    bool attributes = false;  // its telemetry has read load per process
    // Of the latest sample: "4242 (python3) 31%", "77 (llama) holds it, no reading".
    std::vector<std::string> holders;
    ProcessInfo subject;       // pid 0, holding the GPU's device
    ProcessEvidence evidence;  // the subject's: empty
};

struct EvidenceBookOptions {
    size_t max_telemetry_samples = 1024;  // per process
    // Persistence written this long before a process was flagged still
    // counts as its own (persistence_after_detection).
    uint64_t persistence_lookback_ns = 600'000'000'000ull;
};

class EvidenceBook {
  public:
    EvidenceBook(const ProcessTable& table, EvidenceBookOptions options)
        : table_(table), options_(options) {}

    const ProcessTable& table() const { return table_; }
    ProcessEvidence& of(uint32_t pid) { return processes_[pid]; }
    const ProcessEvidence* find(uint32_t pid) const { return processes_.find(pid); }
    PidMap<ProcessEvidence>& processes() { return processes_; }
    const PidMap<ProcessEvidence>& processes() const { return processes_; }
    // The process exited: its evidence and its flag go.
    void forget(uint32_t pid);
    // Whether the sensor saw the process hold a GPU, as the correlator last
    // judged it (ProcessEvidence::held_gpu), and the pids that do: telemetry
    // and max_gpu_processes walk those, not every process the book knows.
    void set_held_gpu(uint32_t pid, bool held);
    const std::set<uint32_t>& gpu_holders() const { return gpu_holders_; }

    // What the process does (evidence_book.cpp).
    // A connect: its time, and the peer when it reached one off this host
    // (`pool_port`: a port signature lists the port).
    void record_connect(uint32_t pid, uint64_t ts_ns, const Connect& connect, bool pool_port);
    // The protocol of a connection's first bytes sent; false when it names
    // no peer still unknown (nothing changed).
    bool record_first_bytes(uint32_t pid, const NetPayload& payload);
    // A send on a connection to a loopback address (evidence_proxies.cpp):
    // a proxy handshake's request becomes a peer of the process's own (the
    // proxy's target, reached through it), the tunnelled stream's first
    // bytes that peer's. The peer when it is new or changed (`created`:
    // new), else null; false and null for any other payload.
    bool loopback_send(const NetPayload& payload) const;
    Peer* record_proxied_send(uint32_t pid, uint64_t ts_ns, const NetPayload& payload,
                              bool& created);
    // Who serves a client's loopback connection and that server's own
    // connections: with at most two, a forwarder's, they are the client's
    // peers (unless a handshake through it named the target). How many
    // peers it added (the newest ones).
    size_t record_loopback_peer(uint32_t pid, uint64_t ts_ns, const LoopbackPeer& link);
    void record_io(uint32_t pid, uint64_t ts_ns, const ProcessIo& io);
    void record_cpu(uint32_t pid, uint64_t ts_ns, const CpuUsage& usage);
    void record_flow(uint32_t pid, const Flow& flow);
    // Each GPU's reading and each process's usage sample. `find` (the
    // process table) places a process NVML does not place in a MIG GPU
    // instance by the instance's access node it holds open.
    using FindProcess = std::function<const ProcessInfo*(uint32_t pid)>;
    void record_telemetry(uint64_t ts_ns, const Telemetry& telemetry, const FindProcess& find = {});
    // The GPU's load and what its known holders explain of it
    // (evidence_gpus.cpp); the GPU's record, judged next.
    GpuLoad& record_gpu_load(uint64_t ts_ns, const Telemetry& telemetry);
    void record_hidden(uint32_t pid, uint64_t ts_ns, const HiddenProcess& hidden);
    void record_tamper(const Event& event, const AgentTamper& tamper);
    // A change to the agent's trusted files, with the writer's lineage's
    // flag as it stands now (evidence_modules.cpp).
    void record_trust_change(const Event& event, const TrustChange& change);
    // A kernel module load with what it saw of the host then (evidence_modules.cpp).
    void record_module_load(uint32_t pid, uint64_t ts_ns, const ModuleLoad& module);

    // Watched files (evidence_files.cpp). A change of a watched kind: true
    // when it writes persistence, which record_persistence() then gives
    // to the flagged processes it belongs to (their pids, to judge again).
    bool record_file_change(const Event& event, const FileChange& change);
    std::vector<uint32_t> record_persistence(const Event& event, const FileChange& change);
    // A newly flagged process takes the persistence written in the look-back window.
    bool attribute_recent_persistence(uint32_t pid, uint64_t ts_ns);

    // Flags (evidence_modules.cpp): a rule raised a detection of the process
    // at `severity`; at warning or above it is flagged until it exits.
    void flag(const rules::CorrelationRule& rule, const ProcessInfo& info, Severity severity);
    // The flagged process nearest `pid` in its parent chain (itself first); "" none.
    // `beyond_trust`: only flags a rule without a trust_change condition set
    // (a trust rule's own warning does not make the writer's next change critical).
    std::string flagged_lineage(uint32_t pid, bool beyond_trust = false) const;
    // The miners (Flag::miner) running on the host but `pid`; "" when none.
    std::string miners_on_host(uint32_t pid) const;

    // The GPUs the process holds, with the latest reading of each.
    std::vector<DetectionGpu> gpus_of(const ProcessInfo& info) const;
    // The latest reading of the GPU a node ("195:0", a MIG access node)
    // reaches; null when no telemetry named it.
    const GpuTelemetry* gpu_at(std::string_view device) const {
        const auto found = gpu_by_device_.find(device);
        return found == gpu_by_device_.end() ? nullptr : &found->second;
    }

  private:
    // The first message a client sent on a loopback flow that was no proxy
    // handshake, kept and given to a peer a forwarder on that port carries.
    Peer* forwarded_first_bytes(ProcessEvidence& evidence, Peer spoken);

    std::vector<uint32_t> ancestry(uint32_t pid) const;
    bool related(uint32_t pid, const PersistenceWrite& write) const;

    const ProcessTable& table_;
    EvidenceBookOptions options_;
    PidMap<ProcessEvidence> processes_;
    PidMap<Flag> flagged_;
    std::set<uint32_t> gpu_holders_;                                  // pids whose held_gpu is set
    std::map<std::string, GpuTelemetry, std::less<>> gpu_by_device_;  // "195:0" -> latest reading
    // The MIG GPU instance each process of a GPU's last reading runs in
    // (GPU index -> pid -> GI id).
    std::map<uint32_t, std::map<uint32_t, uint32_t>> mig_instances_by_gpu_;
    std::deque<PersistenceWrite> recent_persistence_;        // newest last, within the look-back
    std::map<std::string, GpuLoad, std::less<>> gpu_loads_;  // by GpuLoad::key
};

}  // namespace gpuguard::agent
