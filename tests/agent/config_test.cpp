#include "agent/config.h"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

TEST(Config, embedded_default_loads_and_matches_struct_defaults) {
    auto config = load_config_text(default_config_yaml(), "<default>");
    ASSERT_TRUE(config.ok()) << config.error().message;
    const Config defaults;
    EXPECT_EQ(config->log.level, defaults.log.level);
    EXPECT_EQ(config->sensor.ring_buffer_kb, defaults.sensor.ring_buffer_kb);
    EXPECT_EQ(config->sensor.report_failed_opens, defaults.sensor.report_failed_opens);
    EXPECT_EQ(config->sensor.mount_tracefs, defaults.sensor.mount_tracefs);
    EXPECT_TRUE(config->sensor.btf_path.empty());
    EXPECT_TRUE(config->sensor.extra_gpu_devices.empty());
}

TEST(Config, reads_every_sensor_key) {
    auto config = load_config_text(R"(
log:
  level: debug
sensor:
  btf: /boot/vmlinux.btf
  ring_buffer_kb: 256
  report_failed_opens: false
  mount_tracefs: false
  extra_gpu_devices: ["1:3", "226:*"]
)",
                                   "test.yaml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->log.level, "debug");
    EXPECT_EQ(config->sensor.btf_path, "/boot/vmlinux.btf");
    EXPECT_EQ(config->sensor.ring_buffer_kb, 256u);
    EXPECT_FALSE(config->sensor.report_failed_opens);
    EXPECT_FALSE(config->sensor.mount_tracefs);
    ASSERT_EQ(config->sensor.extra_gpu_devices.size(), 2u);
    EXPECT_EQ(config->sensor.extra_gpu_devices[0].to_string(), "1:3");
    EXPECT_EQ(config->sensor.extra_gpu_devices[1].to_string(), "226:*");
}

TEST(Config, empty_document_means_defaults) {
    auto config = load_config_text("", "empty.yaml");
    ASSERT_TRUE(config.ok());
    EXPECT_EQ(config->sensor.ring_buffer_kb, 4096u);
}

TEST(Config, unknown_key_is_an_error_with_file_line_and_key) {
    auto config =
        load_config_text("sensor:\n  ring_buffer_kb: 64\n  ringbuffer_kb: 64\n", "a.yaml");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(config.error().message.rfind("a.yaml:3:3: sensor.ringbuffer_kb: unknown key", 0), 0u)
        << config.error().message;
}

TEST(Config, unknown_top_level_section_is_an_error) {
    auto config = load_config_text("sensors:\n  btf: x\n", "a.yaml");
    ASSERT_FALSE(config.ok());
    EXPECT_NE(config.error().message.find("a.yaml:1:1: sensors: unknown key"), std::string::npos)
        << config.error().message;
}

TEST(Config, bad_values_name_the_key_and_line) {
    struct Case {
        const char* yaml;
        const char* expected;
    } cases[] = {
        {"sensor:\n  ring_buffer_kb: 1000\n",
         "x.yaml:2:19: sensor.ring_buffer_kb: 1000 is not a power of two"},
        {"sensor:\n  ring_buffer_kb: lots\n",
         "x.yaml:2:19: sensor.ring_buffer_kb: must be a positive integer"},
        {"sensor:\n  report_failed_opens: maybe\n",
         "x.yaml:2:24: sensor.report_failed_opens: must be true or false"},
        {"sensor:\n  extra_gpu_devices: \"1:3\"\n",
         "x.yaml:2:22: sensor.extra_gpu_devices: must be a list"},
        {"sensor:\n  extra_gpu_devices:\n    - \"1:3\"\n    - \"1\"\n",
         "x.yaml:4:7: sensor.extra_gpu_devices[1]: bad GPU device number '1'"},
        {"sensor:\n  extra_gpu_devices: [\"4096:1\"]\n",
         "sensor.extra_gpu_devices[0]: bad GPU device number '4096:1': major"},
        {"log:\n  level: loud\n", "x.yaml:2:10: log.level: 'loud' is not one of"},
        {"sensor: [1, 2]\n", "x.yaml:1:9: sensor: must be a mapping"},
    };
    for (const auto& c : cases) {
        auto config = load_config_text(c.yaml, "x.yaml");
        ASSERT_FALSE(config.ok()) << c.yaml;
        EXPECT_NE(config.error().message.find(c.expected), std::string::npos)
            << "yaml: " << c.yaml << "\nmessage: " << config.error().message;
    }
}

TEST(Config, syntax_error_is_a_parse_error_with_position) {
    auto config = load_config_text("sensor:\n  btf: [unclosed\n", "s.yaml");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.error().code, ErrorCode::kParse);
    EXPECT_EQ(config.error().message.rfind("s.yaml:", 0), 0u);
    EXPECT_NE(config.error().message.find("YAML syntax error"), std::string::npos);
}

TEST(Config, file_errors_name_the_file) {
    gpuguard::testing::TempDir dir("gg-config");
    auto missing = load_config_file(dir / "nope.yaml");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.error().code, ErrorCode::kIo);
    EXPECT_NE(missing.error().message.find("nope.yaml"), std::string::npos);

    const auto path = dir / "ok.yaml";
    std::ofstream(path) << "sensor:\n  extra_gpu_devices: [\"1:3\"]\n";
    auto loaded = load_config_file(path);
    ASSERT_TRUE(loaded.ok()) << loaded.error().message;
    EXPECT_EQ(loaded->sensor.extra_gpu_devices.size(), 1u);
}

TEST(Config, show_output_loads_back_to_the_same_values) {
    auto original = load_config_text(
        "log: {level: warn}\nsensor: {ring_buffer_kb: 64, extra_gpu_devices: [\"1:3\", "
        "\"226:*\"]}\n",
        "x.yaml");
    ASSERT_TRUE(original.ok());
    const std::string shown = config_to_yaml(*original);
    auto again = load_config_text(shown, "shown.yaml");
    ASSERT_TRUE(again.ok()) << again.error().message << "\n" << shown;
    EXPECT_EQ(again->log.level, "warn");
    EXPECT_EQ(again->sensor.ring_buffer_kb, 64u);
    EXPECT_EQ(again->sensor.extra_gpu_devices, original->sensor.extra_gpu_devices);
}

TEST(Config, backends_and_metrics_defaults_match_the_embedded_file) {
    auto config = load_config_text(default_config_yaml(), "<default>");
    ASSERT_TRUE(config.ok()) << config.error().message;
    const Config defaults;
    EXPECT_EQ(config->backends.interval_ms, defaults.backends.interval_ms);
    EXPECT_EQ(config->backends.interval_ms, 1000u);
    EXPECT_TRUE(config->backends.nvidia && config->backends.amd && config->backends.intel &&
                config->backends.drm_fdinfo);
    EXPECT_EQ(config->backends.nvml_library, "");
    EXPECT_EQ(config->backends.sysfs_root, "/sys");
    EXPECT_EQ(config->backends.proc_root, "/proc");
    EXPECT_FALSE(config->metrics.enabled);
    EXPECT_EQ(config->metrics.listen, "127.0.0.1");
    EXPECT_EQ(config->metrics.port, defaults.metrics.port);
}

TEST(Config, reads_every_backends_and_metrics_key) {
    auto config = load_config_text(R"(
backends:
  interval_ms: 250
  nvidia: false
  amd: false
  intel: false
  drm_fdinfo: false
  nvml_library: /opt/fake/libnvidia-ml.so.1
  sysfs_root: /tmp/fixture/sys
  proc_root: /tmp/fixture/proc
metrics:
  enabled: true
  listen: "::1"
  port: 19100
)",
                                   "b.yaml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->backends.interval_ms, 250u);
    EXPECT_FALSE(config->backends.nvidia || config->backends.amd || config->backends.intel ||
                 config->backends.drm_fdinfo);
    EXPECT_EQ(config->backends.nvml_library, "/opt/fake/libnvidia-ml.so.1");
    EXPECT_EQ(config->backends.sysfs_root, "/tmp/fixture/sys");
    EXPECT_EQ(config->backends.proc_root, "/tmp/fixture/proc");
    EXPECT_TRUE(config->metrics.enabled);
    EXPECT_EQ(config->metrics.listen, "::1");
    EXPECT_EQ(config->metrics.port, 19100);
    auto again = load_config_text(config_to_yaml(*config), "shown.yaml");
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(again->backends.nvml_library, "/opt/fake/libnvidia-ml.so.1");
    EXPECT_EQ(again->metrics.listen, "::1");
    EXPECT_EQ(again->metrics.port, 19100);
}

TEST(Config, bad_backends_and_metrics_values_name_key_and_line) {
    struct Case {
        const char* yaml;
        const char* expected;
    } cases[] = {
        {"backends:\n  interval_ms: 50\n",
         "x.yaml:2:16: backends.interval_ms: 50 is not between 100 and 3600000"},
        {"backends:\n  amd: perhaps\n", "x.yaml:2:8: backends.amd: must be true or false"},
        {"backends:\n  proc_root: proc\n",
         "x.yaml:2:14: backends.proc_root: 'proc' is not an absolute path"},
        {"backends:\n  nvml: x\n", "x.yaml:2:3: backends.nvml: unknown key"},
        {"metrics:\n  listen: 0.0.0.0\n",
         "x.yaml:2:11: metrics.listen: '0.0.0.0' is not a loopback address"},
        {"metrics:\n  listen: 10.0.0.1\n", "metrics.listen: '10.0.0.1' is not a loopback"},
        {"metrics:\n  port: 70000\n", "x.yaml:2:9: metrics.port: 70000 is not 1-65535"},
        {"metrics:\n  port: 0\n", "x.yaml:2:9: metrics.port: 0 is not 1-65535"},
    };
    for (const auto& c : cases) {
        auto config = load_config_text(c.yaml, "x.yaml");
        ASSERT_FALSE(config.ok()) << c.yaml;
        EXPECT_EQ(config.error().code, ErrorCode::kInvalidArgument);
        EXPECT_NE(config.error().message.find(c.expected), std::string::npos)
            << config.error().message << "\n  expected: " << c.expected;
    }
    EXPECT_TRUE(load_config_text("metrics:\n  listen: 127.0.0.2\n", "x.yaml").ok());
}

}  // namespace
}  // namespace gpuguard::agent
