#include "gpuguard/daemon/config.h"

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
    EXPECT_EQ(config->sensor.watch_processes_max, defaults.sensor.watch_processes_max);
    EXPECT_EQ(config->sensor.watch_addresses_max, defaults.sensor.watch_addresses_max);
    EXPECT_EQ(config->sensor.watch_address_min_ttl_s, defaults.sensor.watch_address_min_ttl_s);
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
  watch_processes_max: 128
  watch_addresses_max: 64
  watch_address_min_ttl_s: 30
  watch_files: [/etc/ld.so.preload, "/etc/cron*", .bashrc, "~/.config/systemd/user/"]
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
    EXPECT_EQ(config->sensor.watch_processes_max, 128u);
    EXPECT_EQ(config->sensor.watch_addresses_max, 64u);
    EXPECT_EQ(config->sensor.watch_address_min_ttl_s, 30u);
    EXPECT_EQ(config->sensor.watch_files,
              (std::vector<std::string>{"/etc/ld.so.preload", "/etc/cron*", ".bashrc",
                                        "~/.config/systemd/user/"}));
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
        {"sensor:\n  watch_files: [/etc/x, cron.d/y]\n",
         "x.yaml:2:25: sensor.watch_files[1]: sensor.watch_files entry 'cron.d/y': a relative "
         "entry is a file name, without '/'"},
        {"sensor:\n  watch_files: [\"/etc/cr*n\"]\n",
         "x.yaml:2:17: sensor.watch_files[0]: sensor.watch_files entry '/etc/cr*n': '*' may only "
         "end an entry"},
        {"sensor:\n  watch_processes_max: 0\n",
         "x.yaml:2:24: sensor.watch_processes_max: 0 is not 1-262144"},
        {"sensor:\n  watch_addresses_max: many\n",
         "x.yaml:2:24: sensor.watch_addresses_max: must be an integer 1-262144"},
        {"sensor:\n  watch_address_min_ttl_s: -1\n",
         "x.yaml:2:28: sensor.watch_address_min_ttl_s: must be a number of seconds"},
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

// kubelet: the embedded file's values are the struct's; every key is read,
// shown by `config show` and loaded back; bad values name the key and line.
TEST(Config, kubelet_keys_are_read_shown_and_checked) {
    auto embedded = load_config_text(default_config_yaml(), "<default>");
    ASSERT_TRUE(embedded.ok()) << embedded.error().message;
    const KubeletConfig defaults;
    EXPECT_EQ(embedded->kubelet.pod_resources_socket, defaults.pod_resources_socket);
    EXPECT_EQ(embedded->kubelet.root, defaults.root);
    EXPECT_EQ(embedded->kubelet.refresh_interval_s, defaults.refresh_interval_s);
    EXPECT_EQ(embedded->kubelet.call_timeout_ms, defaults.call_timeout_ms);
    EXPECT_EQ(embedded->kubelet.gpu_infrastructure_namespaces,
              defaults.gpu_infrastructure_namespaces);
    EXPECT_EQ(defaults.gpu_infrastructure_namespaces.front(), "kube-system");

    auto config = load_config_text(R"(
kubelet:
  pod_resources_socket: ""
  root: /srv/kubelet
  refresh_interval_s: 5
  call_timeout_ms: 500
  gpu_infrastructure_namespaces: [gpu-operator, "ops-*"]
)",
                                   "k.yaml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_EQ(config->kubelet.pod_resources_socket, "");
    EXPECT_EQ(config->kubelet.root, "/srv/kubelet");
    EXPECT_EQ(config->kubelet.refresh_interval_s, 5u);
    EXPECT_EQ(config->kubelet.call_timeout_ms, 500u);
    EXPECT_EQ(config->kubelet.gpu_infrastructure_namespaces,
              (std::vector<std::string>{"gpu-operator", "ops-*"}));
    auto again = load_config_text(config_to_yaml(*config), "shown.yaml");
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_EQ(again->kubelet.gpu_infrastructure_namespaces,
              config->kubelet.gpu_infrastructure_namespaces);
    EXPECT_EQ(again->kubelet.root, "/srv/kubelet");
    // An empty list judges every namespace's pods.
    auto none = load_config_text("kubelet:\n  gpu_infrastructure_namespaces: []\n", "k.yaml");
    ASSERT_TRUE(none.ok()) << none.error().message;
    EXPECT_TRUE(none->kubelet.gpu_infrastructure_namespaces.empty());

    struct Case {
        const char* yaml;
        const char* expected;
    } cases[] = {
        {"kubelet:\n  gpu_infrastructure_namespaces: gpu-operator\n",
         "k.yaml:2:34: kubelet.gpu_infrastructure_namespaces: must be a list of strings"},
        {"kubelet:\n  gpu_infrastructure_namespaces: [gpu-operator, GPU_Ops]\n",
         "k.yaml:2:49: kubelet.gpu_infrastructure_namespaces[1]: 'GPU_Ops' is not a namespace "
         "or a glob of one"},
        {"kubelet:\n  gpu_infrastructure_namespaces: [\"\"]\n",
         "kubelet.gpu_infrastructure_namespaces[0]: '' is not a namespace"},
        {"kubelet:\n  root: var/lib/kubelet\n",
         "k.yaml:2:9: kubelet.root: 'var/lib/kubelet' is not absolute"},
        {"kubelet:\n  refresh_interval_s: 0\n",
         "k.yaml:2:23: kubelet.refresh_interval_s: 0 is not between 1 and 3600"},
        {"kubelet:\n  call_timeout: 5\n", "k.yaml:2:3: kubelet.call_timeout: unknown key"},
    };
    for (const auto& c : cases) {
        auto bad = load_config_text(c.yaml, "k.yaml");
        ASSERT_FALSE(bad.ok()) << c.yaml;
        EXPECT_NE(bad.error().message.find(c.expected), std::string::npos)
            << "yaml: " << c.yaml << "\nmessage: " << bad.error().message;
    }
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

// Every field of siem::SinkConfig is reachable from the YAML file: each key
// set to a value other than the default lands in its field.
TEST(Config, reads_every_sink_key) {
    testing::TempDir dir;
    const auto pem = [&](const char* name) {
        std::ofstream(dir / name) << "-----BEGIN CERTIFICATE-----\n";
        return (dir / name).string();
    };
    const std::string ca = pem("ca.pem"), cert = pem("agent.pem"), key = pem("agent.key");
    const std::string yaml =
        "outputs:\n"
        "  - name: soc\n"
        "    type: tls\n"
        "    format: cef\n"
        "    framing: rfc3164\n"
        "    min_severity: warning\n"
        "    detections: false\n"
        "    enforcement: false\n"
        "    address: collector.example:6514\n"
        "    tls_ca_file: " +
        ca +
        "\n"
        "    tls_cert_file: " +
        cert +
        "\n"
        "    tls_key_file: " +
        key +
        "\n"
        "    tls_server_name: soc.example\n"
        "    tls_verify: false\n"
        "    token: t0k3n\n"
        "    index: gpu\n"
        "    http_headers: [\"X-Team: soc\", \"X-Env: prod\"]\n"
        "    facility: local5\n"
        "    app_name: gg\n"
        "    file_max_bytes: 65536\n"
        "    file_max_files: 9\n"
        "    queue_dir: /var/lib/gg/q\n"
        "    queue_max_mb: 3\n"
        "    queue_fsync: false\n"
        "    overflow: block\n"
        "    block_timeout_ms: 250\n"
        "    batch_max_records: 42\n"
        "    retry_initial_ms: 20\n"
        "    retry_max_ms: 700\n"
        "    io_timeout_ms: 1500\n";
    auto config = load_config_text(yaml, "s.yaml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    ASSERT_EQ(config->outputs.size(), 1u);
    const siem::SinkConfig& sink = config->outputs[0];
    EXPECT_EQ(sink.name, "soc");
    EXPECT_EQ(sink.type, siem::SinkType::kTls);
    EXPECT_EQ(sink.format, siem::Format::kCef);
    EXPECT_EQ(sink.framing, siem::Framing::kRfc3164);
    EXPECT_EQ(sink.min_severity, Severity::kWarning);
    EXPECT_FALSE(sink.detections);
    EXPECT_FALSE(sink.enforcement);
    EXPECT_EQ(sink.address, "collector.example:6514");
    EXPECT_EQ(sink.tls_ca_file, ca);
    EXPECT_EQ(sink.tls_cert_file, cert);
    EXPECT_EQ(sink.tls_key_file, key);
    EXPECT_EQ(sink.tls_server_name, "soc.example");
    EXPECT_FALSE(sink.tls_verify);
    EXPECT_EQ(sink.token, "t0k3n");
    EXPECT_EQ(sink.index, "gpu");
    EXPECT_EQ(sink.http_headers, (std::vector<std::string>{"X-Team: soc", "X-Env: prod"}));
    EXPECT_EQ(sink.facility, "local5");
    EXPECT_EQ(sink.app_name, "gg");
    EXPECT_EQ(sink.file_max_bytes, 65536u);
    EXPECT_EQ(sink.file_max_files, 9u);
    EXPECT_EQ(sink.queue_dir, "/var/lib/gg/q");
    EXPECT_EQ(sink.queue_max_bytes, 3u << 20);
    EXPECT_FALSE(sink.queue_fsync);
    EXPECT_EQ(sink.overflow, siem::OverflowPolicy::kBlock);
    EXPECT_EQ(sink.block_timeout, std::chrono::milliseconds(250));
    EXPECT_EQ(sink.batch_max_records, 42u);
    EXPECT_EQ(sink.retry_initial, std::chrono::milliseconds(20));
    EXPECT_EQ(sink.retry_max, std::chrono::milliseconds(700));
    EXPECT_EQ(sink.io_timeout, std::chrono::milliseconds(1500));

    // None of these values is a default, so a key that were read into the
    // wrong field, or not at all, shows up here too.
    const siem::SinkConfig defaults;
    EXPECT_NE(sink.file_max_bytes, defaults.file_max_bytes);
    EXPECT_NE(sink.file_max_files, defaults.file_max_files);
    EXPECT_NE(sink.queue_fsync, defaults.queue_fsync);
    EXPECT_NE(sink.block_timeout, defaults.block_timeout);
    EXPECT_NE(sink.batch_max_records, defaults.batch_max_records);
    EXPECT_NE(sink.retry_initial, defaults.retry_initial);
    EXPECT_NE(sink.retry_max, defaults.retry_max);
    EXPECT_NE(sink.io_timeout, defaults.io_timeout);
}

TEST(Config, bad_sink_values_name_file_line_and_key) {
    const std::string head = "outputs:\n  - name: s\n    type: tcp\n    address: c.example:514\n";
    struct Case {
        const char* lines;
        const char* expected;
    } cases[] = {
        {"    file_max_bytes: -1\n",
         "o.yaml:5:21: outputs[0].file_max_bytes: must be a non-negative integer"},
        {"    file_max_bytes: 2000000000000\n",
         "o.yaml:5:21: outputs[0].file_max_bytes: 2000000000000 is not between 0 and "
         "1099511627776"},
        {"    file_max_files: 1001\n",
         "o.yaml:5:21: outputs[0].file_max_files: 1001 is not between 0 and 1000"},
        {"    file_max_files: many\n",
         "o.yaml:5:21: outputs[0].file_max_files: must be a non-negative integer"},
        {"    queue_max_mb: 0\n", "o.yaml:5:19: outputs[0].queue_max_mb: 0 is not between 1 and"},
        {"    queue_fsync: sometimes\n",
         "o.yaml:5:18: outputs[0].queue_fsync: must be true or false"},
        {"    block_timeout_ms: 600001\n",
         "o.yaml:5:23: outputs[0].block_timeout_ms: 600001 is not between 0 and 600000"},
        {"    batch_max_records: 100001\n",
         "o.yaml:5:24: outputs[0].batch_max_records: 100001 is not between 0 and 100000"},
        {"    retry_initial_ms: 0\n",
         "o.yaml:5:23: outputs[0].retry_initial_ms: 0 is not between 1 and 3600000"},
        {"    retry_initial_ms: 2000\n    retry_max_ms: 1000\n",
         "o.yaml:6:19: outputs[0].retry_max_ms: retry_max_ms (1000) is smaller than "
         "retry_initial_ms (2000)"},
        {"    retry_initial_ms: 40000\n",
         "o.yaml:5:23: outputs[0].retry_initial_ms: retry_max_ms (30000) is smaller than "
         "retry_initial_ms (40000)"},
        {"    io_timeout_ms: 0\n",
         "o.yaml:5:20: outputs[0].io_timeout_ms: 0 is not between 1 and 600000"},
        {"    io_timeout_ms: 1.5\n",
         "o.yaml:5:20: outputs[0].io_timeout_ms: must be a non-negative integer"},
        {"    http_headers: \"X-Team: soc\"\n",
         "o.yaml:5:19: outputs[0].http_headers: must be a list of strings"},
        {"    http_headers: [\"X-Team soc\"]\n",
         "o.yaml:5:20: outputs[0].http_headers[0]: 'X-Team soc' is not a \"Name: value\" header "
         "line"},
        {"    http_headers: [\"X-A: 1\", \"X-B: 2\\r\\nHost: evil\"]\n",
         "o.yaml:5:30: outputs[0].http_headers[1]: contains a line break"},
        {"    http_headers: [\"Bad Name: 1\"]\n",
         "o.yaml:5:20: outputs[0].http_headers[0]: 'Bad Name: 1' is not"},
        {"    facility: local9\n",
         "o.yaml:5:15: outputs[0].facility: 'local9' is not a syslog facility"},
        {"    retry_max: 100\n", "o.yaml:5:5: outputs[0].retry_max: unknown key"},
    };
    for (const auto& c : cases) {
        auto config = load_config_text(head + c.lines, "o.yaml");
        ASSERT_FALSE(config.ok()) << c.lines;
        EXPECT_EQ(config.error().code, ErrorCode::kInvalidArgument);
        EXPECT_EQ(config.error().message.rfind(c.expected, 0), 0u)
            << config.error().message << "\n  expected: " << c.expected;
    }
    // The limits themselves are accepted.
    auto edge = load_config_text(head +
                                     "    file_max_bytes: 0\n    file_max_files: 0\n"
                                     "    block_timeout_ms: 0\n    batch_max_records: 0\n"
                                     "    retry_initial_ms: 3600000\n    retry_max_ms: 3600000\n"
                                     "    io_timeout_ms: 600000\n",
                                 "o.yaml");
    ASSERT_TRUE(edge.ok()) << edge.error().message;
    EXPECT_EQ(edge->outputs[0].file_max_bytes, 0u);
    EXPECT_EQ(edge->outputs[0].retry_max, std::chrono::hours(1));
}

TEST(Config, credential_headers_are_redacted_in_config_show) {
    auto config = load_config_text(
        "outputs:\n  - name: hook\n    type: webhook\n    address: https://h.example/in\n"
        "    http_headers: [\"Authorization: Bearer s3cret\", \"X-Api-Key: k3y\", "
        "\"X-Team: soc\"]\n",
        "h.yaml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    const std::string shown = config_to_yaml(*config);
    EXPECT_EQ(shown.find("s3cret"), std::string::npos) << shown;
    EXPECT_EQ(shown.find("k3y"), std::string::npos) << shown;
    EXPECT_NE(shown.find("Authorization: <redacted>"), std::string::npos) << shown;
    EXPECT_NE(shown.find("X-Api-Key: <redacted>"), std::string::npos) << shown;
    EXPECT_NE(shown.find("X-Team: soc"), std::string::npos) << shown;
}

}  // namespace
}  // namespace gpuguard::agent

namespace gpuguard::agent {
namespace {

// verify: active verification of suspected pools, off by default.
TEST(VerifyConfigTest, off_by_default_every_key_read_and_bad_values_name_file_line_and_key) {
    auto defaults = load_config_text(default_config_yaml(), "<default>");
    ASSERT_TRUE(defaults.ok()) << defaults.error().message;
    EXPECT_FALSE(defaults->verify.active);
    EXPECT_FALSE(VerifyConfig{}.active);
    EXPECT_EQ(defaults->verify.max_per_hour, VerifyConfig{}.max_per_hour);
    EXPECT_EQ(defaults->verify.tls, "auto");

    auto config = load_config_text(
        "verify:\n  active: true\n  max_per_hour: 3\n  peer_interval_s: 600\n"
        "  timeout_ms: 1500\n  tls: never\n  answer_max_bytes: 256\n",
        "v.yaml");
    ASSERT_TRUE(config.ok()) << config.error().message;
    EXPECT_TRUE(config->verify.active);
    EXPECT_EQ(config->verify.max_per_hour, 3u);
    EXPECT_EQ(config->verify.peer_interval_s, 600u);
    EXPECT_EQ(config->verify.timeout_ms, 1500u);
    EXPECT_EQ(config->verify.tls, "never");
    EXPECT_EQ(config->verify.answer_max_bytes, 256u);
    auto shown = load_config_text(config_to_yaml(*config), "shown.yaml");
    ASSERT_TRUE(shown.ok()) << shown.error().message;
    EXPECT_EQ(shown->verify.tls, "never");
    EXPECT_TRUE(shown->verify.active);

    const std::pair<const char*, const char*> cases[] = {
        {"verify:\n  active: yes please\n", "v.yaml:2:11: verify.active: must be true or false"},
        {"verify:\n  tls: sometimes\n",
         "v.yaml:2:8: verify.tls: 'sometimes' is not one of auto, always, never"},
        {"verify:\n  timeout_ms: 50\n",
         "v.yaml:2:15: verify.timeout_ms: 50 is not between 100 and 30000"},
        {"verify:\n  max_per_hour: 0\n",
         "v.yaml:2:17: verify.max_per_hour: 0 is not between 1 and 3600"},
        {"verify:\n  answer_max_bytes: 100000\n",
         "v.yaml:2:21: verify.answer_max_bytes: 100000 is not between 64 and 4096"},
        {"verify:\n  peer_interval_s: 5\n",
         "v.yaml:2:20: verify.peer_interval_s: 5 is not between 60 and 604800"},
        {"verify:\n  actve: true\n", "v.yaml:2:3: verify.actve: unknown key"},
    };
    for (const auto& [yaml, expected] : cases) {
        auto bad = load_config_text(yaml, "v.yaml");
        ASSERT_FALSE(bad.ok()) << yaml;
        EXPECT_NE(bad.error().message.find(expected), std::string::npos)
            << "yaml: " << yaml << "\nmessage: " << bad.error().message;
    }
}

}  // namespace
}  // namespace gpuguard::agent
