#include "backends/fdinfo.h"

#include <gtest/gtest.h>

#include "tests/backends/sysfs_fixture.h"

namespace gpuguard::backends::detail {
namespace {

using namespace std::chrono_literals;
using backends::testing::amdgpu_fdinfo;
using backends::testing::asahi_fdinfo;
using backends::testing::i915_fdinfo;
using backends::testing::msm_fdinfo;
using backends::testing::xe_fdinfo;

FdinfoRecord parse_ok(const std::string& text) {
    auto parsed = parse_fdinfo(text, "fdinfo");
    EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
    EXPECT_TRUE(parsed.ok() && parsed->has_value());
    return parsed.ok() && parsed->has_value() ? **parsed : FdinfoRecord{};
}

TEST(Fdinfo, amdgpu_keys_units_and_legacy_memory) {
    const auto record = parse_ok(amdgpu_fdinfo(42, "0000:03:00.0", 1048576, 5000000000, 1000000));
    EXPECT_EQ(record.driver, "amdgpu");
    EXPECT_EQ(record.client_id, 42u);
    EXPECT_EQ(record.pdev, "0000:03:00.0");
    EXPECT_EQ(record.engine_ns.at("gfx"), 5000000000u);
    EXPECT_EQ(record.engine_ns.at("compute"), 1000000u);
    EXPECT_EQ(record.memory.at("resident-vram"), 1048576ull * 1024);
    EXPECT_EQ(record.memory.at("memory-gtt"), 8192ull * 1024);  // "drm-memory-gtt: \t" spacing
    // VRAM only: GTT and CPU are system memory on a discrete card.
    EXPECT_EQ(device_memory_bytes(record), 1048576ull * 1024);
    EXPECT_EQ(engine_busy_ns(record), 5001000000u);
}

TEST(Fdinfo, i915_capacity_and_integrated_memory) {
    const auto record = parse_ok(i915_fdinfo(7, "0000:00:02.0", 9288864723, 10));
    EXPECT_EQ(record.engine_ns.at("video-enhance"), 0u);
    EXPECT_EQ(record.engine_capacity.at("video"), 2u);
    EXPECT_FALSE(record.engine_ns.contains("capacity-video"));
    // No VRAM region: all resident memory counts (system0 + stolen-system0).
    EXPECT_EQ(device_memory_bytes(record), 12ull << 20);
}

TEST(Fdinfo, xe_cycles_and_vram_regions) {
    const auto record = parse_ok(xe_fdinfo(3, "0000:03:00.0", 100, 1000, 0));
    EXPECT_TRUE(record.engine_ns.empty());
    EXPECT_EQ(record.cycles.at("rcs"), 100u);
    EXPECT_EQ(record.total_cycles.at("rcs"), 1000u);
    EXPECT_EQ(record.engine_capacity.at("ccs"), 4u);
    EXPECT_EQ(device_memory_bytes(record), 256ull << 20);
    EXPECT_FALSE(engine_busy_ns(record).has_value());
}

TEST(Fdinfo, asahi_core_stats_without_pdev) {
    const auto record = parse_ok(asahi_fdinfo(12, 301, -1));
    EXPECT_EQ(record.driver, "asahi");
    EXPECT_TRUE(record.pdev.empty());
    EXPECT_EQ(device_memory_bytes(record), 301ull << 20);
    EXPECT_FALSE(engine_busy_ns(record).has_value());
}

TEST(Fdinfo, regular_file_is_not_a_drm_client) {
    auto parsed = parse_fdinfo("pos:\t4096\nflags:\t0100000\nmnt_id:\t28\nino:\t3141\n", "x");
    ASSERT_TRUE(parsed.ok());
    EXPECT_FALSE(parsed->has_value());
}

TEST(Fdinfo, garbage_value_names_file_line_and_text) {
    auto parsed = parse_fdinfo("pos:\t0\ndrm-driver:\tamdgpu\ndrm-engine-gfx:\tlots ns\n",
                               "/proc/7/fdinfo/5");
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.error().code, ErrorCode::kParse);
    EXPECT_EQ(parsed.error().message,
              "/proc/7/fdinfo/5:3: drm-engine-gfx: not a counter: 'lots ns'");
    auto unit = parse_fdinfo("drm-driver:\tx\ndrm-resident-vram:\t12 furlongs\n", "f");
    ASSERT_FALSE(unit.ok());
    EXPECT_NE(unit.error().message.find("f:2: drm-resident-vram: not a size"), std::string::npos);
}

TEST(ClientTracker, first_update_has_no_rate_then_percent_of_wall_time) {
    ClientTracker tracker;
    auto first = parse_ok(amdgpu_fdinfo(1, "p", 0, 1000000000, 0));
    EXPECT_TRUE(tracker.update("k", first, 10s).percent.empty());
    auto second = parse_ok(amdgpu_fdinfo(1, "p", 0, 1500000000, 250000000));
    const auto usage = tracker.update("k", second, 11s);
    EXPECT_DOUBLE_EQ(usage.percent.at("gfx"), 50.0);
    EXPECT_DOUBLE_EQ(usage.percent.at("compute"), 25.0);
}

TEST(ClientTracker, capacity_divides_engine_time) {
    ClientTracker tracker;
    tracker.update("k", parse_ok(i915_fdinfo(1, "p", 0, 0)), 0s);
    // 1 s of video time in 1 s over 2 video engines = 50 %.
    const auto usage = tracker.update("k", parse_ok(i915_fdinfo(1, "p", 0, 1000000000)), 1s);
    EXPECT_DOUBLE_EQ(usage.percent.at("video"), 50.0);
    EXPECT_DOUBLE_EQ(usage.percent.at("render"), 0.0);
}

TEST(ClientTracker, xe_cycles_against_gpu_timestamp) {
    ClientTracker tracker;
    tracker.update("k", parse_ok(xe_fdinfo(3, "p", 1000, 10000, 0)), 0s);
    const auto usage = tracker.update("k", parse_ok(xe_fdinfo(3, "p", 1750, 11000, 2000)), 1s);
    EXPECT_DOUBLE_EQ(usage.percent.at("rcs"), 75.0);
    EXPECT_DOUBLE_EQ(usage.percent.at("ccs"), 50.0);  // 2000 / 1000 / capacity 4
}

TEST(ClientTracker, counter_going_backwards_gives_no_value_not_a_huge_one) {
    ClientTracker tracker;
    tracker.update("k", parse_ok(amdgpu_fdinfo(1, "p", 0, 5000000000, 100)), 0s);
    // gfx wrapped / reset; compute kept counting.
    auto usage = tracker.update("k", parse_ok(amdgpu_fdinfo(1, "p", 0, 1000, 200000100)), 1s);
    EXPECT_FALSE(usage.percent.contains("gfx"));
    EXPECT_DOUBLE_EQ(usage.percent.at("compute"), 20.0);
    // The new value is the baseline for the next interval.
    usage = tracker.update("k", parse_ok(amdgpu_fdinfo(1, "p", 0, 100001000, 200000100)), 2s);
    EXPECT_DOUBLE_EQ(usage.percent.at("gfx"), 10.0);
    // xe GPU timestamp wrapping back.
    tracker.update("x", parse_ok(xe_fdinfo(3, "p", 1000, 1u << 30, 0)), 0s);
    usage = tracker.update("x", parse_ok(xe_fdinfo(3, "p", 1100, 100, 0)), 1s);
    EXPECT_FALSE(usage.percent.contains("rcs"));
}

TEST(ClientTracker, above_wall_time_is_clamped_and_closed_clients_forgotten) {
    ClientTracker tracker;
    tracker.update("k", parse_ok(msm_fdinfo(1, 0, 1)), 0s);
    tracker.end_round();
    const auto usage = tracker.update("k", parse_ok(msm_fdinfo(1, 3000000000, 1)), 1s);
    EXPECT_DOUBLE_EQ(usage.percent.at("gpu"), 100.0);
    tracker.end_round();
    EXPECT_EQ(tracker.size(), 1u);
    tracker.end_round();  // not updated this round
    EXPECT_EQ(tracker.size(), 0u);
}

}  // namespace
}  // namespace gpuguard::backends::detail
