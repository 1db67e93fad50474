#include "gpuguard/netintel/dns.h"

#include <algorithm>
#include <cctype>

#include <arpa/inet.h>

namespace gpuguard::agent::dns {
namespace {

constexpr size_t kHeaderSize = 12;
constexpr size_t kMaxName = 255;
constexpr size_t kMaxRecords = 64;
constexpr uint16_t kClassIn = 1;

class Parser {
  public:
    explicit Parser(std::span<const uint8_t> message) : message_(message) {}

    bool u16(size_t& pos, uint16_t& value) const {
        if (pos + 2 > message_.size()) return false;
        value = static_cast<uint16_t>(message_[pos] << 8 | message_[pos + 1]);
        pos += 2;
        return true;
    }
    bool u32(size_t& pos, uint32_t& value) const {
        uint16_t high = 0, low = 0;
        if (!u16(pos, high) || !u16(pos, low)) return false;
        value = static_cast<uint32_t>(high) << 16 | low;
        return true;
    }

    // A possibly compressed name at `pos`; `pos` moves past its encoding
    // in place. Each pointer must go strictly backwards from the label that
    // holds it, so a pointer loop cannot happen.
    bool name(size_t& pos, std::string& out) const {
        out.clear();
        size_t cursor = pos;
        bool jumped = false;
        size_t lowest_pointer_origin = cursor;
        while (true) {
            if (cursor >= message_.size()) return false;
            const uint8_t length = message_[cursor];
            if ((length & 0xc0) == 0xc0) {
                if (cursor + 1 >= message_.size()) return false;
                const size_t target =
                    static_cast<size_t>(length & 0x3f) << 8 | message_[cursor + 1];
                if (target >= lowest_pointer_origin) return false;  // forward or self: loop
                if (!jumped) pos = cursor + 2;
                jumped = true;
                lowest_pointer_origin = target;
                cursor = target;
                continue;
            }
            if (length & 0xc0) return false;  // 0x40/0x80: extended label types, unused
            if (length == 0) {
                if (!jumped) pos = cursor + 1;
                return true;
            }
            if (cursor + 1 + length > message_.size()) return false;
            if (out.size() + length + 1 > kMaxName) return false;
            if (!out.empty()) out += '.';
            for (size_t i = 0; i < length; ++i) {
                out += static_cast<char>(
                    std::tolower(static_cast<unsigned char>(message_[cursor + 1 + i])));
            }
            cursor += 1 + length;
        }
    }

  private:
    std::span<const uint8_t> message_;
};

}  // namespace

Result<Message> parse_message(std::span<const uint8_t> bytes, bool tcp) {
    if (tcp) {
        if (bytes.size() < 2) return fail(ErrorCode::kParse, "DNS over TCP: no length prefix");
        const size_t length = static_cast<size_t>(bytes[0] << 8 | bytes[1]);
        bytes = bytes.subspan(2);
        // A capture may hold less than the whole message; never more is read.
        if (length < bytes.size()) bytes = bytes.first(length);
    }
    if (bytes.size() < kHeaderSize)
        return fail(ErrorCode::kParse, "DNS message shorter than its header");
    const Parser parser(bytes);
    size_t pos = 0;
    uint16_t id = 0, flags = 0, qdcount = 0, ancount = 0, nscount = 0, arcount = 0;
    parser.u16(pos, id);
    parser.u16(pos, flags);
    parser.u16(pos, qdcount);
    parser.u16(pos, ancount);
    parser.u16(pos, nscount);
    parser.u16(pos, arcount);
    Message message;
    message.id = id;
    message.response = (flags & 0x8000) != 0;
    message.rcode = static_cast<uint8_t>(flags & 0x0f);
    if (qdcount > kMaxRecords)
        return fail(ErrorCode::kParse, "DNS message with too many questions");

    std::string name;
    for (uint16_t i = 0; i < qdcount; ++i) {
        uint16_t qtype = 0, qclass = 0;
        if (!parser.name(pos, name) || !parser.u16(pos, qtype) || !parser.u16(pos, qclass)) {
            return fail(ErrorCode::kParse, "DNS question " + std::to_string(i) + " malformed");
        }
        message.questions.push_back(name);
    }
    const size_t answers = std::min<size_t>(ancount, kMaxRecords);
    for (size_t i = 0; i < answers; ++i) {
        Record record;
        uint16_t rclass = 0, rdlength = 0;
        const size_t start = pos;
        if (!parser.name(pos, record.name) || !parser.u16(pos, record.type) ||
            !parser.u16(pos, rclass) || !parser.u32(pos, record.ttl_s) ||
            !parser.u16(pos, rdlength) || pos + rdlength > bytes.size()) {
            // A capture cut inside the answers keeps what came before.
            if (i > 0 || start >= bytes.size()) break;
            return fail(ErrorCode::kParse, "DNS answer " + std::to_string(i) + " malformed");
        }
        const size_t rdata = pos;
        pos += rdlength;
        if (rclass != kClassIn) continue;
        char text[INET6_ADDRSTRLEN] = {};
        if (record.type == kTypeA && rdlength == 4) {
            inet_ntop(AF_INET, bytes.data() + rdata, text, sizeof(text));
            record.address = text;
        } else if (record.type == kTypeAaaa && rdlength == 16) {
            inet_ntop(AF_INET6, bytes.data() + rdata, text, sizeof(text));
            record.address = text;
        } else if (record.type == kTypeCname) {
            size_t cursor = rdata;
            if (!parser.name(cursor, record.target) || cursor > rdata + rdlength) {
                return fail(ErrorCode::kParse, "DNS CNAME " + std::to_string(i) + " malformed");
            }
        } else {
            continue;
        }
        message.answers.push_back(std::move(record));
    }
    (void)nscount;
    (void)arcount;
    return message;
}

std::vector<NamedAddress> named_addresses(const Message& message) {
    std::vector<NamedAddress> out;
    if (!message.response || message.rcode != 0) return out;
    for (const Record& record : message.answers) {
        if (record.address.empty()) continue;
        const std::string& name = message.questions.empty() ? record.name : message.questions[0];
        if (name.empty()) continue;
        out.push_back(NamedAddress{name, record.address, record.ttl_s});
    }
    return out;
}

size_t Cache::add(const Message& message, uint64_t now_ns) {
    const auto named = named_addresses(message);
    for (const NamedAddress& entry : named) {
        const uint64_t ttl_ns =
            static_cast<uint64_t>(std::max(entry.ttl_s, min_ttl_s_)) * 1'000'000'000ull;
        entries_[entry.address] = Entry{entry.name, now_ns + ttl_ns};
    }
    if (entries_.size() > max_entries_) evict(now_ns);
    return named.size();
}

std::optional<std::string> Cache::lookup(const std::string& address, uint64_t now_ns) const {
    const auto found = entries_.find(address);
    if (found == entries_.end() || found->second.expires_ns <= now_ns) return std::nullopt;
    return found->second.name;
}

void Cache::evict(uint64_t now_ns) {
    std::erase_if(entries_, [&](const auto& entry) { return entry.second.expires_ns <= now_ns; });
    while (entries_.size() > max_entries_) {
        auto soonest = std::min_element(
            entries_.begin(), entries_.end(),
            [](const auto& a, const auto& b) { return a.second.expires_ns < b.second.expires_ns; });
        entries_.erase(soonest);
    }
}

}  // namespace gpuguard::agent::dns
