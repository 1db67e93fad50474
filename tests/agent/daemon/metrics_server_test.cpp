// /metrics: exact text format, `promtool check metrics`, and a real
// Prometheus server scraping the endpoint on loopback.
#include "gpuguard/daemon/metrics_server.h"

#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;

// A test that needs an external tool fails under GPUGUARD_REQUIRE_PRIVILEGED=1
// (CI) when it is missing, and is skipped (saying why) elsewhere.
#define GG_REQUIRE_TOOL(path)                                                            \
    do {                                                                                 \
        if (access(path, X_OK) != 0) {                                                   \
            if (::gpuguard::testing::privileged_required()) {                            \
                FAIL() << path << " is missing: run scripts/install-deps.sh";            \
            }                                                                            \
            GTEST_SKIP() << path << " is missing (scripts/install-deps.sh installs it)"; \
        }                                                                                \
    } while (0)

backends::Snapshot sample_snapshot() {
    backends::Snapshot snapshot;
    snapshot.sequence = 7;
    backends::GpuDevice nvidia;
    nvidia.index = 0;
    nvidia.vendor = backends::Vendor::kNvidia;
    nvidia.model = "NVIDIA H100 80GB HBM3";
    nvidia.uuid = "GPU-2f6a5e4b";
    nvidia.bus_id = "0000:3b:00.0";
    nvidia.driver = "nvidia";
    nvidia.driver_version = "550.54.15";
    backends::GpuDevice amd;
    amd.index = 1;
    amd.vendor = backends::Vendor::kAmd;
    amd.model = "AMD \"Radeon\" RX\\6900";  // label escaping
    amd.bus_id = "0000:03:00.0";
    amd.driver = "amdgpu";
    snapshot.devices = {nvidia, amd};
    backends::GpuSample g0;
    g0.gpu = 0;
    g0.gpu_utilization_percent = 87;
    g0.memory_used_bytes = 21474836480ull;
    g0.temperature_gpu_celsius = 61;
    g0.energy_joules = 1234.5;
    g0.sm_clock_mhz = 1980;
    g0.ecc_errors_corrected = 3;
    g0.throttle_reasons = std::vector<std::string>{"sw_power_cap"};
    g0.last_xid = 79;
    g0.gpm = backends::GpmActivity{.sm_active = 0.97, .tensor_active = 0.0, .integer_active = 0.81};
    g0.gpm_by_gpu_instance[1] = backends::GpmActivity{.tensor_active = 0.0, .integer_active = 0.7};
    g0.gpm_by_gpu_instance[2] = backends::GpmActivity{.tensor_active = 0.41};
    backends::GpuSample g1;
    g1.gpu = 1;
    g1.fan_speed_percent = 40;
    g1.throttle_reasons = std::vector<std::string>{};
    snapshot.gpus = {g0, g1};
    backends::ProcessSample p;
    p.pid = 4242;
    p.gpu = 0;
    p.memory_bytes = 1073741824;
    p.compute_percent = 93;
    p.engine_busy_ns = 1500000000;
    snapshot.processes = {p};
    snapshot.backends = {{"nvml", true, ""}, {"drm", false, "sysfs gone"}};
    return snapshot;
}

std::vector<AgentMetric> agent_metrics() {
    return {{"gpuguard_events_total", "Events decoded.", "counter", {{"type", "exec"}}, 120},
            {"gpuguard_events_total", "Events decoded.", "counter", {{"type", "gpu_open"}}, 7},
            {"gpuguard_ring_buffer_drops_total", "Events lost.", "counter", {}, 0},
            {"bad name", "x", "counter", {}, 1},
            {"gpuguard_x", "x", "histogram", {}, 1}};
}

TEST(MetricsServer, renders_families_labels_and_units) {
    const std::string text = render_metrics(sample_snapshot(), agent_metrics());
    const std::string g0 =
        "gpu=\"0\",uuid=\"GPU-2f6a5e4b\",vendor=\"nvidia\",model=\"NVIDIA H100 80GB HBM3\"";
    auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
    EXPECT_TRUE(has("# TYPE gpuguard_gpu_utilization_ratio gauge")) << text;
    EXPECT_TRUE(has("gpuguard_gpu_utilization_ratio{" + g0 + "} 0.87")) << text;
    EXPECT_TRUE(has("gpuguard_gpu_memory_used_bytes{" + g0 + "} 21474836480"));
    EXPECT_TRUE(has("gpuguard_gpu_temperature_celsius{" + g0 + ",sensor=\"gpu\"} 61"));
    EXPECT_TRUE(has("# TYPE gpuguard_gpu_energy_joules_total counter"));
    EXPECT_TRUE(has("gpuguard_gpu_energy_joules_total{" + g0 + "} 1234.5"));
    EXPECT_TRUE(has("gpuguard_gpu_clock_hertz{" + g0 + ",clock=\"sm\"} 1980000000"));
    EXPECT_TRUE(has("gpuguard_gpu_ecc_errors_total{" + g0 + ",type=\"corrected\"} 3"));
    EXPECT_TRUE(has("gpuguard_gpu_throttle_reason{" + g0 + ",reason=\"sw_power_cap\"} 1"));
    EXPECT_TRUE(has("gpuguard_gpu_throttled{" + g0 + "} 1"));
    EXPECT_TRUE(has("gpuguard_gpu_last_xid{" + g0 + "} 79"));
    EXPECT_TRUE(has("# TYPE DCGM_FI_PROF_PIPE_INT_ACTIVE gauge"));
    EXPECT_TRUE(has("DCGM_FI_PROF_PIPE_INT_ACTIVE{" + g0 + "} 0.81"));
    EXPECT_TRUE(has("DCGM_FI_PROF_SM_ACTIVE{" + g0 + "} 0.97"));
    EXPECT_TRUE(has("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{" + g0 + "} 0"));
    // Each MIG GPU instance's own, labelled as dcgm-exporter labels them.
    EXPECT_TRUE(has("DCGM_FI_PROF_PIPE_INT_ACTIVE{" + g0 + ",GPU_I_ID=\"1\"} 0.7")) << text;
    EXPECT_TRUE(has("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{" + g0 + ",GPU_I_ID=\"2\"} 0.41"));
    EXPECT_EQ(text.find("DCGM_FI_PROF_PIPE_FP64_ACTIVE"), std::string::npos)
        << "a pipe NVML did not report is left out";
    EXPECT_EQ(text.find("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""), std::string::npos)
        << "a GPU without GPM has no DCGM series";
    EXPECT_TRUE(has("gpuguard_gpu_info{" + g0 +
                    ",bus_id=\"0000:3b:00.0\",driver=\"nvidia\",driver_version=\"550.54.15\"} 1"));
    const std::string g1 =
        "gpu=\"1\",uuid=\"\",vendor=\"amd\",model=\"AMD \\\"Radeon\\\" RX\\\\6900\"";
    EXPECT_TRUE(has("gpuguard_gpu_fan_speed_ratio{" + g1 + "} 0.4")) << text;
    EXPECT_TRUE(has("gpuguard_gpu_throttled{" + g1 + "} 0"));
    EXPECT_TRUE(has("gpuguard_process_gpu_memory_bytes{" + g0 + ",pid=\"4242\"} 1073741824"));
    EXPECT_TRUE(has("gpuguard_process_gpu_utilization_ratio{" + g0 + ",pid=\"4242\"} 0.93"));
    EXPECT_TRUE(has("gpuguard_process_gpu_engine_busy_seconds_total{" + g0 + ",pid=\"4242\"} 1.5"));
    EXPECT_TRUE(has("gpuguard_backend_up{backend=\"drm\"} 0"));
    EXPECT_TRUE(has("gpuguard_events_total{type=\"gpu_open\"} 7"));
    EXPECT_TRUE(has("gpuguard_ring_buffer_drops_total 0"));
    // Absent telemetry is absent, never 0; invalid agent metrics are dropped.
    EXPECT_EQ(text.find("gpuguard_gpu_utilization_ratio{gpu=\"1\""), std::string::npos);
    EXPECT_EQ(text.find("gpuguard_gpu_power_watts"), std::string::npos);
    EXPECT_EQ(text.find("bad name"), std::string::npos);
    EXPECT_EQ(text.find("gpuguard_x"), std::string::npos);
    // One HELP/TYPE per family.
    size_t types = 0;
    for (size_t at = text.find("# TYPE gpuguard_events_total"); at != std::string::npos;
         at = text.find("# TYPE gpuguard_events_total", at + 1)) {
        ++types;
    }
    EXPECT_EQ(types, 1u);
}

TEST(MetricsServer, refuses_non_loopback_addresses) {
    MetricsServerOptions options;
    options.listen = "0.0.0.0";
    options.port = 0;
    auto server = MetricsServer::start(options, {}, {});
    ASSERT_FALSE(server.ok());
    EXPECT_EQ(server.error().code, ErrorCode::kInvalidArgument);
}

TEST(MetricsServer, serves_metrics_and_reports_a_busy_port) {
    MetricsServerOptions options;
    options.port = 0;
    auto server = MetricsServer::start(options, sample_snapshot, agent_metrics);
    ASSERT_TRUE(server.ok()) << server.error().message;
    httplib::Client client("127.0.0.1", (*server)->port());
    client.set_read_timeout(5, 0);
    auto response = client.Get("/metrics");
    ASSERT_TRUE(response);
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->get_header_value("Content-Type"),
              "text/plain; version=0.0.4; charset=utf-8");
    EXPECT_NE(response->body.find("gpuguard_gpu_utilization_ratio"), std::string::npos);
    EXPECT_EQ(client.Get("/nope")->status, 404);
    MetricsServerOptions same = options;
    same.port = (*server)->port();
    auto second = MetricsServer::start(same, sample_snapshot, {});
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.error().code, ErrorCode::kIo);
    EXPECT_NE(second.error().message.find("cannot listen on 127.0.0.1:"), std::string::npos)
        << second.error().message;
}

// Read-only: GET and HEAD are served; no other method reaches a handler
// (the status page too), whatever the path.
TEST(MetricsServer, answers_only_reads) {
    MetricsServerOptions options;
    options.port = 0;
    int status_calls = 0;
    options.status_json = [&status_calls] {
        ++status_calls;
        return std::string("{}");
    };
    auto server = MetricsServer::start(options, sample_snapshot, agent_metrics);
    ASSERT_TRUE(server.ok()) << server.error().message;
    httplib::Client client("127.0.0.1", (*server)->port());
    client.set_read_timeout(5, 0);
    for (const char* path : {"/metrics", "/status", "/status.json", "/"}) {
        auto expect_refused = [&](const httplib::Result& response, const char* method) {
            ASSERT_TRUE(response) << method << " " << path;
            EXPECT_GE(response->status, 400) << method << " " << path;
            EXPECT_LT(response->status, 500) << method << " " << path;
        };
        expect_refused(client.Post(path, "x", "text/plain"), "POST");
        expect_refused(client.Put(path, "x", "text/plain"), "PUT");
        expect_refused(client.Delete(path), "DELETE");
        expect_refused(client.Patch(path, "x", "text/plain"), "PATCH");
    }
    EXPECT_EQ(status_calls, 0) << "a write request reached the status handler";
    EXPECT_EQ(client.Get("/metrics")->status, 200);
}

TEST(MetricsServer, promtool_accepts_the_output) {
    GG_REQUIRE_TOOL("/usr/bin/promtool");
    gpuguard::testing::TempDir dir("gg-promtool");
    std::ofstream(dir / "metrics.txt") << render_metrics(sample_snapshot(), agent_metrics());
    const auto result = gpuguard::testing::run_command(
        {"/bin/sh", "-c", "/usr/bin/promtool check metrics < " + (dir / "metrics.txt").string()},
        30s);
    EXPECT_EQ(result.exit_code, 0) << result.stdout_text << result.stderr_text;
    EXPECT_EQ(result.stdout_text + result.stderr_text, "") << "lint findings";
}

uint16_t free_loopback_port() {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
        close(fd);
        return 0;
    }
    close(fd);
    return ntohs(address.sin_port);
}

TEST(MetricsServer, real_prometheus_scrapes_it_on_loopback) {
    GG_REQUIRE_TOOL("/usr/bin/prometheus");
    MetricsServerOptions options;
    options.port = 0;
    auto server = MetricsServer::start(options, sample_snapshot, agent_metrics);
    ASSERT_TRUE(server.ok()) << server.error().message;
    gpuguard::testing::TempDir dir("gg-prometheus");
    const uint16_t web_port = free_loopback_port();
    ASSERT_NE(web_port, 0);
    std::ofstream(dir / "prometheus.yml")
        << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        << "scrape_configs:\n  - job_name: gpuguard\n    static_configs:\n"
        << "      - targets: ['127.0.0.1:" << (*server)->port() << "']\n";
    gpuguard::testing::Subprocess prometheus(
        {"/usr/bin/prometheus", "--config.file=" + (dir / "prometheus.yml").string(),
         "--storage.tsdb.path=" + (dir / "data").string(),
         "--web.listen-address=127.0.0.1:" + std::to_string(web_port), "--log.level=warn"});
    httplib::Client client("127.0.0.1", web_port);
    client.set_connection_timeout(1, 0);
    client.set_read_timeout(2, 0);
    // Bounded wait: Prometheus starts, scrapes every second, answers queries.
    nlohmann::json value;
    const auto deadline = std::chrono::steady_clock::now() + 45s;
    while (std::chrono::steady_clock::now() < deadline) {
        auto response = client.Get(
            "/api/v1/query?query=gpuguard_process_gpu_memory_bytes%7Bpid%3D%224242%22%7D");
        if (response && response->status == 200) {
            const auto body = nlohmann::json::parse(response->body, nullptr, false);
            if (!body.is_discarded() && body["status"] == "success" &&
                !body["data"]["result"].empty()) {
                value = body["data"]["result"][0];
                break;
            }
        }
        std::this_thread::sleep_for(250ms);
    }
    ASSERT_FALSE(value.is_null()) << "Prometheus never stored a scraped sample:\n"
                                  << prometheus.stderr_text();
    EXPECT_EQ(value["metric"]["uuid"], "GPU-2f6a5e4b");
    EXPECT_EQ(value["metric"]["vendor"], "nvidia");
    EXPECT_EQ(value["metric"]["model"], "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(value["value"][1], "1073741824");
    auto targets = client.Get("/api/v1/targets");
    ASSERT_TRUE(targets);
    const auto parsed = nlohmann::json::parse(targets->body, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded());
    EXPECT_EQ(parsed["data"]["activeTargets"][0]["health"], "up") << targets->body;
    EXPECT_EQ(parsed["data"]["activeTargets"][0]["lastError"], "");
}

}  // namespace
}  // namespace gpuguard::agent
