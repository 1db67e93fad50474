// opaque_peer: true — the process has an outbound connection nothing
// vouches for: to an address no observed DNS answer named whose first bytes
// sent were TLS or no protocol gpuguard recognises, or to a miner's port
// (a port signature lists it) unless what it sent there was recognised.
// A DNS answer alone does not vouch: a named peer whose flow has a pool's
// shape (flow_shape.h) counts, what it sent TLS, unrecognised or unseen.
#include "condition.h"
#include "flow_shape.h"
#include "gpuguard/common/ip_address.h"

namespace gpuguard::agent {
namespace {

class OpaquePeer final : public Condition {
  public:
    std::string_view name() const override { return "opaque_peer"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        for (const Peer& peer : context.evidence.peers) {
            // What it said must be seen to be opaque, unless the port is a miner's.
            const auto why = unvouched(context.evidence, peer);
            if (!why) continue;
            const std::optional<std::string>& shape = why->shape;
            std::string detail = endpoint_text(peer.address, peer.port);
            if (shape) {
                detail += peer.named ? " (a DNS answer named it, but its flow has a pool's shape)"
                                     : " (its flow has a pool's shape)";
            } else {
                detail += peer.named       ? " (a miner's port)"
                          : peer.pool_port ? " (no DNS answer named it; a miner's port)"
                                           : " (no DNS answer named it)";
            }
            detail += peer.protocol.empty()    ? ", nothing sent captured"
                      : peer.protocol == "tls" ? ", TLS from the first byte"
                                               : ", a protocol gpuguard does not recognise";
            // What its ClientHello said, when the first bytes held one.
            if (!peer.server_name.empty()) detail += ", server name " + peer.server_name;
            if (!peer.via.empty()) detail += ", through " + peer.via;
            if (!peer.ja4.empty()) {
                detail += peer.alpn.empty() ? ", no ALPN" : ", ALPN " + peer.alpn;
                detail += ", JA4 " + peer.ja4;
            }
            if (shape) detail += "; " + *shape;
            in.extra.push_back(Evidence{context.ts_ns, "event", "connect", "", "peer", detail});
            return true;
        }
        return false;
    }
};

}  // namespace

std::unique_ptr<const Condition> conditions::opaque_peer(const rules::CorrelationRule& rule) {
    if (!rule.opaque_peer) return nullptr;
    return std::make_unique<OpaquePeer>();
}

}  // namespace gpuguard::agent
