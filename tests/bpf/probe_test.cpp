// `gpuguard probe`: every feature is decided by loading a program and
// reported with a reason; what this host refuses is reported, not fatal.
#include <algorithm>
#include <filesystem>
#include <set>

#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpuguard/sensor/sensor_probe.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/sensor_harness.h"

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
        if (!feature.available && feature.name != "btf" && feature.name != "tracefs" &&
            feature.name != "module_load") {
            // A refused load names its errno, e.g. "load refused: EPERM (...)".
            EXPECT_NE(feature.detail.find(": E"), std::string::npos) << feature.detail;
        }
    }
    for (const char* expected :
         {"btf", "tracefs", "ring_buffer", "tracepoint", "raw_tracepoint", "tp_btf",
          "sock_send_length", "fentry", "bpf_lsm", "cgroup_device", "cgroup_connect", "module_load",
          "bpf_send_signal", "attach_mode"}) {
        EXPECT_TRUE(names.contains(expected)) << expected;
    }
}

TEST(SensorProbe, cli_prints_json_and_succeeds) {
    GG_REQUIRE_PRIVILEGED();
    const auto result = gpuguard::testing::run_command({GPUGUARD_BINARY, "probe", "--json"});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const auto parsed = nlohmann::json::parse(result.stdout_text);
    ASSERT_TRUE(parsed.is_array());
    EXPECT_EQ(parsed.size(), 14u);
    for (const auto& feature : parsed) {
        EXPECT_TRUE(feature["available"].is_boolean());
        EXPECT_TRUE(feature["detail"].is_string());
    }
}

// Kernel module loads: the probe row and the sensor's program follow the
// module:module_load tracepoint, which only a kernel with CONFIG_MODULES has
// (this build host has none: both say so; the vmtests kernels have it).
TEST(SensorProbe, module_load_follows_the_kernels_tracepoint) {
    GG_REQUIRE_PRIVILEGED();
    const auto features = probe_kernel_features(ProbeOptions{});  // mounts tracefs if needed
    const auto row = std::find_if(features.begin(), features.end(),
                                  [](const auto& f) { return f.name == "module_load"; });
    ASSERT_NE(row, features.end());
    const bool tracepoint =
        std::filesystem::exists(ProbeOptions{}.tracefs_dir + "/events/module/module_load");
    EXPECT_EQ(row->available, tracepoint) << row->detail;
    EXPECT_FALSE(row->required);
    if (!tracepoint) {
        EXPECT_NE(row->detail.find("CONFIG_MODULES"), std::string::npos) << row->detail;
    }

    gpuguard::testing::SensorHarness harness;
    const auto error = harness.open(gpuguard::testing::test_sensor_options());
    ASSERT_FALSE(error) << *error;
    const auto hooks = harness.sensor().attached_hooks();
    EXPECT_EQ(std::find(hooks.begin(), hooks.end(), "tp_btf/module_load") != hooks.end(),
              tracepoint);
}

// The socket-layer payload hooks: available exactly where the kernel's BTF
// has both tracepoints (6.3+), and the sensor attaches the variant the probe
// picks.
TEST(SensorProbe, socket_layer_hooks_decide_the_payload_variant) {
    GG_REQUIRE_PRIVILEGED();
    const FeatureStatus socket_layer = probe_socket_layer("");
    EXPECT_EQ(socket_layer.name, "sock_send_length");
    const bool in_btf = libbpf_find_vmlinux_btf_id("sock_send_length", BPF_TRACE_RAW_TP) > 0 &&
                        libbpf_find_vmlinux_btf_id("sock_recv_length", BPF_TRACE_RAW_TP) > 0;
    EXPECT_EQ(socket_layer.available, in_btf) << socket_layer.detail;
    if (!socket_layer.available) {
        EXPECT_NE(socket_layer.detail.find(": E"), std::string::npos) << socket_layer.detail;
    }
    const auto features = probe_kernel_features(ProbeOptions{});
    const auto listed = std::find_if(features.begin(), features.end(),
                                     [](const auto& f) { return f.name == "sock_send_length"; });
    ASSERT_NE(listed, features.end());
    EXPECT_EQ(listed->available, socket_layer.available);
    EXPECT_FALSE(listed->required);

    for (const bool syscall_hooks : {false, true}) {
        gpuguard::testing::SensorHarness harness;
        SensorOptions options = gpuguard::testing::test_sensor_options(true);
        options.config.payload_syscall_hooks = syscall_hooks;
        const auto error = harness.open(options);
        ASSERT_FALSE(error) << *error;
        const auto hooks = harness.sensor().attached_hooks();
        const auto has = [&](const char* hook) {
            return std::find(hooks.begin(), hooks.end(), hook) != hooks.end();
        };
        const bool socket_variant = socket_layer.available && !syscall_hooks;
        EXPECT_EQ(has("tp_btf/sock_send_length"), socket_variant);
        EXPECT_EQ(has("tp_btf/sock_recv_length"), socket_variant);
        EXPECT_EQ(harness.sensor().payload_hooks(), socket_variant ? "socket_layer" : "syscalls");
        // The syscall variant's own hooks where the mode has them (the raw
        // dispatchers sample payloads in their sys_enter/sys_exit programs).
        switch (harness.sensor().attach_mode()) {
            case gpuguard::agent::AttachMode::kSyscallTracepoints:
                EXPECT_EQ(has("syscalls/sys_exit_write"), !socket_variant);
                EXPECT_EQ(has("syscalls/sys_exit_recvfrom"), !socket_variant);
                break;
            case gpuguard::agent::AttachMode::kKernelFunctions:
                EXPECT_EQ(has("fexit/__x64_sys_write"), !socket_variant);
                EXPECT_EQ(has("fexit/__x64_sys_recvfrom"), !socket_variant);
                break;
            default:
                EXPECT_TRUE(has("tp_btf/sys_exit") || has("raw/sys_exit"));
                break;
        }
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
