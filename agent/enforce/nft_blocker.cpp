#include "gpuguard/enforce/nft_blocker.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <arpa/inet.h>
#include <nftables/libnftables.h>
#include <nlohmann/json.hpp>

#include "gpuguard/common/logging.h"

namespace gpuguard::agent {
namespace {

struct NftContextDeleter {
    void operator()(nft_ctx* context) const { nft_ctx_free(context); }
};
using NftContext = std::unique_ptr<nft_ctx, NftContextDeleter>;

struct NftRun {
    int rc = -1;
    std::string output;
    std::string error;
};

// One nft command buffer (one transaction), in the calling thread's netns.
NftRun run_nft(const std::string& commands, bool json = false) {
    NftRun run;
    NftContext context(nft_ctx_new(NFT_CTX_DEFAULT));
    if (!context) {
        run.error = "nft_ctx_new failed";
        return run;
    }
    nft_ctx_buffer_output(context.get());
    nft_ctx_buffer_error(context.get());
    if (json) nft_ctx_output_set_flags(context.get(), NFT_CTX_OUTPUT_JSON);
    run.rc = nft_run_cmd_from_buffer(context.get(), commands.c_str());
    if (const char* out = nft_ctx_get_output_buffer(context.get())) run.output = out;
    if (const char* err = nft_ctx_get_error_buffer(context.get())) run.error = err;
    return run;
}

// nft's error text is several lines (message, command, carets): keep the first.
std::string first_line(const std::string& text) {
    const auto end = text.find('\n');
    return end == std::string::npos ? text : text.substr(0, end);
}

Error nft_error(const std::string& operation, const NftRun& run) {
    const std::string detail = first_line(run.error);
    const bool permission = detail.find("Operation not permitted") != std::string::npos;
    return Error{permission ? ErrorCode::kPermission : ErrorCode::kUnsupported,
                 "nftables: " + operation + ": " + (detail.empty() ? "failed" : detail) +
                     (permission ? " (needs CAP_NET_ADMIN)" : ""),
                 0};
}

std::string set_name(int ip_version) { return ip_version == 4 ? "blocked_v4" : "blocked_v6"; }

std::string table_definition() {
    const std::string t = std::string("inet ") + kNftTable;
    std::string text = "add table " + t + "\n";
    text += "add set " + t + " blocked_v4 { type ipv4_addr; flags timeout; }\n";
    text += "add set " + t + " blocked_v6 { type ipv6_addr; flags timeout; }\n";
    for (const char* chain : {"output", "forward"}) {
        text += "add chain " + t + " " + chain + " { type filter hook " + chain +
                " priority 0; policy accept; }\n";
        text += "flush chain " + t + " " + chain + "\n";
        text += "add rule " + t + " " + chain + " ip daddr @blocked_v4 counter drop\n";
        text += "add rule " + t + " " + chain + " ip6 daddr @blocked_v6 counter drop\n";
    }
    return text;
}

}  // namespace

NftBlocker::NftBlocker(std::chrono::seconds default_ttl) : default_ttl_(default_ttl) {}

bool NftBlocker::table_exists() {
    return run_nft(std::string("list table inet ") + kNftTable).rc == 0;
}

Status NftBlocker::usable() {
    const auto run = run_nft("list tables");
    if (run.rc != 0) return Unexpected{nft_error("listing tables", run)};
    return {};
}

Status NftBlocker::reconcile() {
    const auto run = run_nft(table_definition());
    if (run.rc == 0) {
        logger("enforcer")->debug("nftables table inet {} reconciled", kNftTable);
        return {};
    }
    if (!table_exists()) return Unexpected{nft_error("creating table inet gpuguard", run)};
    // The table is there but refuses our definition (a set of another type
    // or without timeouts, a chain that is no longer a base chain): rebuild
    // it in one transaction, with the elements it still holds and the time
    // they have left.
    auto kept = list();
    if (!kept) return Unexpected{kept.error()};
    std::string text = std::string("delete table inet ") + kNftTable + "\n" + table_definition();
    size_t restored = 0;
    for (const auto& entry : *kept) {
        auto canonical = canonical_ip(entry.ip);
        if (!canonical) continue;
        std::string element = canonical->first;
        if (const auto left = entry.expires_in_s.value_or(entry.timeout_s.value_or(0)); left > 0)
            element += " timeout " + std::to_string(left) + "s";
        text += std::string("add element inet ") + kNftTable + " " + set_name(canonical->second) +
                " { " + element + " }\n";
        ++restored;
    }
    const auto rebuilt = run_nft(text);
    if (rebuilt.rc != 0) return Unexpected{nft_error("rebuilding table inet gpuguard", rebuilt)};
    logger("enforcer")
        ->warn("nftables table inet {} was damaged ({}): rebuilt with its {} blocked address(es)",
               kNftTable, first_line(run.error), restored);
    return {};
}

Status NftBlocker::block(const std::string& ip, std::chrono::seconds ttl) {
    auto canonical = canonical_ip(ip);
    if (!canonical) return Unexpected{canonical.error()};
    if (!table_exists()) {
        if (auto made = reconcile(); !made) return made;
    }
    const auto timeout = ttl.count() > 0 ? ttl : default_ttl_;
    std::string element = canonical->first;
    if (timeout.count() > 0) element += " timeout " + std::to_string(timeout.count()) + "s";
    // "add" of an existing element is not an error; on kernels that support
    // it, it also refreshes the timeout.
    const auto run = run_nft(std::string("add element inet ") + kNftTable + " " +
                             set_name(canonical->second) + " { " + element + " }");
    if (run.rc != 0) return Unexpected{nft_error("blocking " + canonical->first, run)};
    return {};
}

Result<bool> NftBlocker::unblock(const std::string& ip) {
    auto canonical = canonical_ip(ip);
    if (!canonical) return Unexpected{canonical.error()};
    auto current = list();
    if (!current) return Unexpected{current.error()};
    bool present = false;
    for (const auto& entry : *current) present |= entry.ip == canonical->first;
    if (!present) return false;
    const auto run = run_nft(std::string("delete element inet ") + kNftTable + " " +
                             set_name(canonical->second) + " { " + canonical->first + " }");
    if (run.rc != 0) return Unexpected{nft_error("unblocking " + canonical->first, run)};
    return true;
}

Result<std::vector<BlockedAddress>> NftBlocker::list() {
    std::vector<BlockedAddress> out;
    if (!table_exists()) return out;
    // One listing of the whole table: a set that is missing (a damaged
    // table, before reconcile() repairs it) is no error here.
    const auto run = run_nft(std::string("list table inet ") + kNftTable, true);
    if (run.rc != 0) return Unexpected{nft_error("listing table inet gpuguard", run)};
    try {
        const auto doc = nlohmann::json::parse(run.output);
        for (const auto& item : doc.at("nftables")) {
            if (!item.contains("set")) continue;
            const auto& set = item.at("set");
            const std::string name = set.value("name", "");
            if ((name != set_name(4) && name != set_name(6)) || !set.contains("elem")) continue;
            for (const auto& elem : set.at("elem")) {
                BlockedAddress address;
                address.ip_version = name == set_name(4) ? 4 : 6;
                if (elem.is_string()) {
                    address.ip = elem.get<std::string>();
                } else {
                    const auto& body = elem.at("elem");
                    address.ip = body.at("val").get<std::string>();
                    if (body.contains("timeout"))
                        address.timeout_s = body["timeout"].get<uint64_t>();
                    if (body.contains("expires"))
                        address.expires_in_s = body["expires"].get<uint64_t>();
                }
                out.push_back(std::move(address));
            }
        }
    } catch (const nlohmann::json::exception& error) {
        return fail(
            ErrorCode::kParse,
            std::string("nftables: unexpected JSON listing table inet gpuguard: ") + error.what());
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.ip_version < b.ip_version; });
    return out;
}

Status NftBlocker::flush() {
    if (!table_exists()) return {};
    const std::string t = std::string("inet ") + kNftTable;
    const auto run = run_nft("flush set " + t + " blocked_v4\nflush set " + t + " blocked_v6\n");
    if (run.rc != 0) return Unexpected{nft_error("flushing the blocked sets", run)};
    return {};
}

Status NftBlocker::remove_table() {
    if (!table_exists()) return {};
    const auto run = run_nft(std::string("delete table inet ") + kNftTable);
    if (run.rc != 0) return Unexpected{nft_error("deleting table inet gpuguard", run)};
    logger("enforcer")->info("nftables table inet {} deleted", kNftTable);
    return {};
}

}  // namespace gpuguard::agent
