// The payload record (bpf/payload.h) -> NetPayload, and the JSON form of
// NetPayload and Stratum.
#include <cstring>

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include "gpuguard/events/event.h"
#include "gpuguard/events/event_json.h"
#include "payload.h"

namespace gpuguard::agent {
namespace {

gg_payload_event raw_record(const std::string& data) {
    gg_payload_event raw{};
    raw.hdr.type = GG_EVENT_NET_PAYLOAD;
    raw.hdr.abi_major = GG_ABI_MAJOR;
    raw.hdr.size = static_cast<uint32_t>(GG_PAYLOAD_FIXED_SIZE + data.size());
    raw.hdr.ts_ns = 77;
    raw.task.tgid = 10;
    raw.task.pid = 11;
    std::strcpy(raw.task.comm, "miner");
    raw.fd = 5;
    raw.len = 900;
    raw.captured = static_cast<uint32_t>(data.size());
    raw.seq = 3;
    raw.flow = 0xffff888000001234ull;
    raw.family = AF_INET6;
    raw.local_port = 40000;
    raw.remote_port = 3333;
    raw.direction = GG_PAYLOAD_IN;
    raw.syscall = GG_PSYS_RECVMSG;
    raw.flags = GG_PAYLOAD_TRUNCATED | GG_PAYLOAD_FOLLOWED;
    const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    std::memcpy(raw.local_addr, mapped, 16);
    inet_pton(AF_INET6, "2001:db8::7", raw.remote_addr);
    std::memcpy(raw.data, data.data(), data.size());
    return raw;
}

std::span<const std::byte> bytes_of(const gg_payload_event& raw, size_t size) {
    return std::span(reinterpret_cast<const std::byte*>(&raw), size);
}

TEST(NetPayloadRecord, decodes_every_field) {
    const auto raw = raw_record("{\"id\":1}\n");
    auto event = decode_record(bytes_of(raw, raw.hdr.size));
    ASSERT_TRUE(event) << event.error().message;
    EXPECT_EQ(event->ts_ns, 77u);
    EXPECT_EQ(event->task.pid, 10u);
    EXPECT_EQ(event->task.comm, "miner");
    const auto& payload = std::get<NetPayload>(event->data);
    EXPECT_EQ(payload.direction, NetPayload::Direction::kIn);
    EXPECT_EQ(payload.syscall, "recvmsg");
    EXPECT_EQ(payload.length, 900u);
    EXPECT_EQ(payload.seq, 3u);
    EXPECT_TRUE(payload.truncated);
    EXPECT_TRUE(payload.followed);
    EXPECT_FALSE(payload.dns);
    EXPECT_TRUE(payload.stream);
    EXPECT_EQ(payload.local_address, "127.0.0.1");  // v4-mapped shown as IPv4
    EXPECT_EQ(payload.remote_address, "2001:db8::7");
    EXPECT_EQ(payload.remote_port, 3333);
    EXPECT_EQ(payload.data, "{\"id\":1}\n");
    EXPECT_STREQ(event_type_name(*event), "net_payload");
}

TEST(NetPayloadRecord, rejects_short_and_inconsistent_records) {
    auto raw = raw_record("abc");
    EXPECT_FALSE(decode_record(bytes_of(raw, GG_PAYLOAD_FIXED_SIZE - 1)));
    raw.captured = 4;  // one byte more than the header's size holds
    EXPECT_FALSE(decode_record(bytes_of(raw, raw.hdr.size)));
    raw = raw_record("abc");
    raw.captured = GG_PAYLOAD_MAX + 1;
    raw.hdr.size = sizeof(raw);
    EXPECT_FALSE(decode_record(bytes_of(raw, sizeof(raw))));
    raw = raw_record("abc");
    raw.family = 1;  // AF_UNIX
    EXPECT_FALSE(decode_record(bytes_of(raw, raw.hdr.size)));
    raw = raw_record("abc");
    raw.syscall = 9;
    EXPECT_FALSE(decode_record(bytes_of(raw, raw.hdr.size)));
}

TEST(NetEventJson, payload_and_stratum_round_trip_through_json_lines) {
    Event payload_event;
    payload_event.ts_ns = 5;
    payload_event.task.pid = 9;
    NetPayload payload;
    payload.direction = NetPayload::Direction::kIn;
    payload.syscall = "recvfrom";
    payload.stream = false;
    payload.dns = true;
    payload.remote_address = "127.0.0.53";
    payload.remote_port = 53;
    payload.data = std::string("\x12\x34\x81\x80\0\xff", 6);
    payload.length = 6;
    payload_event.data = payload;

    Event stratum_event = payload_event;
    Stratum stratum;
    stratum.protocol = "stratum1";
    stratum.methods = {"mining.subscribe"};
    stratum.messages = {R"({"method":"mining.subscribe"})"};
    stratum.shares_submitted = 3;
    stratum.share_hashes = 65536;
    stratum.hash_rate = 1.5e6;
    stratum_event.data = stratum;

    for (const Event& event : {payload_event, stratum_event}) {
        const std::string line = event_to_json(event, 0);
        auto parsed = event_from_json(line, "test");
        ASSERT_TRUE(parsed) << parsed.error().message;
        EXPECT_EQ(event_to_json(parsed->event, 0), line);
    }
}

TEST(NetEventJson, bad_fields_are_named) {
    const auto bad = event_from_json(
        R"({"type":"net_payload","ts_ns":1,"process":{"pid":1},"net_payload":{"direction":"out","data":"***"}})",
        "x.jsonl:3");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("x.jsonl:3: net_payload: data"), std::string::npos)
        << bad.error().message;
    const auto missing =
        event_from_json(R"({"type":"stratum","ts_ns":1,"process":{"pid":1},"stratum":{}})", "y");
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().message.find("protocol: missing"), std::string::npos);
}

TEST(Base64, round_trips_every_length_and_rejects_garbage) {
    std::string bytes;
    for (int i = 0; i < 40; ++i) {
        auto decoded = base64_decode(base64_encode(bytes));
        ASSERT_TRUE(decoded);
        EXPECT_EQ(*decoded, bytes);
        bytes += static_cast<char>(i * 37);
    }
    EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
    EXPECT_EQ(base64_encode("fo"), "Zm8=");
    EXPECT_FALSE(base64_decode("Zm9"));
    EXPECT_FALSE(base64_decode("Zm=v"));
    EXPECT_FALSE(base64_decode("Zm9v!A=="));
}

}  // namespace
}  // namespace gpuguard::agent
