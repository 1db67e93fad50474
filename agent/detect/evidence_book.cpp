// What events add to the evidence book: connections and what was first sent
// on them, I/O counters, GPU readings, hiding and tampering. Module loads and
// flags are evidence_modules.cpp's, watched files evidence_files.cpp's.
#include "evidence_book.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <utility>

#include "gpuguard/common/text.h"
#include "gpuguard/events/agent_tamper.h"
#include "gpuguard/netintel/tls_hello.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxTampers = 16;  // per process: a signal storm is one detection's worth

// The protocol of a connection's first message, from its first bytes:
// "tls" (a handshake record), "http", "ssh", "json" (JSON-RPC, Stratum's
// family: judged by net_intel), else "opaque".
std::string first_bytes_protocol(std::string_view data) {
    if (data.size() >= 3 && data[0] == 0x16 && data[1] == 0x03) return "tls";
    // A record past the handshake (change cipher spec, alert, application
    // data): a connection found established, sampled from the middle.
    if (data.size() >= 5 && data[0] >= 0x14 && data[0] <= 0x17 && data[1] == 0x03 &&
        data[2] <= 0x04) {
        return "tls";
    }
    if (data.starts_with("SSH-")) return "ssh";
    if (data.starts_with("HTTP/1.") || data.starts_with("HTTP/2")) return "http";  // a response
    if (!data.empty() && (data.front() == '{' || data.front() == '[')) return "json";
    for (std::string_view method : {"GET ", "POST ", "PUT ", "HEAD ", "DELETE ", "PATCH ",
                                    "OPTIONS ", "CONNECT ", "PRI * HTTP/2"}) {
        if (data.starts_with(method)) return "http";
    }
    return "opaque";
}

// The MIG GPU instance each listed process runs in: NVML's word, else the
// one instance whose access node (/dev/nvidia-caps) the process holds open
// (none when it holds several instances' nodes).
std::map<uint32_t, uint32_t> instances_of(const Telemetry& telemetry,
                                          const EvidenceBook::FindProcess& find) {
    std::map<uint32_t, uint32_t> instances;
    for (const ProcessInstance& each : telemetry.process_instances) {
        instances[each.pid] = each.gpu_instance;
    }
    if (telemetry.mig_nodes.empty() || !find) return instances;
    for (const ProcessGpuUsage& usage : telemetry.processes) {
        if (instances.contains(usage.pid)) continue;
        const ProcessInfo* info = find(usage.pid);
        if (!info) continue;
        std::optional<uint32_t> held;
        bool several = false;
        for (const GpuHandle& gpu : info->gpus) {
            const std::string number = std::to_string(gpu.major) + ":" + std::to_string(gpu.minor);
            for (const MigNode& node : telemetry.mig_nodes) {
                if (node.device != number) continue;
                several |= held && *held != node.gpu_instance;
                held = node.gpu_instance;
            }
        }
        if (held && !several) instances[usage.pid] = *held;
    }
    return instances;
}

// The MIG GPU instance `pid` runs in, with pipes read for it, and how many
// listed processes run in it; none when either is unknown.
std::optional<std::pair<const MigPipes*, uint16_t>> slice_of(
    const Telemetry& telemetry, const std::map<uint32_t, uint32_t>& instances, uint32_t pid) {
    const auto own = instances.find(pid);
    if (own == instances.end()) return std::nullopt;
    const auto slice =
        std::find_if(telemetry.mig_pipes.begin(), telemetry.mig_pipes.end(),
                     [&](const MigPipes& each) { return each.gpu_instance == own->second; });
    if (slice == telemetry.mig_pipes.end()) return std::nullopt;
    const auto in_slice = std::count_if(instances.begin(), instances.end(), [&](const auto& each) {
        return each.second == own->second;
    });
    return std::pair{&*slice, static_cast<uint16_t>(std::min<long>(in_slice, 65535))};
}

PipeReading pipe_reading(const GpuPipes& pipes) {
    const auto value = [](const std::optional<double>& percent) {
        return percent ? static_cast<float>(*percent) : -1.0f;
    };
    PipeReading reading{value(pipes.integer_active_percent), value(pipes.dram_active_percent),
                        value(pipes.tensor_active_percent), -1};
    for (const auto* fp :
         {&pipes.fp16_active_percent, &pipes.fp32_active_percent, &pipes.fp64_active_percent}) {
        reading.fp = std::max(reading.fp, value(*fp));
    }
    return reading;
}

}  // namespace

void read_first_bytes(Peer& peer, std::string_view data) {
    peer.protocol = first_bytes_protocol(data);
    if (const auto hello = parse_tls_client_hello(data)) {
        peer.server_name = hello->server_name;
        peer.alpn = join(hello->alpn, ",");
        peer.ja4 = hello->ja4;
    }
}

void take_first_bytes(Peer& peer, const Peer& from) {
    peer.protocol = from.protocol;
    peer.server_name = from.server_name;
    peer.alpn = from.alpn;
    peer.ja4 = from.ja4;
}

void EvidenceBook::forget(uint32_t pid) {
    processes_.erase(pid);
    flagged_.erase(pid);
    gpu_holders_.erase(pid);
}

void EvidenceBook::set_held_gpu(uint32_t pid, bool held) {
    processes_[pid].held_gpu = held;
    if (held) {
        gpu_holders_.insert(pid);
    } else {
        gpu_holders_.erase(pid);
    }
}

void EvidenceBook::record_connect(uint32_t pid, uint64_t ts_ns, const Connect& connect,
                                  bool pool_port) {
    ProcessEvidence& evidence = processes_[pid];
    // A flow found established (read from /proc when the process turned
    // busy) is not a new connection, and is one peer however often found.
    // A loopback connect is no connection off the host: where a proxy was
    // asked to go counts instead (evidence_proxies.cpp).
    if (connect.loopback) return;
    if (connect.established) {
        const bool known =
            std::any_of(evidence.peers.begin(), evidence.peers.end(), [&](const Peer& peer) {
                return peer.port == connect.port && peer.address == connect.address;
            });
        if (known) return;
    } else {
        evidence.connect_ts.push_back(ts_ns);
        if (evidence.connect_ts.size() > kMaxConnects) {
            evidence.connect_ts.erase(evidence.connect_ts.begin());
        }
    }
    const bool reached = connect.result == 0 || connect.result == -115 /* EINPROGRESS */;
    if (!reached || connect.loopback) return;
    evidence.peers.push_back(
        Peer{ts_ns, connect.address, connect.port, !connect.domain.empty(), pool_port, ""});
    evidence.peers.back().established = connect.established;
    // What it sent before this connect record (a flow found established).
    auto& early = evidence.early_first_bytes;
    if (const auto sent = std::find_if(early.begin(), early.end(),
                                       [&](const Peer& peer) {
                                           return peer.port == connect.port &&
                                                  peer.address == connect.address;
                                       });
        sent != early.end()) {
        Peer& peer = evidence.peers.back();
        take_first_bytes(peer, *sent);
        early.erase(sent);
    }
    if (evidence.peers.size() > kMaxPeers) evidence.peers.erase(evidence.peers.begin());
    evidence.dirty = true;
}

bool EvidenceBook::record_first_bytes(uint32_t pid, const NetPayload& payload) {
    if (payload.direction != NetPayload::Direction::kOut || payload.seq != 0 || payload.dns) {
        return false;
    }
    ProcessEvidence& evidence = processes_[pid];
    const auto read_into = [&](Peer& peer) { read_first_bytes(peer, payload.data); };
    for (Peer& peer : evidence.peers) {
        if (peer.protocol.empty() && peer.port == payload.remote_port &&
            peer.address == payload.remote_address) {
            read_into(peer);
            evidence.dirty = true;
            return true;
        }
    }
    // No connect named the flow yet: kept for one found established later.
    Peer early;
    early.address = payload.remote_address;
    early.port = payload.remote_port;
    read_into(early);
    evidence.early_first_bytes.push_back(std::move(early));
    if (evidence.early_first_bytes.size() > kMaxPeers) {
        evidence.early_first_bytes.erase(evidence.early_first_bytes.begin());
    }
    return false;
}

void EvidenceBook::record_io(uint32_t pid, uint64_t ts_ns, const ProcessIo& io) {
    ProcessEvidence& evidence = processes_[pid];
    evidence.io.push_back(IoSample{ts_ns, io});
    if (evidence.io.size() > options_.max_telemetry_samples) evidence.io.erase(evidence.io.begin());
    evidence.dirty = true;
}

void EvidenceBook::record_cpu(uint32_t pid, uint64_t ts_ns, const CpuUsage& usage) {
    ProcessEvidence& evidence = processes_[pid];
    evidence.cpu.push_back(CpuSample{ts_ns, usage.interval_ns, usage.cores(), usage.threads});
    if (evidence.cpu.size() > options_.max_telemetry_samples) {
        evidence.cpu.erase(evidence.cpu.begin());
    }
    evidence.dirty = true;
}

void EvidenceBook::record_flow(uint32_t pid, const Flow& flow) {
    ProcessEvidence& evidence = processes_[pid];
    std::erase_if(evidence.flows, [&](const Flow& known) { return known.flow == flow.flow; });
    evidence.flows.push_back(flow);
    if (evidence.flows.size() > kMaxPeers) evidence.flows.erase(evidence.flows.begin());
    evidence.dirty = true;
}

void EvidenceBook::record_telemetry(uint64_t ts_ns, const Telemetry& telemetry,
                                    const FindProcess& find) {
    const auto instances = instances_of(telemetry, find);
    // The GPU's reading under each of its nodes, MIG access nodes too.
    const auto update = [&](const std::string& device, std::optional<uint32_t> node_instance) {
        GpuTelemetry& reading = gpu_by_device_[device];  // updated in place
        reading.index = telemetry.gpu_index;
        reading.vendor = telemetry.vendor;
        reading.utilization_percent = telemetry.utilization_percent;
        reading.processes.clear();
        for (const auto& usage : telemetry.processes) {
            auto same =
                std::find_if(reading.processes.begin(), reading.processes.end(),
                             [&](const ProcessGpuUsage& known) { return known.pid == usage.pid; });
            if (same != reading.processes.end()) {
                *same = usage;
            } else {
                reading.processes.push_back(usage);
            }
        }
        reading.node_gpu_instance = node_instance;
    };
    for (const auto& device : telemetry.devices) update(device, std::nullopt);
    for (const auto& node : telemetry.mig_nodes) update(node.device, node.gpu_instance);
    mig_instances_by_gpu_[telemetry.gpu_index] = instances;
    std::optional<double> power_percent;
    if (telemetry.power_watts && telemetry.power_limit_watts && *telemetry.power_limit_watts > 0) {
        power_percent = 100.0 * *telemetry.power_watts / *telemetry.power_limit_watts;
    }
    const PipeReading pipes = pipe_reading(telemetry.pipes);
    const auto listed = static_cast<uint16_t>(std::min<size_t>(telemetry.processes.size(), 65535));
    for (const auto& usage : telemetry.processes) {
        ProcessEvidence& evidence = processes_[usage.pid];
        // On a GPU in MIG mode a process runs in one GPU instance: its
        // slice's pipes and the processes in that slice, where read.
        PipeReading own_pipes = pipes;
        uint16_t sharing = listed;
        if (const auto slice = slice_of(telemetry, instances, usage.pid)) {
            own_pipes = pipe_reading(slice->first->pipes);
            sharing = slice->second;
        }
        evidence.usage.push_back(UsageSample{ts_ns, usage.memory_bytes, usage.compute_percent,
                                             power_percent, own_pipes, sharing});
        if (evidence.usage.size() > options_.max_telemetry_samples) {
            evidence.usage.erase(evidence.usage.begin());
        }
        evidence.dirty = true;
    }
}

void EvidenceBook::record_hidden(uint32_t pid, uint64_t ts_ns, const HiddenProcess& hidden) {
    ProcessEvidence& evidence = processes_[pid];
    std::string detail = "not listed by libc's readdir of /proc, listed by " + hidden.seen_by;
    if (hidden.mechanisms.empty()) {
        detail += "; hiding mechanism not found";
    } else {
        detail += "; " + join(hidden.mechanisms, "; ");
    }
    if (detail != evidence.hidden) evidence.dirty = true;
    evidence.hidden = std::move(detail);
    evidence.hidden_ns = ts_ns;
}

void EvidenceBook::record_tamper(const Event& event, const AgentTamper& tamper) {
    ProcessEvidence& evidence = processes_[event.task.pid];
    if (evidence.tampers.size() >= kMaxTampers) evidence.tampers.erase(evidence.tampers.begin());
    evidence.tampers.push_back(
        Tamper{event.ts_ns, tamper.kind, describe_agent_tamper(event.task, tamper)});
    evidence.dirty = true;
}

std::vector<DetectionGpu> EvidenceBook::gpus_of(const ProcessInfo& info) const {
    std::vector<DetectionGpu> gpus;
    for (const auto& handle : info.gpus) {
        const bool seen = std::any_of(gpus.begin(), gpus.end(), [&](const DetectionGpu& known) {
            return known.major == handle.major && known.minor == handle.minor;
        });
        if (seen) continue;
        DetectionGpu gpu;
        gpu.major = handle.major;
        gpu.minor = handle.minor;
        char device[24];  // "major:minor", the key of gpu_by_device_
        char* end = std::to_chars(device, device + 10, handle.major).ptr;
        *end++ = ':';
        end = std::to_chars(end, device + sizeof(device), handle.minor).ptr;
        const auto found = gpu_by_device_.find(std::string_view(device, end - device));
        if (found != gpu_by_device_.end()) {
            const GpuTelemetry& reading = found->second;
            gpu.index = static_cast<int>(reading.index);
            gpu.vendor = reading.vendor;
            gpu.utilization_percent = reading.utilization_percent;
            const auto usage =
                std::find_if(reading.processes.begin(), reading.processes.end(),
                             [&](const ProcessGpuUsage& known) { return known.pid == info.pid; });
            if (usage != reading.processes.end()) {
                gpu.memory_used_bytes = usage->memory_bytes;
                gpu.process_utilization_percent = usage->compute_percent;
            }
            gpu.mig_gpu_instance = reading.node_gpu_instance;
            if (const auto gpu_instances = mig_instances_by_gpu_.find(reading.index);
                !gpu.mig_gpu_instance && gpu_instances != mig_instances_by_gpu_.end()) {
                const auto in = gpu_instances->second.find(info.pid);
                if (in != gpu_instances->second.end()) gpu.mig_gpu_instance = in->second;
            }
        }
        gpus.push_back(std::move(gpu));
    }
    return gpus;
}

}  // namespace gpuguard::agent
