// The binary encoding: every event type round-trips, frames and headers
// reject damage.
#include "gpuguard/journal/journal_codec.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "crc32c.h"
#include "gpuguard/events/event_json.h"
#include "tests/agent/journal/journal_fixtures.h"

namespace gpuguard::agent::journal {
namespace {

TEST(Crc32c, matches_the_standard_check_values) {
    EXPECT_EQ(crc32c(0, "123456789", 9), 0xe3069283u);
    EXPECT_EQ(crc32c(0, "", 0), 0u);
    const std::string zeros(32, '\0');
    EXPECT_EQ(crc32c(0, zeros.data(), zeros.size()), 0x8a9136aau);  // RFC 3720 B.4
    // Incremental equals one shot, for every split point.
    const std::string text = "The quick brown fox jumps over the lazy dog, twice over.";
    const uint32_t whole = crc32c(0, text.data(), text.size());
    for (size_t split = 0; split <= text.size(); ++split) {
        EXPECT_EQ(crc32c(crc32c(0, text.data(), split), text.data() + split, text.size() - split),
                  whole);
    }
}

TEST(JournalCodec, every_event_type_round_trips) {
    const auto events = testing::every_event_type();
    std::set<size_t> variant_indexes;
    for (const auto& event : events) {
        std::string payload;
        encode_event(event, payload);
        Event decoded;
        std::string error;
        ASSERT_TRUE(decode_event(payload, decoded, error))
            << event_type_name(event) << ": " << error;
        EXPECT_EQ(event_to_json(decoded, 0), event_to_json(event, 0));
        EXPECT_EQ(decoded.data.index(), event.data.index());
        EXPECT_EQ(peek_event_ts(payload), event.ts_ns);
        variant_indexes.insert(event.data.index());
    }
    EXPECT_EQ(variant_indexes.size(), std::variant_size_v<EventData>)
        << "add the new event type to testing::every_event_type()";
}

// Fields later ABI versions added, each with a flag bit older records lack:
// an exec's resolved exe, a fork's child start time. With them and without.
TEST(JournalCodec, optional_exec_and_fork_fields_round_trip_both_ways) {
    std::vector<Event> events(4);
    events[0].data = Exec{"/proc/self/fd/3", {"x"}, false, false, 7, "/memfd:x (deleted)"};
    events[1].data = Exec{"/usr/bin/x", {"x"}, true, false, 7};
    events[2].data = Fork{8, true, 5'735'514'198'765ull};
    events[3].data = Fork{9, false};
    for (const auto& event : events) {
        std::string payload;
        encode_event(event, payload);
        // Decoded into an event of the same type with every field set: reset, not kept.
        Event decoded;
        decoded.data = Fork{1, true, 99};
        if (std::holds_alternative<Exec>(event.data)) {
            decoded.data = Exec{"stale", {}, false, false, 0, "stale exe"};
        }
        std::string error;
        ASSERT_TRUE(decode_event(payload, decoded, error)) << error;
        EXPECT_EQ(event_to_json(decoded, 0), event_to_json(event, 0));
    }
    EXPECT_EQ(std::get<Exec>(events[0].data).exe, "/memfd:x (deleted)");
}

TEST(JournalCodec, decoding_into_a_reused_event_resets_every_field) {
    const auto events = testing::every_event_type();
    Event reused;
    for (const auto& event : events) {
        std::string payload;
        encode_event(event, payload);
        std::string error;
        ASSERT_TRUE(decode_event(payload, reused, error)) << error;
        EXPECT_EQ(event_to_json(reused, 0), event_to_json(event, 0));
    }
    for (auto it = events.rbegin(); it != events.rend(); ++it) {
        std::string payload;
        encode_event(*it, payload);
        std::string error;
        ASSERT_TRUE(decode_event(payload, reused, error)) << error;
        EXPECT_EQ(event_to_json(reused, 0), event_to_json(*it, 0));
    }
}

TEST(JournalCodec, truncated_payloads_fail_without_reading_past_the_end) {
    for (const auto& event : testing::every_event_type()) {
        std::string payload;
        encode_event(event, payload);
        // A snapshot cut just before exe_package, a scan just before one of
        // its trailing fields, a connect just before its established byte, a
        // config file before its error, is a record of a minor version
        // before it and reads as one: without them.
        const auto* snapshot = std::get_if<ProcessSnapshot>(&event.data);
        const auto* scan = std::get_if<ExeScan>(&event.data);
        const auto* connect = std::get_if<Connect>(&event.data);
        std::vector<size_t> older_ends;
        if (snapshot) older_ends.push_back(payload.size() - 1 - snapshot->exe_package.size());
        if (connect && connect->established) older_ends.push_back(payload.size() - 1);
        // A config file cut before its error.
        const auto* config = std::get_if<ConfigFile>(&event.data);
        if (config) older_ends.push_back(payload.size() - 1 - config->error.size());
        // A Stratum record cut before its hash-rate interval (1 byte unset, 9 set).
        const auto* stratum = std::get_if<Stratum>(&event.data);
        if (stratum) {
            const size_t high = stratum->hash_rate_high ? 9 : 1;
            const size_t low = stratum->hash_rate_low ? 9 : 1;
            older_ends = {payload.size() - high, payload.size() - high - low};
        }
        // A telemetry record cut before its power draw and limit (1 byte
        // unset, 9 set): a record from before they were journaled.
        const auto* telemetry = std::get_if<Telemetry>(&event.data);
        size_t before_gpm = 0, before_nodes = 0;
        if (telemetry) {
            // The GPM pipes last: eight optionals, each a presence byte
            // and, when set, a double.
            const GpuPipes& pipes = telemetry->pipes;
            size_t gpm = 0;
            for (const auto* pipe : {&pipes.sm_active_percent, &pipes.sm_occupancy_percent,
                                     &pipes.tensor_active_percent, &pipes.fp64_active_percent,
                                     &pipes.fp32_active_percent, &pipes.fp16_active_percent,
                                     &pipes.integer_active_percent, &pipes.dram_active_percent}) {
                gpm += pipe->has_value() ? 9 : 1;
            }
            const size_t limit = telemetry->power_limit_watts ? 9 : 1;
            const size_t draw = telemetry->power_watts ? 9 : 1;
            // Then the MIG lists (each a count and its elements): cut before
            // all three, or between them.
            Event without = event;
            std::get<Telemetry>(without.data).mig_nodes.clear();
            std::string shorter;
            encode_event(without, shorter);
            before_nodes = shorter.size() - 1;
            std::get<Telemetry>(without.data).process_instances.clear();
            shorter.clear();
            encode_event(without, shorter);
            const size_t before_instances = shorter.size() - 2;
            std::get<Telemetry>(without.data).mig_pipes.clear();
            shorter.clear();
            encode_event(without, shorter);
            const size_t before_mig = shorter.size() - 3;
            before_gpm = before_mig - gpm;
            older_ends = {before_nodes, before_instances,   before_mig,
                          before_gpm,   before_gpm - limit, before_gpm - limit - draw};
        }
        // A process_io record cut before its receive counters (varints):
        // where each begins, from the same event encoded without it (an
        // unset one is one byte).
        if (std::holds_alternative<ProcessIo>(event.data)) {
            Event without = event;
            auto& counters = std::get<ProcessIo>(without.data);
            counters.net_recvs.reset();
            std::string shorter;
            encode_event(without, shorter);
            const size_t before_recvs = shorter.size() - 1;
            counters.net_recv_bytes.reset();
            shorter.clear();
            encode_event(without, shorter);
            older_ends = {before_recvs, shorter.size() - 2};
        }
        // A scan cut before any of its trailing fields (each a length byte
        // and its bytes): error_kind, location_check, package_check,
        // package, library, the newest last.
        size_t before_location = 0, before_check = 0, before_package = 0, before_library = 0;
        if (scan) {
            const size_t before_kind = payload.size() - 1 - scan->error_kind.size();
            before_location = before_kind - 1 - scan->location_check.size();
            before_check = before_location - 1 - scan->package_check.size();
            before_package = before_check - 1 - scan->package.size();
            before_library = before_package - 1 - scan->library.size();
            older_ends = {before_kind, before_location, before_check, before_package,
                          before_library};
        }
        // A workload cut before any of its pod fields (each a length byte
        // and its bytes): pod_namespace, pod_name, pod_uid, container, the
        // newest last.
        const auto* workload = std::get_if<Workload>(&event.data);
        if (workload) {
            size_t end = payload.size();
            for (const std::string* field : {&workload->container, &workload->pod_uid,
                                             &workload->pod_name, &workload->pod_namespace}) {
                end -= 1 + field->size();
                older_ends.push_back(end);
            }
        }
        for (size_t cut = 0; cut < payload.size(); ++cut) {
            // A heap copy of exactly `cut` bytes so ASan sees any overread.
            std::unique_ptr<char[]> copy(new char[cut + 1]);
            std::memcpy(copy.get(), payload.data(), cut);
            Event decoded;
            std::string error;
            const bool read = decode_event(std::string_view(copy.get(), cut), decoded, error);
            if (std::find(older_ends.begin(), older_ends.end(), cut) != older_ends.end()) {
                ASSERT_TRUE(read) << error;
                if (snapshot) {
                    EXPECT_EQ(std::get<ProcessSnapshot>(decoded.data).exe_package, "");
                }
                if (connect) {
                    EXPECT_FALSE(std::get<Connect>(decoded.data).established);
                }
                if (config) {
                    EXPECT_EQ(std::get<ConfigFile>(decoded.data).error, "");
                }
                if (telemetry) {
                    const auto& older = std::get<Telemetry>(decoded.data);
                    EXPECT_TRUE(older.mig_nodes.empty());
                    if (cut < before_nodes) {
                        EXPECT_TRUE(older.process_instances.empty());
                    }
                    if (cut <= before_gpm) {
                        EXPECT_EQ(older.pipes, GpuPipes{});
                    }
                    if (cut < before_gpm) {
                        EXPECT_FALSE(older.power_limit_watts);
                    }
                }
                if (workload) {
                    EXPECT_EQ(std::get<Workload>(decoded.data).container, "");
                }
                if (scan) {
                    const auto& older = std::get<ExeScan>(decoded.data);
                    EXPECT_EQ(older.error_kind, "");
                    if (cut <= before_location) {
                        EXPECT_EQ(older.location_check, "");
                    }
                    if (cut <= before_check) {
                        EXPECT_EQ(older.package_check, "");
                    }
                    if (cut <= before_package) {
                        EXPECT_EQ(older.package, "");
                    }
                    if (cut <= before_library) {
                        EXPECT_EQ(older.library, "");
                    }
                }
                continue;
            }
            EXPECT_FALSE(read) << event_type_name(event) << " cut at " << cut;
        }
    }
}

TEST(JournalCodec, trailing_fields_of_a_newer_minor_version_are_ignored) {
    const auto event = testing::every_event_type().front();
    std::string payload;
    encode_event(event, payload);
    payload += std::string("\x05\x07\x09", 3);
    Event decoded;
    std::string error;
    ASSERT_TRUE(decode_event(payload, decoded, error)) << error;
    EXPECT_EQ(event_to_json(decoded, 0), event_to_json(event, 0));
}

TEST(JournalCodec, unknown_event_type_is_an_error) {
    std::string payload;
    encode_event(testing::every_event_type().front(), payload);
    payload[0] = 99;
    Event decoded;
    std::string error;
    EXPECT_FALSE(decode_event(payload, decoded, error));
    EXPECT_EQ(error, "unknown event type");
}

TEST(JournalCodec, other_records_round_trip) {
    std::string payload;
    const AlertRecord alert{123456789, 4242, "miner.stratum", R"({"rule":{"id":"x"}})"};
    encode_alert(alert, payload);
    AlertRecord alert_back;
    std::string error;
    ASSERT_TRUE(decode_alert(payload, alert_back, error));
    EXPECT_EQ(alert_back.ts_ns, alert.ts_ns);
    EXPECT_EQ(alert_back.pid, alert.pid);
    EXPECT_EQ(alert_back.rule_id, alert.rule_id);
    EXPECT_EQ(alert_back.json, alert.json);

    payload.clear();
    encode_gap(GapRecord{10, 2, 100, 200, "queue_full"}, payload);
    GapRecord gap;
    ASSERT_TRUE(decode_gap(payload, gap, error));
    EXPECT_EQ(gap.dropped_events, 10u);
    EXPECT_EQ(gap.dropped_records, 2u);
    EXPECT_EQ(gap.last_ts_ns, 200u);
    EXPECT_EQ(gap.reason, "queue_full");

    payload.clear();
    encode_clock(-1'700'000'000'123'456'789, payload);
    int64_t offset = 0;
    ASSERT_TRUE(decode_clock(payload, offset, error));
    EXPECT_EQ(offset, -1'700'000'000'123'456'789);

    payload.clear();
    const std::vector<GpuDeviceNumber> devices = {{195, std::nullopt, "nvidia-frontend"},
                                                  {1, 3, "config"}};
    encode_gpu_devices(devices, payload);
    std::vector<GpuDeviceNumber> devices_back;
    ASSERT_TRUE(decode_gpu_devices(payload, devices_back, error));
    EXPECT_EQ(devices_back, devices);
}

TEST(JournalCodec, header_round_trips_and_rejects_damage) {
    SegmentHeader header;
    header.sequence = 77;
    header.created_unix_ns = 1'790'000'000'000'000'000;
    header.created_mono_ns = 12345;
    header.realtime_offset_ns = 1'789'999'000'000'000'000;
    header.hostname = "gpu-node-7";
    header.boot_id = "abc";
    header.kernel = "6.18.0";
    header.agent_version = "0.1.0";
    header.rule_pack_version = "2026.11";
    header.compressed = true;
    const std::string bytes = encode_header(header);
    size_t size = 0;
    std::string error;
    auto back = decode_header(bytes, size, error);
    ASSERT_TRUE(back) << error;
    EXPECT_EQ(size, bytes.size());
    EXPECT_EQ(back->sequence, 77u);
    EXPECT_EQ(back->hostname, "gpu-node-7");
    EXPECT_EQ(back->rule_pack_version, "2026.11");
    EXPECT_TRUE(back->compressed);

    for (size_t i = 0; i < bytes.size(); ++i) {
        std::string damaged = bytes;
        damaged[i] ^= 0x10;
        EXPECT_FALSE(decode_header(damaged, size, error)) << "flip at " << i;
    }
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
        EXPECT_FALSE(decode_header(bytes.substr(0, cut), size, error)) << "cut at " << cut;
    }
    std::string other_major = bytes;
    other_major[8] = 2;
    EXPECT_FALSE(decode_header(other_major, size, error));
    EXPECT_NE(error.find("not supported"), std::string::npos) << error;
}

TEST(JournalCodec, frames_detect_truncation_and_corruption) {
    std::string bytes;
    append_frame(RecordKind::kNote, 0, "hello journal", bytes);
    Frame frame;
    ASSERT_EQ(check_frame(bytes, frame), FrameStatus::kOk);
    EXPECT_EQ(frame.kind, RecordKind::kNote);
    EXPECT_EQ(frame.payload, "hello journal");
    for (size_t cut = 1; cut < bytes.size(); ++cut) {
        EXPECT_EQ(check_frame(bytes.substr(0, cut), frame), FrameStatus::kTruncated)
            << "cut at " << cut;
    }
    for (size_t i = 0; i < bytes.size(); ++i) {
        for (int bit = 0; bit < 8; ++bit) {
            std::string damaged = bytes;
            damaged[i] ^= static_cast<char>(1 << bit);
            EXPECT_NE(check_frame(damaged, frame), FrameStatus::kOk) << i << ":" << bit;
        }
    }
}

}  // namespace
}  // namespace gpuguard::agent::journal
