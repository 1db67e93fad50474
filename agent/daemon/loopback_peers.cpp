// Loopback peers: a GPU holder or a watched (busy) process that connects to
// a loopback address, or had such a connection when it turned busy, may be
// reaching the world through a proxy or forwarder on this host. The agent
// finds the process at the other end (the one holding the socket that
// accepted the connection, else the one listening on that port, by its
// inode in /proc) and reports it with its established connections off the
// host as a loopback_peer event, journaled and judged
// (evidence_proxies.cpp): a forwarder's connection is its client's peer.
#include <unistd.h>

#include "agent_impl.h"
#include "gpuguard/common/ip_address.h"
#include "gpuguard/state/proc_sockets.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxUpstreams = 8;

}  // namespace

void Agent::Impl::note_loopback_connect(const Event& event) {
    const auto* connect = std::get_if<Connect>(&event.data);
    if (!connect || !connect->loopback || connect->established) return;
    const bool reached = connect->result == 0 || connect->result == -115 /* EINPROGRESS */;
    if (!reached || !(connect->gpu_holder || connect->watched_tgid)) return;
    if (loopback_linked.contains({event.task.pid, connect->port})) return;
    pending_loopback.emplace_back(event.task.pid, connect->port);
}

void Agent::Impl::link_loopback_peers(uint64_t now_ns) {
    auto pending = std::move(pending_loopback);
    pending_loopback.clear();
    for (const auto& [pid, port] : pending) link_loopback_peer(pid, port, false, now_ns);
}

void Agent::Impl::link_loopback_peer(uint32_t client, uint16_t port, bool established,
                                     uint64_t now_ns) {
    // Once per client and port: a miner reconnecting to its proxy is the same link.
    if (!loopback_linked.emplace(client, port).second) return;
    const ProcessInfo* info = table->find(client);
    if (!info || info->exited) return;
    const auto server = server_of(options.proc_root, client, port);
    if (!server || *server == client || *server == static_cast<uint32_t>(::getpid())) return;
    LoopbackPeer link;
    link.port = port;
    link.server_pid = *server;
    link.established = established;
    if (const ProcessInfo* serving = table->find(*server)) {
        link.server_comm = serving->comm;
        link.server_exe = serving->exe;
    }
    for (const Connect& upstream : established_connects(options.proc_root, *server)) {
        if (link.server_upstreams.size() == kMaxUpstreams) break;
        link.server_upstreams.push_back(endpoint_text(upstream.address, upstream.port));
    }
    logger("agent")->debug("loopback peer: pid {} port {} served by pid {} ({}), {} upstream(s)",
                           client, port, link.server_pid, link.server_comm,
                           link.server_upstreams.size());
    Event event;
    event.ts_ns = now_ns;
    event.task = task_of(*info);
    event.data = std::move(link);
    on_event(event);
}

}  // namespace gpuguard::agent
