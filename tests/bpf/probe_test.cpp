// `gpuguard probe`: every feature is decided by loading a program and
// reported with a reason; what this host refuses is reported, not fatal.
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/sensor_probe.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"

namespace gpuguard::agent {
namespace {

TEST(SensorProbe, reports_every_feature_with_a_reason) {
    GG_REQUIRE_PRIVILEGED();
    const auto features = probe_kernel_features(ProbeOptions{});
    std::set<std::string> names;
    for (const auto& feature : features) {
        names.insert(feature.name);
        EXPECT_FALSE(feature.detail.empty()) << feature.name;
        if (feature.required) {
            EXPECT_TRUE(feature.available) << feature.name << ": " << feature.detail;
        }
        if (!feature.available && feature.name != "btf" && feature.name != "tracefs") {
            // A refused load names its errno, e.g. "load refused: EPERM (...)".
            EXPECT_NE(feature.detail.find(": E"), std::string::npos) << feature.detail;
        }
    }
    for (const char* expected :
         {"btf", "tracefs", "ring_buffer", "tracepoint", "raw_tracepoint", "tp_btf", "fentry",
          "bpf_lsm", "cgroup_device", "cgroup_connect", "bpf_send_signal"}) {
        EXPECT_TRUE(names.contains(expected)) << expected;
    }
}

TEST(SensorProbe, cli_prints_json_and_succeeds) {
    GG_REQUIRE_PRIVILEGED();
    const auto result = gpuguard::testing::run_command({GPUGUARD_BINARY, "probe", "--json"});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const auto parsed = nlohmann::json::parse(result.stdout_text);
    ASSERT_TRUE(parsed.is_array());
    EXPECT_EQ(parsed.size(), 11u);
    for (const auto& feature : parsed) {
        EXPECT_TRUE(feature["available"].is_boolean());
        EXPECT_TRUE(feature["detail"].is_string());
    }
}

TEST(SensorProbe, bad_btf_is_reported_missing_and_fails) {
    GG_REQUIRE_PRIVILEGED();
    const auto result =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "probe", "--btf", "/nonexistent.btf"});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.stdout_text.find("btf              MISSING      BTF file /nonexistent.btf"),
              std::string::npos)
        << result.stdout_text;
    // The rest is still probed.
    EXPECT_NE(result.stdout_text.find("bpf_send_signal"), std::string::npos);
}

TEST(SensorProbe, unprivileged_probe_says_to_run_as_root) {
    GG_REQUIRE_PRIVILEGED();
    const auto result =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "probe"}, std::chrono::seconds(30), 65534);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.stderr_text.find("run gpuguard as root"), std::string::npos)
        << result.stderr_text;
    EXPECT_TRUE(result.stdout_text.empty());
}

}  // namespace
}  // namespace gpuguard::agent
