// DNS answers observed on the wire (RFC 1035), and the IP -> name cache the
// agent builds from them to name the peers of connects. gpuguard never sends
// a query itself: a pool domain is known only when the host looked it up.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard::agent::dns {

inline constexpr uint16_t kTypeA = 1;
inline constexpr uint16_t kTypeCname = 5;
inline constexpr uint16_t kTypeAaaa = 28;

struct Record {
    std::string name;  // owner, lower case, no trailing dot
    uint16_t type = 0;
    uint32_t ttl_s = 0;
    std::string address;  // A/AAAA: "1.2.3.4", "2001:db8::1"
    std::string target;   // CNAME: the canonical name
};

struct Message {
    uint16_t id = 0;
    bool response = false;
    uint8_t rcode = 0;
    std::vector<std::string> questions;  // names asked, lower case
    std::vector<Record> answers;         // A, AAAA and CNAME records of the answer section
};

// Parses one DNS message (UDP payload; `tcp` = with the 2-byte length prefix
// of DNS over TCP). Pure and bounded: compression pointers must point
// backwards, names are at most 255 bytes, at most 64 records are read. Fails
// with kParse on a truncated or malformed message; a message whose answer
// section is cut short (a 512-byte capture) keeps the records read so far.
Result<Message> parse_message(std::span<const uint8_t> bytes, bool tcp = false);

// An address an answer gave, with the name the process asked for (the
// question; the A/AAAA record's owner when there is none: CNAME targets are
// often a CDN's, a pool-domain signature knows the asked name).
struct NamedAddress {
    std::string name;
    std::string address;
    uint32_t ttl_s = 0;
};

// The addresses of `message`; none unless it is a successful response.
std::vector<NamedAddress> named_addresses(const Message& message);

// IP -> the name the host asked for, from observed answers, for their TTL
// (at least `min_ttl_s` so a 0-TTL answer still names the connect that
// follows it). Bounded: the entries that expire first are dropped when full.
class Cache {
  public:
    explicit Cache(size_t max_entries = 16384, uint32_t min_ttl_s = 60)
        : max_entries_(max_entries), min_ttl_s_(min_ttl_s) {}

    // Records the addresses of `message` (a response) as of `now_ns`. Each
    // address is named by the question (the name the process asked for),
    // falling back to the owner of the A/AAAA record. Returns how many
    // addresses it named.
    size_t add(const Message& message, uint64_t now_ns);

    // The name of `address` at `now_ns`, if an unexpired answer gave one.
    std::optional<std::string> lookup(const std::string& address, uint64_t now_ns) const;

    size_t size() const { return entries_.size(); }

  private:
    struct Entry {
        std::string name;
        uint64_t expires_ns = 0;
    };
    void evict(uint64_t now_ns);

    size_t max_entries_;
    uint32_t min_ttl_s_;
    std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace gpuguard::agent::dns
