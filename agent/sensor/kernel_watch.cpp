#include "kernel_watch.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <arpa/inet.h>
#include <bpf/libbpf.h>
#include <pwd.h>

#include "events.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor_support.h"

namespace gpuguard::agent {

std::optional<AddressKey> watch_address_key(const std::string& address) {
    AddressKey key{};
    if (inet_pton(AF_INET, address.c_str(), key.data()) == 1) return key;
    if (inet_pton(AF_INET6, address.c_str(), key.data()) != 1) return std::nullopt;
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (std::memcmp(key.data(), kMapped, sizeof(kMapped)) == 0) {
        std::memmove(key.data(), key.data() + 12, 4);  // the IPv4 form, as the kernel looks it up
        std::memset(key.data() + 4, 0, key.size() - 4);
    }
    return key;
}

Result<std::vector<WatchPattern>> watch_patterns(const std::vector<std::string>& entries,
                                                 const PinDirectory* pins,
                                                 const std::vector<std::string>& trusted) {
    std::vector<std::string> homes;
    if (std::any_of(entries.begin(), entries.end(),
                    [](const std::string& entry) { return entry.starts_with("~/"); })) {
        setpwent();
        while (const passwd* user = getpwent()) {
            if (user->pw_dir &&
                std::find(homes.begin(), homes.end(), user->pw_dir) == homes.end()) {
                homes.emplace_back(user->pw_dir);
            }
        }
        endpwent();
    }
    std::vector<WatchPattern> patterns;
    for (const auto& entry : entries) {
        auto parsed = parse_watch_entry(entry, homes);
        if (!parsed) return Unexpected{parsed.error()};
        patterns.insert(patterns.end(), parsed->begin(), parsed->end());
    }
    if (pins && (!entries.empty() || !trusted.empty())) {
        patterns.push_back(
            WatchPattern{WatchPattern::Form::kPrefix, pins->path() + "/", "agent_pins"});
    }
    // The agent's own files: an exact path or directory of its kind wins
    // over a default prefix (the kernel takes the longest match), so the
    // unit file under /etc/systemd/system/ is agent_config, not systemd.
    for (const auto& path : trusted) {
        if (path.empty() || path.front() != '/' || path.size() >= GG_WATCH_PATH_LEN) {
            logger("sensor")->warn(
                "trusted file {} not watched: the kernel compares absolute "
                "paths of up to {} bytes",
                path, GG_WATCH_PATH_LEN - 1);
            continue;
        }
        const auto form =
            path.back() == '/' ? WatchPattern::Form::kPrefix : WatchPattern::Form::kExact;
        WatchPattern pattern{form, path, "agent_config"};
        if (std::find(patterns.begin(), patterns.end(), pattern) == patterns.end()) {
            patterns.push_back(std::move(pattern));
        }
    }
    return patterns;
}

Status load_watch_files(bpf_map* paths, bpf_map* names, const std::vector<WatchPattern>& patterns) {
    // Replace the whole list: drop every entry, then add the wanted ones.
    for (const auto& key : map_keys<gg_watch_path_key>(paths)) {
        bpf_map__delete_elem(paths, &key, sizeof(key), 0);
    }
    for (const auto& key : map_keys<gg_watch_name_key>(names)) {
        bpf_map__delete_elem(names, &key, sizeof(key), 0);
    }
    for (const auto& pattern : patterns) {
        const uint32_t category = file_change_category(pattern.kind);
        int err = 0;
        if (pattern.form == WatchPattern::Form::kBasename) {
            gg_watch_name_key key{};
            std::memcpy(key.name, pattern.text.data(),
                        std::min(pattern.text.size(), sizeof(key.name) - 1));
            err = bpf_map__update_elem(names, &key, sizeof(key), &category, sizeof(category),
                                       BPF_ANY);
        } else {
            gg_watch_path_key key{};
            const size_t length = std::min(pattern.text.size(), sizeof(key.path) - 1);
            std::memcpy(key.path, pattern.text.data(), length);
            // An exact path matches with its NUL, so only that path does.
            const bool exact = pattern.form == WatchPattern::Form::kExact;
            key.prefixlen = static_cast<uint32_t>((length + (exact ? 1 : 0)) * 8);
            err = bpf_map__update_elem(paths, &key, sizeof(key), &category, sizeof(category),
                                       BPF_ANY);
        }
        if (err) return Unexpected{libbpf_error("watching file " + pattern.text, err)};
    }
    return {};
}

KernelWatch::KernelWatch(bpf_map* tgids, bpf_map* addresses, bpf_map* net_watch,
                         volatile uint32_t* armed)
    : tgids_(tgids),
      addresses_map_(addresses),
      net_watch_(net_watch),
      armed_(armed),
      processes_(bpf_map__max_entries(tgids)),
      addresses_(bpf_map__max_entries(addresses)) {
    update_armed();
}

void KernelWatch::update_armed() {
    uint32_t armed = 0;
    if (!processes_.empty()) armed |= GG_WATCH_ARMED_TGIDS;
    if (!addresses_.empty()) armed |= GG_WATCH_ARMED_ADDRS;
    *armed_ = armed;
}

Status KernelWatch::watch_process(uint32_t pid) {
    const uint8_t on = 1;
    const gg_watched_proc counts{};
    const auto added = processes_.add(pid, 0);
    if (added.evicted) {
        const uint32_t oldest = *added.evicted;
        bpf_map__delete_elem(tgids_, &oldest, sizeof(oldest), 0);
        logger("sensor")->info("watch list full ({} processes): pid {} no longer watched",
                               processes_.counts().capacity, oldest);
    }
    // An entry already there keeps its send counts.
    if (int err =
            bpf_map__update_elem(tgids_, &pid, sizeof(pid), &counts, sizeof(counts), BPF_NOEXIST);
        err && err != -EEXIST) {
        if (added.is_new) processes_.remove(pid, /*counted=*/false);
        update_armed();
        return Unexpected{libbpf_error("watching pid " + std::to_string(pid), err)};
    }
    update_armed();
    // Its payloads are sampled from now on, on sockets it opened before too.
    if (int err = bpf_map__update_elem(net_watch_, &pid, sizeof(pid), &on, sizeof(on), BPF_ANY);
        err) {
        return Unexpected{
            libbpf_error("marking pid " + std::to_string(pid) + " for payload sampling", err)};
    }
    return {};
}

void KernelWatch::forget_process(uint32_t pid) {
    if (!processes_.remove(pid)) return;
    // Already gone when the exit program ran first; either way it is out.
    bpf_map__delete_elem(tgids_, &pid, sizeof(pid), 0);
    update_armed();
}

Status KernelWatch::watch_address(const std::string& address, uint64_t expires_ns) {
    const auto key = watch_address_key(address);
    if (!key) {
        return fail(ErrorCode::kInvalidArgument, "watch list: '" + address + "' is not an address");
    }
    const auto added = addresses_.add(*key, expires_ns);
    if (added.evicted) {
        bpf_map__delete_elem(addresses_map_, added.evicted->data(), added.evicted->size(), 0);
    }
    const uint8_t on = 1;
    if (int err = bpf_map__update_elem(addresses_map_, key->data(), key->size(), &on, sizeof(on),
                                       BPF_ANY);
        err) {
        if (added.is_new) addresses_.remove(*key, /*counted=*/false);
        update_armed();
        return Unexpected{libbpf_error("watching address " + address, err)};
    }
    update_armed();
    return {};
}

size_t KernelWatch::expire(uint64_t now_ns) {
    const auto gone = addresses_.expire(now_ns);
    for (const auto& key : gone) bpf_map__delete_elem(addresses_map_, key.data(), key.size(), 0);
    if (!gone.empty()) update_armed();
    return gone.size();
}

}  // namespace gpuguard::agent
