// Which keys a reload changes and which of them apply live; the file watch
// that triggers a reload without SIGHUP.
#include "gpuguard/daemon/config_reload.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/ops/service_support.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuguard::agent::Config;
using gpuguard::agent::ConfigFileWatch;
using gpuguard::agent::diff_config;

Config load(const std::string& yaml) {
    auto config = gpuguard::agent::load_config_text(yaml, "test.yaml");
    EXPECT_TRUE(config) << config.error().message;
    return config ? *config : Config{};
}

TEST(ConfigReload, identical_configs_have_no_changes) {
    const auto config = load("sensor:\n  extra_gpu_devices: [\"1:7\"]\n");
    EXPECT_TRUE(diff_config(config, config).empty());
    EXPECT_TRUE(
        diff_config(load(""), load(std::string(gpuguard::agent::default_config_yaml()))).empty())
        << "the embedded file sets every key to its default";
}

TEST(ConfigReload, log_level_applies_live_and_everything_else_needs_a_restart) {
    const auto running = load("");
    const auto next = load(
        "log:\n  level: debug\nsensor:\n  ring_buffer_kb: 8192\n  watched_ports: [3333]\n"
        "enforcement:\n  allowlist:\n    users: [alice]\n");
    const auto changes = diff_config(running, next);
    ASSERT_EQ(changes.size(), 4u);
    EXPECT_EQ(changes[0].key, "log.level");
    EXPECT_EQ(changes[0].old_value, "info");
    EXPECT_EQ(changes[0].new_value, "debug");
    EXPECT_TRUE(changes[0].applies_live);
    EXPECT_EQ(changes[1].key, "sensor.ring_buffer_kb");
    EXPECT_EQ(changes[1].old_value, "4096");
    EXPECT_EQ(changes[1].new_value, "8192");
    EXPECT_FALSE(changes[1].applies_live);
    EXPECT_EQ(changes[2].key, "sensor.watched_ports");  // a list is one change
    EXPECT_EQ(changes[2].new_value, "[3333]");
    EXPECT_FALSE(changes[2].applies_live);
    EXPECT_EQ(changes[3].key, "enforcement.allowlist.users");
    EXPECT_EQ(changes[3].new_value, "[alice]");
}

TEST(ConfigReload, adding_an_output_is_one_restart_only_change) {
    const auto next = load(
        "outputs:\n  - name: local\n    type: file\n    address: /var/log/gpuguard.json\n"
        "    format: ecs_json\n");
    const auto changes = diff_config(load(""), next);
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].key, "outputs");
    EXPECT_EQ(changes[0].old_value, "[]");
    EXPECT_NE(changes[0].new_value.find("/var/log/gpuguard.json"), std::string::npos);
    EXPECT_FALSE(changes[0].applies_live);
}

TEST(ConfigReload, a_new_sink_token_is_a_change_but_never_printed) {
    const std::string sink =
        "outputs:\n  - name: hec\n    type: splunk_hec\n    address: https://splunk:8088\n"
        "    token: ";
    const auto changes = diff_config(load(sink + "first-secret\n"), load(sink + "second-secret\n"));
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].key, "outputs");
    EXPECT_EQ(changes[0].old_value.find("secret"), std::string::npos) << changes[0].old_value;
    EXPECT_EQ(changes[0].new_value.find("secret"), std::string::npos) << changes[0].new_value;
    EXPECT_EQ(gpuguard::agent::config_to_yaml(load(sink + "first-secret\n")).find("secret"),
              std::string::npos);
}

TEST(ConfigReload, config_show_prints_every_sink_key_and_loads_back) {
    const auto config = load(
        "outputs:\n  - name: soc\n    type: tcp\n    address: collector.example:6514\n"
        "    format: cef\n    framing: rfc5424\n    min_severity: warning\n"
        "    detections: true\n    enforcement: false\n    facility: local3\n"
        "    app_name: gg\n    queue_dir: /var/lib/gpuguard/queue\n    queue_max_mb: 32\n"
        "    overflow: block\n    tls_server_name: soc.example\n    tls_verify: false\n"
        "    index: gpu\n    http_headers: [\"X-Team: soc\"]\n    file_max_bytes: 65536\n"
        "    file_max_files: 9\n    queue_fsync: false\n    block_timeout_ms: 250\n"
        "    batch_max_records: 42\n    retry_initial_ms: 20\n    retry_max_ms: 700\n"
        "    io_timeout_ms: 1500\n");
    const std::string shown = gpuguard::agent::config_to_yaml(config);
    for (const char* line :
         {"framing: rfc5424", "enforcement: false", "facility: local3", "app_name: gg",
          "queue_max_mb: 32", "overflow: block", "tls_server_name: soc.example",
          "tls_verify: false", "index: gpu", "http_headers: [\"X-Team: soc\"]",
          "file_max_bytes: 65536", "file_max_files: 9", "queue_fsync: false",
          "block_timeout_ms: 250", "batch_max_records: 42", "retry_initial_ms: 20",
          "retry_max_ms: 700", "io_timeout_ms: 1500"}) {
        EXPECT_NE(shown.find(line), std::string::npos) << line << "\n" << shown;
    }
    const auto again = load(shown);
    EXPECT_TRUE(diff_config(config, again).empty()) << shown;
    ASSERT_EQ(again.outputs.size(), 1u);
    const auto& sink = again.outputs[0];
    EXPECT_EQ(sink.http_headers, config.outputs[0].http_headers);
    EXPECT_EQ(sink.file_max_bytes, 65536u);
    EXPECT_EQ(sink.file_max_files, 9u);
    EXPECT_FALSE(sink.queue_fsync);
    EXPECT_EQ(sink.block_timeout.count(), 250);
    EXPECT_EQ(sink.batch_max_records, 42u);
    EXPECT_EQ(sink.retry_initial.count(), 20);
    EXPECT_EQ(sink.retry_max.count(), 700);
    EXPECT_EQ(sink.io_timeout.count(), 1500);
}

TEST(ConfigReload, a_new_credential_header_is_a_change_but_never_printed) {
    const std::string sink =
        "outputs:\n  - name: hook\n    type: webhook\n    address: https://h.example/in\n"
        "    http_headers: [\"Authorization: Bearer ";
    const auto changes =
        diff_config(load(sink + "first-secret\"]\n"), load(sink + "second-secret\"]\n"));
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].key, "outputs");
    EXPECT_EQ(changes[0].old_value.find("secret"), std::string::npos) << changes[0].old_value;
    EXPECT_EQ(changes[0].new_value.find("secret"), std::string::npos) << changes[0].new_value;
}

TEST(ConfigFileWatch, sees_writes_and_replacements_of_its_file_only) {
    gpuguard::testing::TempDir dir("gg-watch");
    const auto file = dir / "gpuguard.yaml";
    std::ofstream(file) << "log:\n  level: info\n";
    auto watch = ConfigFileWatch::start(file);
    ASSERT_TRUE(watch) << watch.error().message;
    EXPECT_FALSE(watch->changed());

    std::ofstream(dir / "other.yaml") << "x: 1\n";
    EXPECT_FALSE(watch->changed()) << "a neighbour changed, not the file";

    std::ofstream(file) << "log:\n  level: debug\n";
    EXPECT_TRUE(watch->changed());
    EXPECT_FALSE(watch->changed()) << "one change is reported once";

    gpuguard::testing::replace_file(file, "log:\n  level: warn\n");
    EXPECT_TRUE(watch->changed()) << "rename over the file";

    ConfigFileWatch moved = std::move(watch).value();
    std::ofstream(file, std::ios::app) << "\n";
    EXPECT_TRUE(moved.changed());
}

// A ConfigMap volume as kubelet's AtomicWriter writes it: gpuguard.yaml a
// link through ..data, an update a new directory and a rename of a new
// ..data link over the old one (the file's own link never changes).
TEST(ConfigFileWatch, sees_a_configmap_update) {
    namespace fs = std::filesystem;
    gpuguard::testing::TempDir dir("gg-watch-cm");
    const auto generation = [&](const std::string& name, const std::string& text) {
        fs::create_directory(dir / name);
        std::ofstream(dir / name / "gpuguard.yaml") << text;
        fs::create_symlink(name, dir / "..data_tmp");
        fs::rename(dir / "..data_tmp", dir / "..data");
    };
    generation("..2026_11_28_first", "log:\n  level: info\n");
    fs::create_symlink("..data/gpuguard.yaml", dir / "gpuguard.yaml");
    auto watch = ConfigFileWatch::start(dir / "gpuguard.yaml");
    ASSERT_TRUE(watch) << watch.error().message;
    EXPECT_FALSE(watch->changed());
    generation("..2026_11_28_second", "log:\n  level: debug\n");
    EXPECT_TRUE(watch->changed()) << "the ..data swap was not seen";
    EXPECT_EQ(gpuguard::testing::file_text(dir / "gpuguard.yaml"), "log:\n  level: debug\n");
}

TEST(ConfigFileWatch, fails_for_a_missing_directory) {
    const auto watch = ConfigFileWatch::start("/nonexistent-gpuguard-dir/gpuguard.yaml");
    ASSERT_FALSE(watch);
    EXPECT_NE(watch.error().message.find("/nonexistent-gpuguard-dir"), std::string::npos);
}

}  // namespace
