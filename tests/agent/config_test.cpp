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

}  // namespace
}  // namespace gpuguard::agent
