// DNS answer parsing (RFC 1035) on well-formed, compressed, truncated and
// hostile messages, and the IP -> name cache's TTL and bound.
#include "gpuguard/netintel/dns.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

namespace gpuguard::agent::dns {
namespace {

constexpr uint64_t kSecond = 1'000'000'000;

// Builds messages byte by byte.
class Builder {
  public:
    Builder& header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an) {
        u16(id).u16(flags).u16(qd).u16(an).u16(0).u16(0);
        return *this;
    }
    Builder& u16(uint16_t value) {
        bytes_.push_back(static_cast<uint8_t>(value >> 8));
        bytes_.push_back(static_cast<uint8_t>(value));
        return *this;
    }
    Builder& u32(uint32_t value) {
        return u16(static_cast<uint16_t>(value >> 16)).u16(value & 0xffff);
    }
    Builder& name(const std::string& dotted) {
        size_t start = 0;
        while (start <= dotted.size()) {
            size_t end = dotted.find('.', start);
            if (end == std::string::npos) end = dotted.size();
            bytes_.push_back(static_cast<uint8_t>(end - start));
            bytes_.insert(bytes_.end(), dotted.begin() + start, dotted.begin() + end);
            start = end + 1;
        }
        bytes_.push_back(0);
        return *this;
    }
    Builder& pointer(uint16_t offset) { return u16(0xc000 | offset); }
    Builder& raw(std::initializer_list<uint8_t> values) {
        bytes_.insert(bytes_.end(), values);
        return *this;
    }
    size_t size() const { return bytes_.size(); }
    const std::vector<uint8_t>& bytes() const { return bytes_; }

  private:
    std::vector<uint8_t> bytes_;
};

// "xmr-eu1.nanopool.org" A 203.0.113.5, the answer name compressed.
Builder pool_answer(uint32_t ttl = 300) {
    Builder b;
    b.header(0x1234, 0x8180, 1, 1).name("XMR-eu1.Nanopool.org").u16(kTypeA).u16(1);
    b.pointer(12).u16(kTypeA).u16(1).u32(ttl).u16(4).raw({203, 0, 113, 5});
    return b;
}

TEST(DnsParse, reads_a_compressed_a_answer) {
    const auto message = parse_message(pool_answer().bytes());
    ASSERT_TRUE(message) << message.error().message;
    EXPECT_TRUE(message->response);
    EXPECT_EQ(message->id, 0x1234);
    ASSERT_EQ(message->questions.size(), 1u);
    EXPECT_EQ(message->questions[0], "xmr-eu1.nanopool.org");  // lower-cased
    ASSERT_EQ(message->answers.size(), 1u);
    EXPECT_EQ(message->answers[0].name, "xmr-eu1.nanopool.org");
    EXPECT_EQ(message->answers[0].address, "203.0.113.5");
    EXPECT_EQ(message->answers[0].ttl_s, 300u);
}

TEST(DnsParse, follows_a_cname_chain_and_reads_aaaa) {
    Builder b;
    b.header(7, 0x8180, 1, 2).name("pool.supportxmr.com").u16(kTypeAaaa).u16(1);
    b.pointer(12).u16(kTypeCname).u16(1).u32(60).u16(18);
    const auto target = b.size();
    b.name("edge.cdn.example");
    b.pointer(static_cast<uint16_t>(target)).u16(kTypeAaaa).u16(1).u32(30).u16(16);
    b.raw({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1});
    const auto message = parse_message(b.bytes());
    ASSERT_TRUE(message) << message.error().message;
    ASSERT_EQ(message->answers.size(), 2u);
    EXPECT_EQ(message->answers[0].target, "edge.cdn.example");
    EXPECT_EQ(message->answers[1].name, "edge.cdn.example");
    EXPECT_EQ(message->answers[1].address, "2001:db8::1");
}

TEST(DnsParse, reads_dns_over_tcp_with_its_length_prefix) {
    const auto plain = pool_answer().bytes();
    std::vector<uint8_t> framed = {static_cast<uint8_t>(plain.size() >> 8),
                                   static_cast<uint8_t>(plain.size())};
    framed.insert(framed.end(), plain.begin(), plain.end());
    const auto message = parse_message(framed, /*tcp=*/true);
    ASSERT_TRUE(message) << message.error().message;
    EXPECT_EQ(message->answers.at(0).address, "203.0.113.5");
}

TEST(DnsParse, rejects_a_compression_pointer_to_itself) {
    Builder b;
    b.header(1, 0x8180, 1, 0).pointer(12).u16(1).u16(1);  // the question's name points at itself
    EXPECT_FALSE(parse_message(b.bytes()));
}

TEST(DnsParse, rejects_a_compression_pointer_loop_between_two_names) {
    Builder b;
    b.header(1, 0x8180, 1, 1).raw({1, 'a'}).pointer(20).u16(1).u16(1);  // 12: "a" -> 20
    b.raw({1, 'b'}).pointer(12);                                        // 20: "b" -> 12 -> 20 ...
    b.u16(1).u16(1).u32(1).u16(4).raw({1, 2, 3, 4});
    EXPECT_FALSE(parse_message(b.bytes()));
}

TEST(DnsParse, rejects_a_forward_pointer) {
    Builder b;
    b.header(1, 0x8180, 1, 0).pointer(40).u16(1).u16(1);
    b.raw(std::initializer_list<uint8_t>{});
    while (b.size() < 48) b.raw({0});
    EXPECT_FALSE(parse_message(b.bytes()));
}

TEST(DnsParse, rejects_names_longer_than_255_bytes) {
    Builder b;
    std::string long_name;
    for (int i = 0; i < 5; ++i) long_name += std::string(60, 'a' + i) + ".";
    long_name += "com";
    b.header(1, 0x8180, 1, 0).name(long_name).u16(1).u16(1);
    EXPECT_FALSE(parse_message(b.bytes()));
}

TEST(DnsParse, every_truncation_fails_or_keeps_only_whole_records) {
    const auto full = pool_answer().bytes();
    for (size_t cut = 0; cut < full.size(); ++cut) {
        const std::vector<uint8_t> part(full.begin(), full.begin() + cut);
        const auto message = parse_message(part);
        if (message) {
            EXPECT_TRUE(message->answers.empty()) << "cut at " << cut;
        }
    }
}

TEST(DnsParse, a_capture_cut_inside_the_second_answer_keeps_the_first) {
    Builder b;
    b.header(3, 0x8180, 1, 2).name("a.example").u16(1).u16(1);
    b.pointer(12).u16(1).u16(1).u32(10).u16(4).raw({192, 0, 2, 1});
    b.pointer(12).u16(1).u16(1).u32(10).u16(4).raw({192, 0, 2});  // one byte short
    const auto message = parse_message(b.bytes());
    ASSERT_TRUE(message) << message.error().message;
    ASSERT_EQ(message->answers.size(), 1u);
    EXPECT_EQ(message->answers[0].address, "192.0.2.1");
}

TEST(DnsParse, short_or_empty_input_fails) {
    EXPECT_FALSE(parse_message({}));
    EXPECT_FALSE(parse_message(std::vector<uint8_t>(11, 0)));
    EXPECT_FALSE(parse_message(std::vector<uint8_t>{0}, /*tcp=*/true));
}

TEST(DnsParse, fuzz_seeds_parse_as_their_names_say) {
    const std::filesystem::path corpus = GPUGUARD_DNS_CORPUS;
    const auto read = [&](const char* name) {
        std::ifstream in(corpus / name, std::ios::binary);
        return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
    };
    EXPECT_TRUE(parse_message(read("a_compressed.bin")));
    EXPECT_TRUE(parse_message(read("cname_chain.bin")));
    EXPECT_TRUE(parse_message(read("aaaa.bin")));
    EXPECT_TRUE(parse_message(read("tcp_framed.bin"), true));
    EXPECT_FALSE(parse_message(read("pointer_loop.bin")));
}

TEST(DnsCache, names_an_address_by_the_question_until_the_ttl_ends) {
    Cache cache(16, 0);
    auto message = parse_message(pool_answer(30).bytes());
    ASSERT_TRUE(message);
    EXPECT_EQ(cache.add(*message, 100 * kSecond), 1u);
    EXPECT_EQ(cache.lookup("203.0.113.5", 129 * kSecond), "xmr-eu1.nanopool.org");
    EXPECT_FALSE(cache.lookup("203.0.113.5", 130 * kSecond));
    EXPECT_FALSE(cache.lookup("203.0.113.6", 100 * kSecond));
}

TEST(DnsCache, keeps_zero_ttl_answers_for_the_minimum_ttl) {
    Cache cache(16, 60);
    auto message = parse_message(pool_answer(0).bytes());
    ASSERT_TRUE(message);
    cache.add(*message, 0);
    EXPECT_TRUE(cache.lookup("203.0.113.5", 59 * kSecond));
}

TEST(DnsCache, ignores_queries_and_failed_answers) {
    Cache cache;
    Builder query;
    query.header(1, 0x0100, 1, 0).name("pool.example").u16(1).u16(1);
    auto parsed_query = parse_message(query.bytes());
    ASSERT_TRUE(parsed_query);
    EXPECT_EQ(cache.add(*parsed_query, 0), 0u);
    auto nxdomain = pool_answer().bytes();
    nxdomain[3] = 0x83;  // rcode 3
    auto parsed_nxdomain = parse_message(nxdomain);
    ASSERT_TRUE(parsed_nxdomain);
    EXPECT_EQ(cache.add(*parsed_nxdomain, 0), 0u);
}

TEST(DnsCache, drops_the_entries_expiring_first_when_full) {
    Cache cache(2, 0);
    for (uint8_t i = 1; i <= 3; ++i) {
        Builder b;
        b.header(i, 0x8180, 1, 1).name("h" + std::to_string(i) + ".example").u16(1).u16(1);
        b.pointer(12).u16(1).u16(1).u32(10u * i).u16(4).raw({192, 0, 2, i});
        auto message = parse_message(b.bytes());
        ASSERT_TRUE(message);
        cache.add(*message, 0);
    }
    EXPECT_EQ(cache.size(), 2u);
    EXPECT_FALSE(cache.lookup("192.0.2.1", 0));  // shortest TTL went first
    EXPECT_EQ(cache.lookup("192.0.2.3", 0), "h3.example");
}

}  // namespace
}  // namespace gpuguard::agent::dns
