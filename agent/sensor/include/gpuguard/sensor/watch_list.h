// WatchList: the agent's own book of a kernel watch list (watched_tgids,
// watched_addrs in bpf/): bounded, oldest out first, entries that may
// expire, and counts of every way an entry leaves. The kernel maps are plain
// hashes so that every eviction is one the agent made and counted (an LRU
// map would drop entries silently). No libbpf here: the sensor applies what
// this decides to the maps.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace gpuguard::agent {

// What status and /metrics show of one watch list.
struct WatchListCounts {
    size_t entries = 0;
    size_t capacity = 0;
    uint64_t added = 0;    // entries put in (a refresh of one already there is not counted)
    uint64_t evicted = 0;  // the oldest, dropped because the list was full
    uint64_t expired =
        0;  // past their time (addresses: their DNS answer's TTL, at least the floor)
    uint64_t removed = 0;  // taken out on purpose (a process that exited)
};

// An address as the kernel's watched_addrs keys it (struct gg_watch_addr_key).
using AddressKey = std::array<uint8_t, 16>;

struct AddressKeyHash {
    size_t operator()(const AddressKey& key) const {
        uint64_t hash = 14695981039346656037ull;  // FNV-1a
        for (uint8_t byte : key) hash = (hash ^ byte) * 1099511628211ull;
        return static_cast<size_t>(hash);
    }
};

// "10.0.0.1", "2001:db8::1", "::ffff:10.0.0.1" (as the IPv4 address: the
// kernel looks a v4-mapped destination up in that form); nullopt when the
// text is not an address.
std::optional<AddressKey> watch_address_key(const std::string& address);

template <typename Key, typename Hash = std::hash<Key>>
class WatchList {
  public:
    explicit WatchList(size_t capacity) : capacity_(capacity) {}

    struct Added {
        bool is_new = false;         // not in the list before
        std::optional<Key> evicted;  // the oldest entry, dropped to make room
    };

    // Puts `key` in as the newest entry, until `expires_ns` (0 = until it is
    // removed). A key already there becomes the newest with the new expiry.
    Added add(const Key& key, uint64_t expires_ns) {
        Added result;
        if (auto found = index_.find(key); found != index_.end()) {
            order_.erase(found->second);
            index_.erase(found);
        } else {
            result.is_new = true;
            ++counts_.added;
            if (capacity_ > 0 && index_.size() >= capacity_) {
                result.evicted = order_.front().key;
                index_.erase(order_.front().key);
                order_.pop_front();
                ++counts_.evicted;
            }
        }
        order_.push_back(Entry{key, expires_ns});
        index_.emplace(key, std::prev(order_.end()));
        return result;
    }

    // Takes `key` out; false when it was not there. `counted`: false to
    // take back an add() the kernel map then refused.
    bool remove(const Key& key, bool counted = true) {
        const auto found = index_.find(key);
        if (found == index_.end()) return false;
        order_.erase(found->second);
        index_.erase(found);
        if (counted) {
            ++counts_.removed;
        } else {
            --counts_.added;
        }
        return true;
    }

    // Takes out and returns every entry whose time is over at `now_ns`.
    std::vector<Key> expire(uint64_t now_ns) {
        std::vector<Key> gone;
        for (auto it = order_.begin(); it != order_.end();) {
            if (it->expires_ns == 0 || it->expires_ns > now_ns) {
                ++it;
                continue;
            }
            gone.push_back(it->key);
            index_.erase(it->key);
            it = order_.erase(it);
            ++counts_.expired;
        }
        return gone;
    }

    bool contains(const Key& key) const { return index_.contains(key); }
    size_t size() const { return index_.size(); }
    bool empty() const { return index_.empty(); }
    // Oldest first.
    std::vector<Key> keys() const {
        std::vector<Key> out;
        for (const auto& entry : order_) out.push_back(entry.key);
        return out;
    }

    WatchListCounts counts() const {
        WatchListCounts counts = counts_;
        counts.entries = index_.size();
        counts.capacity = capacity_;
        return counts;
    }

  private:
    struct Entry {
        Key key;
        uint64_t expires_ns = 0;
    };
    size_t capacity_;
    std::list<Entry> order_;  // oldest first
    std::unordered_map<Key, typename std::list<Entry>::iterator, Hash> index_;
    WatchListCounts counts_;
};

}  // namespace gpuguard::agent
